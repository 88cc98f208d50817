import type { Signatures } from '../crypto/signing.ts';
import { serverNameOf } from '../events/identifiers.ts';
import type { Database } from '../storage/database.ts';
import { isServedDevice, type RemoteDeviceLists } from './device-lists.ts';
import { DEFAULT_REMOTE_KEYS_TIMEOUT_MS, type CrossSigningKey, type DeviceKeys, type KeysDirectory, type RemoteKeysOptions } from './types.ts';

/** /keys/query's answer (client-server); over federation only the first three parts are sent. */
export interface KeysQueryResult {
  device_keys: Record<string, Record<string, DeviceKeys>>;
  master_keys: Record<string, CrossSigningKey>;
  self_signing_keys: Record<string, CrossSigningKey>;
  user_signing_keys: Record<string, CrossSigningKey>;
  failures: Record<string, Record<string, unknown>>;
}

/** A local user's devices as another server asks for them (server-server GET /user/devices). */
export interface UserDevices {
  user_id: string;
  stream_id: number;
  devices: { device_id: string; keys: DeviceKeys; device_display_name?: string }[];
  master_key?: CrossSigningKey;
  self_signing_key?: CrossSigningKey;
}

/**
 * Who has which keys: /keys/query for clients and other servers (local users from our
 * tables, other servers' users from their device lists as we hold them), and a local
 * user's devices as another server asks for them.
 */
export class KeyQueries {
  constructor(private readonly db: Database, private readonly users: KeysDirectory, private readonly remoteLists: RemoteDeviceLists) {}

  /**
   * Device and cross-signing keys of the given users (client-server POST /keys/query).
   * `requesterId` sees the signatures their user-signing key made and their own
   * user-signing key; other servers asking (no requester) see neither. Users of other
   * servers are asked of their servers, one request per server, failures per server.
   */
  async query(requesterId: string | undefined, request: Record<string, string[]>, options: RemoteKeysOptions = {}): Promise<KeysQueryResult> {
    const result: KeysQueryResult = { device_keys: {}, master_keys: {}, self_signing_keys: {}, user_signing_keys: {}, failures: {} };
    const remote = new Map<string, Record<string, string[]>>();
    for (const [userId, deviceIds] of Object.entries(request)) {
      if (!this.users.isLocal(userId)) {
        remote.set(serverNameOf(userId), { ...remote.get(serverNameOf(userId)), [userId]: deviceIds });
        continue;
      }
      const wanted = deviceIds.length > 0 ? new Set(deviceIds) : undefined;
      const names = new Map((await this.users.listDevices(userId)).map((d) => [d.device_id, d.display_name]));
      const signatures = await this.db.all<{ target_key_id: string; signer_user_id: string; signer_key_id: string; signature: string }>(
        'SELECT target_key_id, signer_user_id, signer_key_id, signature FROM key_signatures WHERE target_user_id = ?', [userId],
      );
      const addSignatures = (object: { signatures?: Signatures }, targetKeyId: string, signers: string[]) => {
        for (const s of signatures) {
          if (s.target_key_id !== targetKeyId || !signers.includes(s.signer_user_id)) continue;
          object.signatures ??= {};
          object.signatures[s.signer_user_id] = { ...(object.signatures[s.signer_user_id] ?? {}), [s.signer_key_id]: s.signature };
        }
      };

      const devices: Record<string, DeviceKeys> = {};
      for (const row of await this.db.all<{ device_id: string; key_json: string }>('SELECT device_id, key_json FROM device_keys WHERE user_id = ? ORDER BY device_id', [userId])) {
        if (wanted && !wanted.has(row.device_id)) continue;
        if (!names.has(row.device_id)) continue;
        const keys = JSON.parse(row.key_json) as DeviceKeys;
        // A device's keys carry the signatures of its owner's self-signing key.
        addSignatures(keys, row.device_id, [userId]);
        const name = names.get(row.device_id);
        keys['unsigned'] = name ? { device_display_name: name } : {};
        devices[row.device_id] = keys;
      }
      result.device_keys[userId] = devices;

      for (const row of await this.db.all<{ key_type: string; public_key: string; key_json: string }>(
        'SELECT key_type, public_key, key_json FROM cross_signing_keys WHERE user_id = ?', [userId],
      )) {
        const key = JSON.parse(row.key_json) as CrossSigningKey;
        if (row.key_type === 'master') {
          // Signatures by the owner's devices, and by the requester's user-signing key.
          addSignatures(key, row.public_key, requesterId && requesterId !== userId ? [userId, requesterId] : [userId]);
          result.master_keys[userId] = key;
        } else if (row.key_type === 'self_signing') {
          result.self_signing_keys[userId] = key;
        } else if (row.key_type === 'user_signing' && userId === requesterId) {
          result.user_signing_keys[userId] = key;
        }
      }
    }
    await this.queryRemote(requesterId, remote, result, options.timeoutMs ?? DEFAULT_REMOTE_KEYS_TIMEOUT_MS);
    return result;
  }

  /**
   * Users of other servers, answered from their device lists as we hold them: fresh
   * lists as they are; stale or never-synced ones are resynced first, waiting at most
   * `timeoutMs`. A server that fails is named in `failures`, and what we hold is still
   * given (the client then knows it may be old).
   */
  private async queryRemote(requesterId: string | undefined, byServer: Map<string, Record<string, string[]>>, result: KeysQueryResult, timeoutMs: number): Promise<void> {
    await Promise.all([...byServer].map(async ([server, asked]) => {
      const outcomes = await Promise.allSettled(Object.keys(asked).map((userId) => this.remoteLists.ensureFresh(userId, timeoutMs)));
      const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
      if (failed) {
        const error = failed.reason as { errcode?: unknown; message?: unknown };
        result.failures[server] = { errcode: typeof error.errcode === 'string' ? error.errcode : 'M_UNKNOWN', error: String(error.message ?? error) };
      }
      for (const [userId, deviceIds] of Object.entries(asked)) {
        const list = await this.remoteLists.get(userId);
        if (!list || (list.stale && list.streamId === 0)) continue; // never synced: nothing to say
        const devices: Record<string, DeviceKeys> = {};
        for (const [deviceId, device] of Object.entries(list.devices)) {
          if (!isServedDevice(device) || (deviceIds.length > 0 && !deviceIds.includes(deviceId))) continue;
          devices[deviceId] = { ...device.keys, unsigned: device.device_display_name ? { device_display_name: device.device_display_name } : {} };
        }
        result.device_keys[userId] = devices;
        if (list.master_key) result.master_keys[userId] = await this.withRequesterSignatures(list.master_key, userId, requesterId);
        if (list.self_signing_key) result.self_signing_keys[userId] = list.self_signing_key;
      }
    }));
  }

  /** A remote user's master key with the signature the requester's user-signing key made of it, which only they see. */
  private async withRequesterSignatures(key: CrossSigningKey, userId: string, requesterId: string | undefined): Promise<CrossSigningKey> {
    if (!requesterId) return key;
    const rows = await this.db.all<{ signer_key_id: string; signature: string }>(
      'SELECT signer_key_id, signature FROM key_signatures WHERE target_user_id = ? AND signer_user_id = ?', [userId, requesterId],
    );
    if (rows.length === 0) return key;
    const mine = Object.fromEntries(rows.map((r) => [r.signer_key_id, r.signature]));
    return { ...key, signatures: { ...(key.signatures ?? {}), [requesterId]: { ...(key.signatures?.[requesterId] ?? {}), ...mine } } };
  }

  /** A local user's devices with their keys, for another server (server-server GET /user/devices). */
  async userDevices(userId: string): Promise<UserDevices> {
    const keys = await this.query(undefined, { [userId]: [] });
    const stream = await this.db.get<{ id: number | null }>('SELECT MAX(stream_id) AS id FROM device_list_stream WHERE user_id = ?', [userId]);
    // Only devices that uploaded keys: the spec requires `keys`, and a device without them cannot be encrypted to.
    const devices = Object.values(keys.device_keys[userId] ?? {}).map(({ unsigned, ...signed }) => {
      const name = (unsigned as { device_display_name?: string } | undefined)?.device_display_name;
      return { device_id: signed.device_id, keys: signed as DeviceKeys, ...(name ? { device_display_name: name } : {}) };
    });
    const answer: UserDevices = { user_id: userId, stream_id: stream?.id ?? 0, devices };
    if (keys.master_keys[userId]) answer.master_key = keys.master_keys[userId];
    if (keys.self_signing_keys[userId]) answer.self_signing_key = keys.self_signing_keys[userId];
    return answer;
  }

  /** One local device's keys, as /keys/query serves them to its owner. */
  async deviceKeys(userId: string, deviceId: string): Promise<DeviceKeys | undefined> {
    return (await this.query(userId, { [userId]: [deviceId] })).device_keys[userId]?.[deviceId];
  }
}
