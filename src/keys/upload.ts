import { canonicalJson } from '../crypto/canonical-json.ts';
import type { Database } from '../storage/database.ts';
import type { KeyChangeLog } from './change-log.ts';
import { keysBadJson, keysInvalidParam } from './errors.ts';
import type { DeviceKeys, OneTimeKey } from './types.ts';

export interface UploadKeysRequest {
  device_keys?: DeviceKeys;
  one_time_keys?: Record<string, OneTimeKey>;
  fallback_keys?: Record<string, OneTimeKey>;
}

/** The one-time key algorithm clients count on seeing, even at zero. */
const SIGNED_CURVE25519 = 'signed_curve25519';

function splitKeyId(id: string): [string, string] {
  const colon = id.indexOf(':');
  if (colon <= 0 || colon === id.length - 1) throw keysBadJson(`key ID ${JSON.stringify(id)} is not of the form <algorithm>:<key_id>`);
  return [id.slice(0, colon), id.slice(colon + 1)];
}

const COUNT_SQL = 'SELECT algorithm, COUNT(*) AS n FROM one_time_keys WHERE user_id = ? AND device_id = ? GROUP BY algorithm';

function oneTimeKeyCounts(rows: { algorithm: string; n: number }[]): Record<string, number> {
  // signed_curve25519 is always present: some clients read its absence as "unknown" and never upload.
  const counts: Record<string, number> = { [SIGNED_CURVE25519]: 0 };
  for (const row of rows) counts[row.algorithm] = row.n;
  return counts;
}

/**
 * A device's own keys (client-server POST /keys/upload): its identity keys, which
 * are a device list change, and its one-time and fallback keys, which others claim.
 */
export class KeyUpload {
  constructor(private readonly db: Database, private readonly changeLog: KeyChangeLog) {}

  /** Stores a device's keys (client-server POST /keys/upload); returns its one-time key counts. */
  async upload(userId: string, deviceId: string, request: UploadKeysRequest): Promise<Record<string, number>> {
    let deviceJson: string | undefined;
    if (request.device_keys) {
      const { unsigned: _unsigned, ...deviceKeys } = request.device_keys;
      await this.checkDeviceKeys(userId, deviceId, deviceKeys as DeviceKeys);
      deviceJson = canonicalJson(deviceKeys);
    }
    const oneTimeKeys = Object.entries(request.one_time_keys ?? {}).map(([id, key]) => [...splitKeyId(id), canonicalJson(key)] as const);
    const fallbackKeys = Object.entries(request.fallback_keys ?? {}).map(([id, key]) => [...splitKeyId(id), canonicalJson(key)] as const);
    const fallbackAlgorithms = new Set(fallbackKeys.map(([algorithm]) => algorithm));
    if (fallbackAlgorithms.size !== fallbackKeys.length) throw keysInvalidParam('at most one fallback key per algorithm may be uploaded');

    const { counts, position } = await this.db.transaction((tx) => {
      let position: number | undefined;
      if (deviceJson !== undefined) {
        const existing = tx.get<{ key_json: string }>('SELECT key_json FROM device_keys WHERE user_id = ? AND device_id = ?', [userId, deviceId]);
        if (existing?.key_json !== deviceJson) {
          tx.run(
            `INSERT INTO device_keys (user_id, device_id, key_json) VALUES (?, ?, ?)
             ON CONFLICT (user_id, device_id) DO UPDATE SET key_json = excluded.key_json`,
            [userId, deviceId, deviceJson],
          );
          // Signatures others made over the old keys no longer apply.
          if (existing) tx.run('DELETE FROM key_signatures WHERE target_user_id = ? AND target_key_id = ?', [userId, deviceId]);
          position = this.changeLog.recordDeviceChange(tx, userId, deviceId, false);
        }
      }
      for (const [algorithm, keyId, json] of oneTimeKeys) {
        const existing = tx.get<{ key_json: string }>(
          'SELECT key_json FROM one_time_keys WHERE user_id = ? AND device_id = ? AND algorithm = ? AND key_id = ?',
          [userId, deviceId, algorithm, keyId],
        );
        if (existing) {
          if (existing.key_json !== json) throw keysInvalidParam(`one-time key ${algorithm}:${keyId} already exists with different content`);
          continue;
        }
        tx.run('INSERT INTO one_time_keys (user_id, device_id, algorithm, key_id, key_json) VALUES (?, ?, ?, ?, ?)', [
          userId, deviceId, algorithm, keyId, json,
        ]);
      }
      for (const [algorithm, keyId, json] of fallbackKeys) {
        const existing = tx.get<{ key_id: string; key_json: string }>(
          'SELECT key_id, key_json FROM fallback_keys WHERE user_id = ? AND device_id = ? AND algorithm = ?', [userId, deviceId, algorithm],
        );
        // Re-uploading the current fallback key keeps whether it was used.
        if (existing && existing.key_id === keyId && existing.key_json === json) continue;
        tx.run(
          `INSERT INTO fallback_keys (user_id, device_id, algorithm, key_id, key_json, used) VALUES (?, ?, ?, ?, ?, 0)
           ON CONFLICT (user_id, device_id, algorithm) DO UPDATE SET key_id = excluded.key_id, key_json = excluded.key_json, used = 0`,
          [userId, deviceId, algorithm, keyId, json],
        );
      }
      return { counts: oneTimeKeyCounts(tx.all<{ algorithm: string; n: number }>(COUNT_SQL, [userId, deviceId])), position };
    });
    if (position !== undefined) await this.changeLog.announce(position, [{ userId, kind: 'device', audience: null }]);
    return counts;
  }

  /**
   * The structure is checked (the route checked the types); the keys and signatures are
   * opaque strings that clients verify, as Synapse and Dendrite store them.
   */
  private async checkDeviceKeys(userId: string, deviceId: string, keys: DeviceKeys): Promise<void> {
    if (keys.user_id !== userId) throw keysBadJson('device_keys.user_id does not match the authenticated user');
    if (keys.device_id !== deviceId) throw keysBadJson('device_keys.device_id does not match the authenticated device');
  }

  /** One-time key counts and unused fallback key algorithms for a device (for /sync). */
  async keyCounts(userId: string, deviceId: string): Promise<{ counts: Record<string, number>; unusedFallback: string[] }> {
    const counts = oneTimeKeyCounts(await this.db.all<{ algorithm: string; n: number }>(COUNT_SQL, [userId, deviceId]));
    const fallback = await this.db.all<{ algorithm: string }>(
      'SELECT algorithm FROM fallback_keys WHERE user_id = ? AND device_id = ? AND used = 0 ORDER BY algorithm', [userId, deviceId],
    );
    return { counts, unusedFallback: fallback.map((r) => r.algorithm) };
  }
}
