import { serverNameOf } from '../events/identifiers.ts';
import type { Database, WriteTransaction } from '../storage/database.ts';
import { nextStreamId, type StreamNotify } from '../storage/stream.ts';

/** The spec's recommended cap on to-device messages per /sync response. */
export const MAX_TO_DEVICE_PER_SYNC = 100;

export interface ToDeviceEvent {
  sender: string;
  type: string;
  content: Record<string, unknown>;
}

/** Messages by user ID, then device ID (`*`: every device of the user). */
export type ToDeviceMessages = Record<string, Record<string, Record<string, unknown>>>;

/** An m.direct_to_device EDU's content (server-server §Send-to-device messaging). */
export interface DirectToDeviceContent {
  sender: string;
  type: string;
  message_id: string;
  messages: ToDeviceMessages;
}

/**
 * Federation's hook for messages to other servers' users, called inside the write
 * that records the client's transaction ID, so they are queued exactly once. The
 * returned function, if any, runs once the write is durable.
 */
export type ToDeviceOutbox = (tx: WriteTransaction, outgoing: { destination: string; content: DirectToDeviceContent }[]) => (() => void) | void;

interface Directory {
  isLocal(userId: string): boolean;
  listDevices(userId: string): Promise<{ device_id: string }[]>;
}

/**
 * Send-to-device messaging (client-server §Send-to-Device messaging). Messages wait
 * for their device; a /sync carries up to 100 of them in arrival order and marks them
 * with its next_batch position; a later /sync from that position or beyond
 * acknowledges them and they are deleted. A /sync retried from an older token gets
 * them again, so a lost response loses nothing.
 */
export class ToDevice {
  constructor(
    private readonly db: Database,
    private readonly notify: StreamNotify,
    private readonly users: Directory,
    /** Where messages for other servers go (federation's queues); without it they are dropped. */
    private readonly outbox?: ToDeviceOutbox,
  ) {}

  /**
   * Queues one message per target device (client-server PUT /sendToDevice). `*` means
   * every device of the user. A repeated transaction ID from the same device is a no-op.
   * Messages for other servers' users go to the outbox, one EDU per server.
   */
  async send(sender: { userId: string; deviceId: string }, txnId: string, type: string, messages: ToDeviceMessages): Promise<void> {
    const targets = await this.localTargets(messages);
    const byServer = new Map<string, ToDeviceMessages>();
    for (const [userId, byDevice] of Object.entries(messages)) {
      if (this.users.isLocal(userId)) continue;
      const server = serverNameOf(userId);
      byServer.set(server, { ...byServer.get(server), [userId]: byDevice });
    }
    const outgoing = [...byServer].map(([destination, messages]) => ({
      destination,
      // At most 32 code points, unique per origin: the receiver dedupes by it.
      content: { sender: sender.userId, type, message_id: crypto.randomUUID().replace(/-/g, ''), messages },
    }));
    const { position, afterCommit } = await this.db.transaction((tx) => {
      const seen = tx.get('SELECT 1 FROM to_device_txns WHERE user_id = ? AND device_id = ? AND txn_id = ?', [sender.userId, sender.deviceId, txnId]);
      if (seen) return {};
      tx.run('INSERT INTO to_device_txns (user_id, device_id, txn_id) VALUES (?, ?, ?)', [sender.userId, sender.deviceId, txnId]);
      const afterCommit = outgoing.length > 0 ? this.outbox?.(tx, outgoing) : undefined;
      return { position: this.store(tx, sender.userId, type, targets), afterCommit };
    });
    if (position !== undefined) this.notify({ position, userIds: [...new Set(targets.map((t) => t.userId))] });
    afterCommit?.();
  }

  /**
   * Delivers an m.direct_to_device EDU from `origin` to our users' devices, once per
   * message ID; messages for users of other servers are ignored.
   */
  async deliverRemote(origin: string, message: DirectToDeviceContent): Promise<void> {
    const targets = await this.localTargets(message.messages);
    const position = await this.db.transaction((tx) => {
      if (tx.get('SELECT 1 FROM to_device_received WHERE origin = ? AND message_id = ?', [origin, message.message_id])) return undefined;
      tx.run('INSERT INTO to_device_received (origin, message_id) VALUES (?, ?)', [origin, message.message_id]);
      return this.store(tx, message.sender, message.type, targets);
    });
    if (position !== undefined) this.notify({ position, userIds: [...new Set(targets.map((t) => t.userId))] });
  }

  /** One message per local target device; a message for a named device wins over the same device reached through `*`. */
  private async localTargets(messages: ToDeviceMessages): Promise<{ userId: string; deviceId: string; content: string }[]> {
    const targets: { userId: string; deviceId: string; content: string }[] = [];
    for (const [userId, byDevice] of Object.entries(messages)) {
      if (!this.users.isLocal(userId)) continue;
      const devices = (await this.users.listDevices(userId)).map((d) => d.device_id);
      const contents = new Map<string, Record<string, unknown>>();
      if (byDevice['*'] !== undefined) for (const deviceId of devices) contents.set(deviceId, byDevice['*']);
      for (const [deviceId, content] of Object.entries(byDevice)) {
        if (deviceId !== '*' && devices.includes(deviceId)) contents.set(deviceId, content);
      }
      for (const [deviceId, content] of contents) targets.push({ userId, deviceId, content: JSON.stringify(content) });
    }
    return targets;
  }

  /** Stores messages at a new stream position; undefined when there are none. */
  private store(tx: WriteTransaction, sender: string, type: string, targets: { userId: string; deviceId: string; content: string }[]): number | undefined {
    if (targets.length === 0) return undefined;
    const position = nextStreamId(tx);
    for (const t of targets) {
      tx.run('INSERT INTO to_device_messages (user_id, device_id, stream_id, sender, type, content) VALUES (?, ?, ?, ?, ?, ?)', [
        t.userId, t.deviceId, position, sender, type, t.content,
      ]);
    }
    return position;
  }

  /**
   * The messages a /sync from `since` up to `upTo` carries: those stored by `upTo` that no
   * response up to `since` carried. They are marked as carried by this response.
   *
   * When more wait than one response may carry, the stream is advanced by one position,
   * so the next response has a later next_batch than this one: an acknowledgement of
   * this response's position then never covers messages only a later response carried.
   */
  async deliver(userId: string, deviceId: string, since: number, upTo: number, limit = MAX_TO_DEVICE_PER_SYNC): Promise<ToDeviceEvent[]> {
    limit = Math.max(1, Math.min(limit, MAX_TO_DEVICE_PER_SYNC));
    const rows = await this.db.all<{ id: number; sender: string; type: string; content: string }>(
      `SELECT id, sender, type, content FROM to_device_messages
       WHERE user_id = ? AND device_id = ? AND stream_id <= ? AND (delivered_at IS NULL OR delivered_at > ?)
       ORDER BY id LIMIT ?`,
      [userId, deviceId, upTo, since, limit + 1],
    );
    if (rows.length === 0) return [];
    const more = rows.length > limit;
    const carried = rows.slice(0, limit);
    await this.db.transaction((tx) => {
      for (const row of carried) tx.run('UPDATE to_device_messages SET delivered_at = ? WHERE id = ?', [upTo, row.id]);
      if (more) nextStreamId(tx);
    });
    return carried.map((r) => ({ sender: r.sender, type: r.type, content: JSON.parse(r.content) as Record<string, unknown> }));
  }

  /** Deletes the messages that responses up to `since` carried: the client has them. */
  async acknowledge(userId: string, deviceId: string, since: number): Promise<void> {
    const sql = 'FROM to_device_messages WHERE user_id = ? AND device_id = ? AND delivered_at IS NOT NULL AND delivered_at <= ?';
    const params = [userId, deviceId, since];
    if (!(await this.db.get(`SELECT 1 ${sql} LIMIT 1`, params))) return;
    await this.db.transaction((tx) => tx.run(`DELETE ${sql}`, params));
  }

  /** How many messages wait for a device (for tests and diagnostics). */
  async pending(userId: string, deviceId: string): Promise<number> {
    return (await this.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM to_device_messages WHERE user_id = ? AND device_id = ?', [userId, deviceId]))!.n;
  }
}
