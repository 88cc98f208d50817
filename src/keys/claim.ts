import { serverNameOf } from '../events/identifiers.ts';
import type { Database } from '../storage/database.ts';
import { withTimeout } from './device-lists.ts';
import { DEFAULT_REMOTE_KEYS_TIMEOUT_MS, type KeysDirectory, type OneTimeKey, type RemoteKeyServers, type RemoteKeysOptions } from './types.ts';

export interface KeysClaimResult {
  one_time_keys: Record<string, Record<string, Record<string, OneTimeKey>>>;
  failures: Record<string, Record<string, unknown>>;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const objectAt = (value: unknown, key: string): Record<string, unknown> => {
  const inner = isObject(value) ? value[key] : undefined;
  return isObject(inner) ? inner : {};
};

/** Taking a device's one-time (or fallback) key to start a session with it (client-server POST /keys/claim). */
export class KeyClaims {
  constructor(private readonly db: Database, private readonly users: KeysDirectory) {}

  /**
   * Claims one key per (user, device, algorithm) (client-server POST /keys/claim): the
   * oldest one-time key, which is deleted, or else the fallback key, which is marked used.
   * Keys of other servers' users are claimed from their servers.
   */
  async claim(request: Record<string, Record<string, string>>, options: RemoteKeysOptions = {}): Promise<KeysClaimResult> {
    const failures: Record<string, Record<string, unknown>> = {};
    const local: [string, string, string][] = [];
    const remote = new Map<string, Record<string, Record<string, string>>>();
    for (const [userId, devices] of Object.entries(request)) {
      if (!this.users.isLocal(userId)) {
        remote.set(serverNameOf(userId), { ...remote.get(serverNameOf(userId)), [userId]: devices });
        continue;
      }
      for (const [deviceId, algorithm] of Object.entries(devices)) local.push([userId, deviceId, algorithm]);
    }
    const claimed = await this.db.transaction((tx) => {
      const out: Record<string, Record<string, Record<string, OneTimeKey>>> = {};
      for (const [userId, deviceId, algorithm] of local) {
        const oneTime = tx.get<{ seq: number; key_id: string; key_json: string }>(
          'SELECT seq, key_id, key_json FROM one_time_keys WHERE user_id = ? AND device_id = ? AND algorithm = ? ORDER BY seq LIMIT 1',
          [userId, deviceId, algorithm],
        );
        let found: { key_id: string; key_json: string } | undefined = oneTime;
        if (oneTime) {
          tx.run('DELETE FROM one_time_keys WHERE seq = ?', [oneTime.seq]);
        } else {
          found = tx.get<{ key_id: string; key_json: string }>(
            'SELECT key_id, key_json FROM fallback_keys WHERE user_id = ? AND device_id = ? AND algorithm = ?', [userId, deviceId, algorithm],
          );
          if (found) tx.run('UPDATE fallback_keys SET used = 1 WHERE user_id = ? AND device_id = ? AND algorithm = ?', [userId, deviceId, algorithm]);
        }
        if (!found) continue;
        out[userId] ??= {};
        out[userId][deviceId] = { [`${algorithm}:${found.key_id}`]: JSON.parse(found.key_json) as OneTimeKey };
      }
      return out;
    });
    await this.askServers(remote, failures, options, (client, server, asked, signal) => client.userKeysClaim(server, asked, signal), (asked, answer) => {
      // A server answers for the users and devices we asked it about, nothing else.
      for (const [userId, devices] of Object.entries(asked)) {
        for (const deviceId of Object.keys(devices)) {
          const keys = objectAt(objectAt(answer['one_time_keys'], userId), deviceId);
          if (Object.keys(keys).length === 0) continue;
          claimed[userId] ??= {};
          claimed[userId][deviceId] = keys as Record<string, OneTimeKey>;
        }
      }
    });
    return { one_time_keys: claimed, failures };
  }

  /**
   * Asks each server about its users, in parallel, and takes in the answers that come
   * in time; a server that fails or is too slow is named in `failures`.
   */
  private async askServers<T>(
    byServer: Map<string, T>,
    failures: Record<string, Record<string, unknown>>,
    { remote, timeoutMs = DEFAULT_REMOTE_KEYS_TIMEOUT_MS }: RemoteKeysOptions,
    ask: (remote: RemoteKeyServers, server: string, asked: T, signal: AbortSignal) => Promise<Record<string, unknown>>,
    take: (asked: T, answer: Record<string, unknown>) => void,
  ): Promise<void> {
    await Promise.all([...byServer].map(async ([server, asked]) => {
      if (!remote) {
        failures[server] = { errcode: 'M_UNKNOWN', error: 'this homeserver does not federate' };
        return;
      }
      try {
        const abort = new AbortController();
        take(asked, await withTimeout(ask(remote, server, asked, abort.signal), timeoutMs, () => (abort.abort(), new Error(`no answer within ${timeoutMs} ms`))));
      } catch (error) {
        const errcode = (error as { errcode?: unknown }).errcode;
        failures[server] = { errcode: typeof errcode === 'string' ? errcode : 'M_UNKNOWN', error: error instanceof Error ? error.message : String(error) };
      }
    }));
  }
}
