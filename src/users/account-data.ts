import { isValidUserId } from '../events/identifiers.ts';
import type { Database, WriteTransaction } from '../storage/database.ts';
import { nextStreamId, type StreamNotify } from '../storage/stream.ts';
import { UsersError } from './errors.ts';
import { PUSH_RULES_TYPE } from './push-rule-edits.ts';

/** The account data type that lists the users someone ignores (client-server §Ignoring users). */
export const IGNORED_USERS_TYPE = 'm.ignored_user_list';

/**
 * A user's account data, global (room ID '') and per room (client-server §Client config), in the users
 * component's `account_data` table: each write takes a stream position, so /sync and sliding sync give
 * what changed since a token.
 */
export class AccountData {
  /** The users each user ignores: asked for every event a client is sent. */
  private readonly ignoredCache = new Map<string, ReadonlySet<string>>();

  constructor(
    private readonly db: Database,
    private readonly notify: StreamNotify,
  ) {}

  /** A write within the caller's transaction (an account's first push rules); it wakes no long-poll. */
  putTx(tx: WriteTransaction, userId: string, roomId: string, type: string, content: object): number {
    const streamId = nextStreamId(tx);
    tx.run(
      `INSERT INTO account_data (user_id, room_id, type, content, stream_id) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (user_id, room_id, type) DO UPDATE SET content = excluded.content, stream_id = excluded.stream_id`,
      [userId, roomId, type, JSON.stringify(content), streamId],
    );
    return streamId;
  }

  async put(userId: string, roomId: string, type: string, content: object): Promise<void> {
    const position = await this.db.transaction((tx) => this.putTx(tx, userId, roomId, type, content));
    this.changed(userId, roomId, type, position);
  }

  /**
   * Account data as a client sets it (PUT /user/{userId}/account_data/...): the types the server keeps through
   * endpoints of their own are refused here, and `m.ignored_user_list`, which the server reads, must have its shape:
   * `{ ignored_users: { <user ID>: {} } }`, never oneself.
   */
  async putFromClient(userId: string, roomId: string, type: string, content: Record<string, unknown>): Promise<void> {
    if (type === 'm.fully_read' || type === PUSH_RULES_TYPE) throw new UsersError(405, 'M_BAD_JSON', `${type} cannot be set through this endpoint`);
    if (roomId === '' && type === IGNORED_USERS_TYPE) {
      const list = content['ignored_users'];
      if (typeof list !== 'object' || list === null || Array.isArray(list)) throw new UsersError(400, 'M_BAD_JSON', 'ignored_users must be an object of user IDs');
      for (const ignored of Object.keys(list)) {
        if (!isValidUserId(ignored)) throw new UsersError(400, 'M_INVALID_PARAM', `${ignored} is not a user ID`);
        if (ignored === userId) throw new UsersError(400, 'M_INVALID_PARAM', 'You cannot ignore yourself');
      }
    }
    await this.put(userId, roomId, type, content);
  }

  /** Read-modify-write of one item, atomically. */
  async update<T extends object>(userId: string, roomId: string, type: string, update: (current: T | undefined) => T): Promise<T> {
    let result!: T;
    const position = await this.db.transaction((tx) => {
      const row = tx.get<{ content: string }>('SELECT content FROM account_data WHERE user_id = ? AND room_id = ? AND type = ?', [userId, roomId, type]);
      result = update(row ? (JSON.parse(row.content) as T) : undefined);
      return this.putTx(tx, userId, roomId, type, result);
    });
    this.changed(userId, roomId, type, position);
    return result;
  }

  async get(userId: string, roomId: string, type: string): Promise<Record<string, unknown> | undefined> {
    const row = await this.db.get<{ content: string }>('SELECT content FROM account_data WHERE user_id = ? AND room_id = ? AND type = ?', [userId, roomId, type]);
    return row ? (JSON.parse(row.content) as Record<string, unknown>) : undefined;
  }

  /** What changed after `since` (all of it when since is 0) up to `upTo`, for /sync. */
  async since(userId: string, since: number, upTo: number): Promise<{ roomId: string; type: string; content: Record<string, unknown> }[]> {
    const rows = await this.db.all<{ room_id: string; type: string; content: string }>(
      'SELECT room_id, type, content FROM account_data WHERE user_id = ? AND stream_id > ? AND stream_id <= ? ORDER BY stream_id',
      [userId, since, upTo],
    );
    return rows.map((r) => ({ roomId: r.room_id, type: r.type, content: JSON.parse(r.content) as Record<string, unknown> }));
  }

  /** The users `userId` ignores (`m.ignored_user_list`), whose events /sync and history leave out. */
  async ignoredUsers(userId: string): Promise<ReadonlySet<string>> {
    let ignored = this.ignoredCache.get(userId);
    if (!ignored) {
      const list = (await this.get(userId, '', IGNORED_USERS_TYPE))?.['ignored_users'];
      ignored = new Set(typeof list === 'object' && list !== null && !Array.isArray(list) ? Object.keys(list) : []);
      this.ignoredCache.set(userId, ignored);
    }
    return ignored;
  }

  /**
   * A room upgrade, as Synapse carries it for each local member: their tags for the old room become the new
   * room's, and the new room joins the old one in whichever m.direct list names it.
   */
  async copyTagsAndDirect(userId: string, fromRoomId: string, toRoomId: string): Promise<void> {
    const tags = await this.get(userId, fromRoomId, 'm.tag');
    const tagged = tags?.['tags'];
    if (tagged && typeof tagged === 'object' && Object.keys(tagged).length > 0) await this.put(userId, toRoomId, 'm.tag', tags);
    const direct = await this.get(userId, '', 'm.direct');
    if (!direct || !Object.values(direct).some((rooms) => Array.isArray(rooms) && rooms.includes(fromRoomId) && !rooms.includes(toRoomId))) return;
    await this.update<Record<string, unknown>>(userId, '', 'm.direct', (current) =>
      Object.fromEntries(Object.entries(current ?? {}).map(([other, rooms]) =>
        [other, Array.isArray(rooms) && rooms.includes(fromRoomId) && !rooms.includes(toRoomId) ? [...rooms, toRoomId] : rooms])),
    );
  }

  /** After any write commits: what is kept in memory of it goes, and long-polls wake. */
  private changed(userId: string, roomId: string, type: string, position: number): void {
    if (roomId === '' && type === IGNORED_USERS_TYPE) this.ignoredCache.delete(userId);
    this.notify({ position, userIds: [userId] });
  }
}
