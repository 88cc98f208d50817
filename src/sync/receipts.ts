import type { Database } from '../storage/database.ts';
import { nextStreamId, type StreamNotify } from '../storage/stream.ts';

export interface ReceiptRow {
  receipt_type: string;
  user_id: string;
  thread_id: string;
  event_id: string;
  ts: number;
}

/** A local user's receipt was stored: what other servers in the room may need to hear. */
export type ReceiptListener = (roomId: string, receipt: ReceiptRow) => void;

/** Read receipts, persisted in the global stream (client-server modules/receipts). */
export class Receipts {
  private readonly listeners = new Set<ReceiptListener>();

  constructor(
    private readonly db: Database,
    private readonly notify: StreamNotify,
    private readonly now: () => number,
  ) {}

  /** Listens to local users' receipts (private ones included: the listener decides); returns the unsubscribe. */
  onLocalReceipt(listener: ReceiptListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A local user's receipt (client-server POST /receipt, /read_markers). */
  async put(roomId: string, userId: string, type: string, eventId: string, threadId = ''): Promise<void> {
    const receipt: ReceiptRow = { receipt_type: type, user_id: userId, thread_id: threadId, event_id: eventId, ts: this.now() };
    await this.store(roomId, [receipt]);
    for (const listener of this.listeners) listener(roomId, receipt);
  }

  /** Receipts of other servers' users (an m.receipt EDU), with the times they carry. */
  async putRemote(roomId: string, receipts: ReceiptRow[]): Promise<void> {
    if (receipts.length > 0) await this.store(roomId, receipts);
  }

  private async store(roomId: string, receipts: ReceiptRow[]): Promise<void> {
    const position = await this.db.transaction((tx) => {
      const stream = nextStreamId(tx);
      for (const r of receipts) {
        tx.run(
          `INSERT INTO receipts (room_id, receipt_type, user_id, thread_id, event_id, ts, stream_id) VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (room_id, receipt_type, user_id, thread_id) DO UPDATE SET event_id = excluded.event_id, ts = excluded.ts, stream_id = excluded.stream_id`,
          [roomId, r.receipt_type, r.user_id, r.thread_id, r.event_id, r.ts, stream],
        );
      }
      return stream;
    });
    this.notify({ position, roomIds: [roomId] });
  }

  /** Receipts in a room changed in (since, upTo]; private receipts only for their owner. */
  async since(roomId: string, viewer: string, since: number, upTo: number): Promise<ReceiptRow[]> {
    return this.db.all<ReceiptRow & Record<string, string | number>>(
      `SELECT receipt_type, user_id, thread_id, event_id, ts FROM receipts
       WHERE room_id = ? AND stream_id > ? AND stream_id <= ? AND (receipt_type != 'm.read.private' OR user_id = ?)`,
      [roomId, since, upTo, viewer],
    );
  }

  /** Rooms with receipts changed in (since, upTo]. */
  async roomsChanged(since: number, upTo: number): Promise<string[]> {
    const rows = await this.db.all<{ room_id: string }>('SELECT DISTINCT room_id FROM receipts WHERE stream_id > ? AND stream_id <= ?', [since, upTo]);
    return rows.map((r) => r.room_id);
  }

  /** A user's read receipts (public and private) in a room, by thread ID ('' for unthreaded ones). */
  async readReceiptsByThread(roomId: string, userId: string): Promise<{ threadId: string; eventId: string }[]> {
    const rows = await this.db.all<{ thread_id: string; event_id: string }>(
      "SELECT thread_id, event_id FROM receipts WHERE room_id = ? AND user_id = ? AND receipt_type IN ('m.read', 'm.read.private')",
      [roomId, userId],
    );
    return rows.map((r) => ({ threadId: r.thread_id, eventId: r.event_id }));
  }

  async latestFor(roomId: string, userId: string): Promise<string | undefined> {
    const row = await this.db.get<{ event_id: string }>(
      "SELECT event_id FROM receipts WHERE room_id = ? AND user_id = ? AND receipt_type IN ('m.read', 'm.read.private') ORDER BY stream_id DESC LIMIT 1",
      [roomId, userId],
    );
    return row?.event_id;
  }
}

/** Receipts as the m.receipt ephemeral event's content. */
export function receiptContent(rows: ReceiptRow[]): Record<string, Record<string, Record<string, { ts: number; thread_id?: string }>>> {
  const content: Record<string, Record<string, Record<string, { ts: number; thread_id?: string }>>> = {};
  for (const row of rows) {
    const byType = (content[row.event_id] ??= {});
    const byUser = (byType[row.receipt_type] ??= {});
    byUser[row.user_id] = row.thread_id ? { ts: row.ts, thread_id: row.thread_id } : { ts: row.ts };
  }
  return content;
}
