import type { Database, WriteTransaction } from '../storage/database.ts';
import { CodedError } from '../util/coded-error.ts';

/** An unknown or expired `pos`: the client starts the connection again (400 M_UNKNOWN_POS). */
export class UnknownPosError extends CodedError {
  override name = 'UnknownPosError';
  constructor(message = 'Unknown or expired position; start the connection again') {
    super(400, 'M_UNKNOWN_POS', message);
  }
}

/** What a connection has sent of a room: its timeline up to `sentStream`, at that membership, with this required_state. */
export interface SentRoom {
  sentStream: number;
  membership: string;
  /** The room's required_state request as sent (canonical JSON of the sorted pairs). */
  requiredState: string;
  /** Users whose member events were sent as `$LAZY` members. */
  lazyMembers: string[];
}

/** Request parameters that stay in force until changed: room subscriptions and extension settings. */
export interface Sticky {
  subscriptions: Record<string, { required_state: string[][]; timeline_limit: number }>;
  extensions: Record<string, Record<string, unknown>>;
}

/** A connection as of the position a request came from (none: a new connection). */
export interface ConnectionState {
  userId: string;
  deviceId: string;
  connId: string;
  connKey: number | undefined;
  pos: number | undefined;
  stream: number;
  ephemeral: number;
  sticky: Sticky;
  rooms: Map<string, SentRoom>;
}

/**
 * Connections, positions and what was sent of each room, in the database so that a connection
 * survives a restart of the homeserver. A room's row is written only at the positions where it was
 * sent: the state at a position is each room's latest row at or before it. Using a position drops
 * the positions answered from it before (a retried request) and those before it, as Synapse does.
 */
export class ConnectionStore {
  constructor(
    private readonly db: Database,
    private readonly now: () => number,
  ) {}

  async open(userId: string, deviceId: string, connId: string, pos: string | undefined): Promise<ConnectionState> {
    const empty: ConnectionState = { userId, deviceId, connId, connKey: undefined, pos: undefined, stream: 0, ephemeral: 0, sticky: { subscriptions: {}, extensions: {} }, rooms: new Map() };
    if (pos === undefined) return empty;
    if (!/^[0-9]{1,15}$/.test(pos)) throw new UnknownPosError();
    const row = await this.db.get<{ conn_key: number; stream: number; ephemeral: number; sticky: string; user_id: string; device_id: string; conn_id: string }>(
      `SELECT p.conn_key, p.stream, p.ephemeral, p.sticky, c.user_id, c.device_id, c.conn_id FROM sliding_sync_positions p
       JOIN sliding_sync_connections c ON c.conn_key = p.conn_key WHERE p.pos = ?`,
      [Number(pos)],
    );
    if (!row || row.user_id !== userId || row.device_id !== deviceId || row.conn_id !== connId) throw new UnknownPosError();
    const rooms = new Map<string, SentRoom>();
    const rows = await this.db.all<{ room_id: string; sent_stream: number; membership: string; required_state: string; lazy_members: string }>(
      // SQLite takes the bare columns from the row with the greatest pos.
      'SELECT room_id, sent_stream, membership, required_state, lazy_members, MAX(pos) FROM sliding_sync_rooms WHERE conn_key = ? AND pos <= ? GROUP BY room_id',
      [row.conn_key, Number(pos)],
    );
    for (const r of rows) rooms.set(r.room_id, { sentStream: r.sent_stream, membership: r.membership, requiredState: r.required_state, lazyMembers: JSON.parse(r.lazy_members) as string[] });
    return { ...empty, connKey: row.conn_key, pos: Number(pos), stream: row.stream, ephemeral: row.ephemeral, sticky: JSON.parse(row.sticky) as Sticky, rooms };
  }

  /** Records a new position answered from `from`, with the rooms sent in it; its `pos`. */
  async save(from: ConnectionState, upTo: { stream: number; ephemeral: number }, sticky: Sticky, sent: Map<string, SentRoom>): Promise<string> {
    const now = this.now();
    const pos = await this.db.transaction((tx) => {
      let connKey = from.connKey;
      if (connKey === undefined) {
        // A new connection replaces the device's old one of the same name.
        const old = tx.get<{ conn_key: number }>('SELECT conn_key FROM sliding_sync_connections WHERE user_id = ? AND device_id = ? AND conn_id = ?', [from.userId, from.deviceId, from.connId]);
        if (old) dropConnection(tx, old.conn_key);
        connKey = tx.run('INSERT INTO sliding_sync_connections (user_id, device_id, conn_id, created_ts) VALUES (?, ?, ?, ?)', [from.userId, from.deviceId, from.connId, now]).lastInsertRowid;
      } else {
        const at = from.pos!;
        // Positions answered from `from` before (a retried request), and all before it, are gone.
        tx.run('DELETE FROM sliding_sync_positions WHERE conn_key = ? AND pos <> ?', [connKey, at]);
        tx.run('DELETE FROM sliding_sync_rooms WHERE conn_key = ? AND pos > ?', [connKey, at]);
        // Rows that a row at `from` supersedes.
        tx.run('DELETE FROM sliding_sync_rooms WHERE conn_key = ? AND pos < ? AND room_id IN (SELECT room_id FROM sliding_sync_rooms WHERE conn_key = ? AND pos = ?)', [connKey, at, connKey, at]);
      }
      const newPos = tx.run('INSERT INTO sliding_sync_positions (conn_key, stream, ephemeral, sticky, created_ts) VALUES (?, ?, ?, ?, ?)', [connKey, upTo.stream, upTo.ephemeral, JSON.stringify(sticky), now]).lastInsertRowid;
      for (const [roomId, room] of sent) {
        tx.run(
          'INSERT INTO sliding_sync_rooms (conn_key, pos, room_id, sent_stream, membership, required_state, lazy_members) VALUES (?, ?, ?, ?, ?, ?, ?)',
          [connKey, newPos, roomId, room.sentStream, room.membership, room.requiredState, JSON.stringify(room.lazyMembers)],
        );
      }
      return newPos;
    });
    return String(pos);
  }
}

/** A device's connections go with it (in the write that removes the device). */
export function dropDeviceConnections(tx: WriteTransaction, userId: string, deviceIds: string[]): void {
  for (const deviceId of deviceIds) {
    for (const { conn_key } of tx.all<{ conn_key: number }>('SELECT conn_key FROM sliding_sync_connections WHERE user_id = ? AND device_id = ?', [userId, deviceId])) dropConnection(tx, conn_key);
  }
}

function dropConnection(tx: WriteTransaction, connKey: number): void {
  tx.run('DELETE FROM sliding_sync_rooms WHERE conn_key = ?', [connKey]);
  tx.run('DELETE FROM sliding_sync_positions WHERE conn_key = ?', [connKey]);
  tx.run('DELETE FROM sliding_sync_connections WHERE conn_key = ?', [connKey]);
}
