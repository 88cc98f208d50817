import type { Database, WriteTransaction } from '../storage/database.ts';
import { KeysError, keysInvalidParam, keysNotFound } from './errors.ts';

/** One backed-up megolm session key (client-server KeyBackupData). */
export interface KeyBackupData {
  first_message_index: number;
  forwarded_count: number;
  is_verified: boolean;
  session_data: Record<string, unknown>;
}

export interface BackupVersion {
  algorithm: string;
  /** Any JSON, as the client gave it: the spec says an object, Synapse takes anything (see README Decisions). */
  auth_data: unknown;
  count: number;
  etag: string;
  version: string;
}

export type RoomKeys = Record<string, { sessions: Record<string, KeyBackupData> }>;

type KeyRow = { room_id: string; session_id: string; first_message_index: number; forwarded_count: number; is_verified: number; session_data: string };

/** Which of two keys for one session the server keeps (client-server §Server-side key backups). */
export function isBetterKey(candidate: KeyBackupData, current: KeyBackupData): boolean {
  if (candidate.is_verified !== current.is_verified) return candidate.is_verified;
  if (candidate.first_message_index !== current.first_message_index) return candidate.first_message_index < current.first_message_index;
  return candidate.forwarded_count < current.forwarded_count;
}

const parseVersion = (version: string): number | undefined => (/^[1-9]\d{0,14}$/.test(version) ? Number(version) : undefined);

const toData = (row: KeyRow): KeyBackupData => ({
  first_message_index: row.first_message_index,
  forwarded_count: row.forwarded_count,
  is_verified: row.is_verified === 1,
  session_data: JSON.parse(row.session_data) as Record<string, unknown>,
});

/**
 * Server-side key backup (client-server §Server-side key backups): versions numbered
 * per user, of which only the newest takes keys; each version's etag changes whenever
 * its keys do.
 */
export class KeyBackup {
  constructor(private readonly db: Database) {}

  async createVersion(userId: string, algorithm: string, authData: unknown): Promise<string> {
    return this.db.transaction((tx) => {
      const next = tx.get<{ v: number }>('SELECT COALESCE(MAX(version), 0) + 1 AS v FROM backup_versions WHERE user_id = ?', [userId])!.v;
      tx.run('INSERT INTO backup_versions (user_id, version, algorithm, auth_data) VALUES (?, ?, ?, ?)', [userId, next, algorithm, JSON.stringify(authData)]);
      return String(next);
    });
  }

  /** A version's information, or the newest one's when `version` is absent; undefined when there is none. */
  async getVersion(userId: string, version?: string): Promise<BackupVersion | undefined> {
    const number = version === undefined ? await this.currentVersion(userId) : parseVersion(version);
    if (number === undefined) return undefined;
    const row = await this.db.get<{ algorithm: string; auth_data: string; etag: number }>(
      'SELECT algorithm, auth_data, etag FROM backup_versions WHERE user_id = ? AND version = ? AND deleted = 0', [userId, number],
    );
    if (!row) return undefined;
    return {
      algorithm: row.algorithm,
      auth_data: JSON.parse(row.auth_data) as unknown,
      count: await this.count(userId, number),
      etag: String(row.etag),
      version: String(number),
    };
  }

  private async currentVersion(userId: string): Promise<number | undefined> {
    const row = await this.db.get<{ v: number | null }>('SELECT MAX(version) AS v FROM backup_versions WHERE user_id = ? AND deleted = 0', [userId]);
    return row?.v ?? undefined;
  }

  private async count(userId: string, version: number): Promise<number> {
    return (await this.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM backup_keys WHERE user_id = ? AND version = ?', [userId, version]))!.n;
  }

  /** Replaces a version's auth_data; the algorithm cannot change. */
  async updateVersion(userId: string, version: string, algorithm: string, authData: unknown): Promise<void> {
    const number = parseVersion(version);
    await this.db.transaction((tx) => {
      const row = number === undefined ? undefined : tx.get<{ algorithm: string }>(
        'SELECT algorithm FROM backup_versions WHERE user_id = ? AND version = ? AND deleted = 0', [userId, number],
      );
      if (!row) throw keysNotFound('Unknown backup version');
      if (row.algorithm !== algorithm) throw keysInvalidParam('Algorithm does not match the backup');
      tx.run('UPDATE backup_versions SET auth_data = ? WHERE user_id = ? AND version = ?', [JSON.stringify(authData), userId, number!]);
    });
  }

  /** Deletes a version and its keys. Deleting a deleted version succeeds; an unknown one is M_NOT_FOUND. */
  async deleteVersion(userId: string, version: string): Promise<void> {
    const number = parseVersion(version);
    await this.db.transaction((tx) => {
      if (number === undefined || !tx.get('SELECT 1 FROM backup_versions WHERE user_id = ? AND version = ?', [userId, number])) {
        throw keysNotFound('Unknown backup version');
      }
      tx.run('UPDATE backup_versions SET deleted = 1 WHERE user_id = ? AND version = ?', [userId, number]);
      tx.run('DELETE FROM backup_keys WHERE user_id = ? AND version = ?', [userId, number]);
    });
  }

  /** Stores keys in the newest version, keeping the better key per session. */
  async putKeys(userId: string, version: string, rooms: RoomKeys): Promise<{ etag: string; count: number }> {
    return this.db.transaction((tx) => {
      const number = this.writableVersion(tx, userId, version);
      let changed = false;
      for (const [roomId, { sessions }] of Object.entries(rooms)) {
        for (const [sessionId, data] of Object.entries(sessions)) {
          const existing = tx.get<KeyRow>(
            'SELECT room_id, session_id, first_message_index, forwarded_count, is_verified, session_data FROM backup_keys WHERE user_id = ? AND version = ? AND room_id = ? AND session_id = ?',
            [userId, number, roomId, sessionId],
          );
          if (existing && !isBetterKey(data, toData(existing))) continue;
          tx.run(
            `INSERT INTO backup_keys (user_id, version, room_id, session_id, first_message_index, forwarded_count, is_verified, session_data)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (user_id, version, room_id, session_id) DO UPDATE SET first_message_index = excluded.first_message_index,
               forwarded_count = excluded.forwarded_count, is_verified = excluded.is_verified, session_data = excluded.session_data`,
            [userId, number, roomId, sessionId, data.first_message_index, data.forwarded_count, data.is_verified ? 1 : 0, JSON.stringify(data.session_data)],
          );
          changed = true;
        }
      }
      return this.finish(tx, userId, number, changed);
    });
  }

  /** Keys of a version: all, one room's, or one session's (undefined when that session has none). */
  async getKeys(userId: string, version: string, roomId?: string, sessionId?: string): Promise<RoomKeys | undefined> {
    const number = await this.existingVersion(userId, version);
    const scope = keyScope(userId, number, roomId, sessionId);
    const rows = await this.db.all<KeyRow>(
      `SELECT room_id, session_id, first_message_index, forwarded_count, is_verified, session_data FROM backup_keys WHERE ${scope.where} ORDER BY room_id, session_id`,
      scope.params,
    );
    if (sessionId !== undefined && rows.length === 0) return undefined;
    const out: RoomKeys = {};
    for (const row of rows) {
      out[row.room_id] ??= { sessions: {} };
      out[row.room_id]!.sessions[row.session_id] = toData(row);
    }
    return out;
  }

  /** Deletes keys of a version: all, one room's, or one session's. */
  async deleteKeys(userId: string, version: string, roomId?: string, sessionId?: string): Promise<{ etag: string; count: number }> {
    const number = await this.existingVersion(userId, version);
    return this.db.transaction((tx) => {
      const scope = keyScope(userId, number, roomId, sessionId);
      return this.finish(tx, userId, number, tx.run(`DELETE FROM backup_keys WHERE ${scope.where}`, scope.params).changes > 0);
    });
  }

  private async existingVersion(userId: string, version: string): Promise<number> {
    const number = parseVersion(version);
    if (number === undefined || !(await this.db.get('SELECT 1 FROM backup_versions WHERE user_id = ? AND version = ? AND deleted = 0', [userId, number]))) {
      throw keysNotFound('Unknown backup version');
    }
    return number;
  }

  private writableVersion(tx: WriteTransaction, userId: string, version: string): number {
    const current = tx.get<{ v: number | null }>('SELECT MAX(version) AS v FROM backup_versions WHERE user_id = ? AND deleted = 0', [userId])?.v ?? null;
    if (current === null) throw keysNotFound('Unknown backup version');
    if (parseVersion(version) !== current) {
      throw new KeysError(403, 'M_WRONG_ROOM_KEYS_VERSION', 'Wrong backup version', { current_version: String(current) });
    }
    return current;
  }

  private finish(tx: WriteTransaction, userId: string, version: number, changed: boolean): { etag: string; count: number } {
    if (changed) tx.run('UPDATE backup_versions SET etag = etag + 1 WHERE user_id = ? AND version = ?', [userId, version]);
    const etag = tx.get<{ etag: number }>('SELECT etag FROM backup_versions WHERE user_id = ? AND version = ?', [userId, version])!.etag;
    const count = tx.get<{ n: number }>('SELECT COUNT(*) AS n FROM backup_keys WHERE user_id = ? AND version = ?', [userId, version])!.n;
    return { etag: String(etag), count };
  }
}

/** The WHERE clause for a version's keys: all of them, one room's, or one session's. */
function keyScope(userId: string, version: number, roomId?: string, sessionId?: string): { where: string; params: (string | number)[] } {
  let where = 'user_id = ? AND version = ?';
  const params: (string | number)[] = [userId, version];
  if (roomId !== undefined) {
    where += ' AND room_id = ?';
    params.push(roomId);
  }
  if (sessionId !== undefined) {
    where += ' AND session_id = ?';
    params.push(sessionId);
  }
  return { where, params };
}
