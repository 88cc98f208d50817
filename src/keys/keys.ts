import { decodeBase64 } from '../crypto/base64.ts';
import { canonicalJson } from '../crypto/canonical-json.ts';
import type { Ed25519Backend } from '../crypto/ed25519.ts';
import { verifyJsonSignature, type Signatures } from '../crypto/signing.ts';
import { serverNameOf } from '../events/identifiers.ts';
import type { Database, WriteTransaction } from '../storage/database.ts';
import { nextStreamId, type StreamNotify } from '../storage/stream.ts';
import { KeyBackup } from './backup.ts';
import type { BackoffPolicy } from '../util/backoff.ts';
import { RemoteDeviceLists, withTimeout } from './device-lists.ts';
import { KeysError, keysBadJson, keysInvalidParam, keysInvalidSignature } from './errors.ts';
import { ToDevice } from './to-device.ts';

/** A device's identity keys, as uploaded to /keys/upload and returned by /keys/query. */
export interface DeviceKeys {
  user_id: string;
  device_id: string;
  algorithms: string[];
  keys: Record<string, string>;
  signatures: Signatures;
  [key: string]: unknown;
}

/** A cross-signing key (master, self-signing or user-signing). */
export interface CrossSigningKey {
  user_id: string;
  usage: string[];
  keys: Record<string, string>;
  signatures?: Signatures;
  [key: string]: unknown;
}

export type CrossSigningKeyType = 'master' | 'self_signing' | 'user_signing';

/** A one-time or fallback key: a bare string (curve25519) or a signed object (signed_curve25519). */
export type OneTimeKey = string | Record<string, unknown>;

export interface UploadKeysRequest {
  device_keys?: DeviceKeys;
  one_time_keys?: Record<string, OneTimeKey>;
  fallback_keys?: Record<string, OneTimeKey>;
}

export interface CrossSigningUpload {
  master_key?: CrossSigningKey;
  self_signing_key?: CrossSigningKey;
  user_signing_key?: CrossSigningKey;
}

/** A membership event in a room, as the device-list computation needs it. */
export interface MemberChange {
  roomId: string;
  userId: string;
  membership: string;
}

/** What the keys component needs to know about rooms (the room engine provides it). */
export interface KeysMembership {
  roomsOf(userId: string, memberships?: string[]): Promise<string[]>;
  members(roomId: string, membership?: string): Promise<string[]>;
  /**
   * Membership events in (from, to], oldest first, in the rooms where `userId` is joined
   * now or whose own membership changed in that range.
   */
  memberChanges(userId: string, from: number, to: number): Promise<MemberChange[]>;
  /** Users of other servers (of `server`, if given) joined to a room a local user is joined to. */
  remoteMembersSharingRooms(server?: string): Promise<string[]>;
}

/** What the keys component needs to know about accounts and devices (the users component provides it). */
export interface KeysDirectory {
  isLocal(userId: string): boolean;
  listDevices(userId: string): Promise<{ device_id: string; display_name: string | null }[]>;
}

export interface KeysOptions {
  db: Database;
  ed25519: Ed25519Backend;
  notify: StreamNotify;
  membership: KeysMembership;
  users: KeysDirectory;
  log?: (message: string, error?: unknown) => void;
  now?: () => number;
  deviceListBackoff?: BackoffPolicy;
}

/** A local user's device list changed at stream positions first..last (for m.device_list_update). */
export type DeviceChangeListener = (userId: string, first: number, last: number) => void;

/** The /sync request and response parts the keys component fills in (structurally Sync's SyncExtension). */
export interface KeysSyncRequest {
  userId: string;
  deviceId: string;
  since: number;
  upTo: number;
  initial: boolean;
}
export interface KeysSyncResponse {
  to_device?: { events: object[] };
  device_lists?: { changed: string[]; left: string[] };
  device_one_time_keys_count?: Record<string, number>;
  device_unused_fallback_key_types?: string[];
}

/** One m.device_list_update EDU's content, for federation to send to peers. */
export interface DeviceListUpdate {
  user_id: string;
  device_id: string;
  stream_id: number;
  prev_id: number[];
  deleted?: true;
  device_display_name?: string;
  keys?: DeviceKeys;
}

/** /keys/query's answer (client-server); over federation only the first three parts are sent. */
export interface KeysQueryResult {
  device_keys: Record<string, Record<string, DeviceKeys>>;
  master_keys: Record<string, CrossSigningKey>;
  self_signing_keys: Record<string, CrossSigningKey>;
  user_signing_keys: Record<string, CrossSigningKey>;
  failures: Record<string, Record<string, unknown>>;
}

export interface KeysClaimResult {
  one_time_keys: Record<string, Record<string, Record<string, OneTimeKey>>>;
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

/** Other servers' keys, asked of those servers (federation's client provides it). */
export interface RemoteKeyServers {
  /** `signal` aborts the claim when we stop waiting, so no one-time keys are taken for an answer nobody reads. */
  userKeysClaim(server: string, oneTimeKeys: Record<string, Record<string, string>>, signal?: AbortSignal): Promise<Record<string, unknown>>;
}

export interface RemoteKeysOptions {
  /** Without it, users of other servers are reported under `failures`. */
  remote?: RemoteKeyServers;
  /** How long to wait for each server (the client's `timeout`). */
  timeoutMs?: number;
}

/** The client-server default for /keys/query and /keys/claim's `timeout`. */
export const DEFAULT_REMOTE_KEYS_TIMEOUT_MS = 10_000;

type KeyChange = { userId: string; kind: string; audience: string | null };

/** The one-time key algorithm clients count on seeing, even at zero. */
const SIGNED_CURVE25519 = 'signed_curve25519';

const withoutSignatures = (object: object): string => {
  const { signatures: _s, unsigned: _u, ...rest } = object as Record<string, unknown>;
  return canonicalJson(rest);
};

function splitKeyId(id: string): [string, string] {
  const colon = id.indexOf(':');
  if (colon <= 0 || colon === id.length - 1) throw keysBadJson(`key ID ${JSON.stringify(id)} is not of the form <algorithm>:<key_id>`);
  return [id.slice(0, colon), id.slice(colon + 1)];
}

function decodeKey(text: string): Uint8Array | undefined {
  try {
    const bytes = decodeBase64(text);
    return bytes.length === 32 ? bytes : undefined;
  } catch {
    return undefined;
  }
}

/**
 * End-to-end encryption on the server: device keys, one-time and fallback keys,
 * cross-signing keys and signatures, device list changes (for /sync, /keys/changes
 * and, later, federation), to-device messages and key backup.
 */
export class Keys {
  readonly toDevice: ToDevice;
  readonly backup: KeyBackup;
  /** Device list changes recorded inside a users transaction, announced once it commits. */
  private readonly pendingDeviceChanges = new Map<string, { first: number; last: number }>();
  /** Device lists of users on other servers, and their updater. */
  readonly remoteLists: RemoteDeviceLists;
  private readonly deviceChangeListeners = new Set<DeviceChangeListener>();
  private readonly signingKeyListeners = new Set<(userId: string) => void>();

  constructor(private readonly options: KeysOptions) {
    this.toDevice = new ToDevice(options.db, options.notify, options.users);
    this.backup = new KeyBackup(options.db);
    this.remoteLists = new RemoteDeviceLists({
      db: options.db,
      isLocal: (userId) => options.users.isLocal(userId),
      remoteUsersSharingRooms: (server) => options.membership.remoteMembersSharingRooms(server),
      recordChange: (tx, userId) => {
        const position = nextStreamId(tx);
        this.insertKeyChange(tx, position, { userId, kind: 'device', audience: null });
        return position;
      },
      announce: (position, userId) => this.announce(position, [{ userId, kind: 'device', audience: null }]),
      now: options.now ?? Date.now,
      log: options.log ?? (() => {}),
      backoff: options.deviceListBackoff,
    });
  }

  /** Listens to local users' device list changes (federation sends them as m.device_list_update). */
  onLocalDeviceChange(listener: DeviceChangeListener): void {
    this.deviceChangeListeners.add(listener);
  }

  /** Listens to local users' master or self-signing key changes (m.signing_key_update). */
  onLocalSigningKeyChange(listener: (userId: string) => void): void {
    this.signingKeyListeners.add(listener);
  }

  private get db(): Database {
    return this.options.db;
  }

  private async verify(object: object, signer: string, keyId: string, publicKey: string): Promise<boolean> {
    const key = decodeKey(publicKey);
    return key !== undefined && verifyJsonSignature(object, signer, keyId, key, this.options.ed25519);
  }

  // ------------------------------------------------------------ /keys/upload

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
          position = this.recordDeviceChange(tx, userId, deviceId, false);
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
    if (position !== undefined) await this.announce(position, [{ userId, kind: 'device', audience: null }]);
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

  // ------------------------------------------------------------- /keys/query

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
      if (!this.options.users.isLocal(userId)) {
        remote.set(serverNameOf(userId), { ...remote.get(serverNameOf(userId)), [userId]: deviceIds });
        continue;
      }
      const wanted = deviceIds.length > 0 ? new Set(deviceIds) : undefined;
      const names = new Map((await this.options.users.listDevices(userId)).map((d) => [d.device_id, d.display_name]));
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
          if (!device.keys || (deviceIds.length > 0 && !deviceIds.includes(deviceId))) continue;
          devices[deviceId] = { ...device.keys, unsigned: device.device_display_name ? { device_display_name: device.device_display_name } : {} };
        }
        result.device_keys[userId] = devices;
        if (list.master_key) result.master_keys[userId] = await this.withRequesterSignatures(list.master_key, userId, requesterId);
        if (list.self_signing_key) result.self_signing_keys[userId] = list.self_signing_key;
      }
    }));
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

  // ------------------------------------------------------------- /keys/claim

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
      if (!this.options.users.isLocal(userId)) {
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

  // ---------------------------------------------------------- cross-signing

  private async remoteMasterKey(userId: string): Promise<{ publicKey: string; key: CrossSigningKey; json: string } | undefined> {
    const key = (await this.remoteLists.get(userId))?.master_key;
    const publicKey = key ? Object.values(key.keys)[0] : undefined;
    return key && publicKey ? { publicKey, key, json: canonicalJson(key) } : undefined;
  }

  private async crossSigningKeys(userId: string): Promise<Map<CrossSigningKeyType, { publicKey: string; key: CrossSigningKey; json: string }>> {
    const rows = await this.db.all<{ key_type: string; public_key: string; key_json: string }>(
      'SELECT key_type, public_key, key_json FROM cross_signing_keys WHERE user_id = ?', [userId],
    );
    return new Map(rows.map((r) => [r.key_type as CrossSigningKeyType, { publicKey: r.public_key, key: JSON.parse(r.key_json) as CrossSigningKey, json: r.key_json }]));
  }

  /**
   * Whether uploading these cross-signing keys needs user-interactive auth: only when the
   * user already has a master key and the request would replace any key (client-server
   * POST /keys/device_signing/upload, since v1.11). First-time setup and an identical
   * retry need none.
   */
  async crossSigningUploadNeedsAuth(userId: string, upload: CrossSigningUpload): Promise<boolean> {
    const existing = await this.crossSigningKeys(userId);
    if (!existing.has('master')) return false;
    for (const [type, key] of uploadEntries(upload)) {
      if (existing.get(type)?.json !== canonicalJson(key)) return true;
    }
    return false;
  }

  /** Checks and stores cross-signing keys (client-server POST /keys/device_signing/upload). */
  async uploadCrossSigningKeys(userId: string, upload: CrossSigningUpload): Promise<void> {
    const existing = await this.crossSigningKeys(userId);
    const entries = uploadEntries(upload);
    const checked = new Map<CrossSigningKeyType, string>();
    for (const [type, key] of entries) checked.set(type, checkCrossSigningKey(key, userId, type));
    const masterPublic = checked.get('master') ?? existing.get('master')?.publicKey;
    if (masterPublic === undefined) throw new KeysError(400, 'M_MISSING_PARAM', 'no master key is uploaded or stored');
    for (const [type, key] of entries) {
      if (type === 'master') continue;
      if (!(await this.verify(key, userId, `ed25519:${masterPublic}`, masterPublic))) {
        throw keysInvalidSignature(`the ${type} key must be signed by the master key`);
      }
    }
    const deviceIds = new Set((await this.options.users.listDevices(userId)).map((d) => d.device_id));
    for (const publicKey of checked.values()) {
      if (deviceIds.has(publicKey)) throw new KeysError(403, 'M_FORBIDDEN', 'a cross-signing public key is the same as a device ID');
    }

    const { position, changes } = await this.db.transaction((tx) => {
      const stored = tx.get<{ public_key: string }>("SELECT public_key FROM cross_signing_keys WHERE user_id = ? AND key_type = 'master'", [userId]);
      if (!checked.has('master') && stored?.public_key !== masterPublic) throw keysInvalidSignature('the master key changed meanwhile');
      const changes: KeyChange[] = [];
      for (const [type, key] of entries) {
        const json = canonicalJson(key);
        const current = tx.get<{ key_json: string }>('SELECT key_json FROM cross_signing_keys WHERE user_id = ? AND key_type = ?', [userId, type]);
        if (current?.key_json === json) continue;
        tx.run(
          `INSERT INTO cross_signing_keys (user_id, key_type, public_key, key_json) VALUES (?, ?, ?, ?)
           ON CONFLICT (user_id, key_type) DO UPDATE SET public_key = excluded.public_key, key_json = excluded.key_json`,
          [userId, type, checked.get(type)!, json],
        );
        // Only the user needs to hear of a new user-signing key; everyone sharing a room hears of the others.
        changes.push({ userId, kind: type, audience: type === 'user_signing' ? userId : null });
      }
      if (changes.length === 0) return { position: undefined, changes };
      const position = nextStreamId(tx);
      for (const change of changes) this.insertKeyChange(tx, position, change);
      return { position, changes };
    });
    if (position !== undefined) await this.announce(position, changes);
    if (changes.some((c) => c.kind === 'master' || c.kind === 'self_signing')) for (const listener of this.signingKeyListeners) listener(userId);
  }

  // ------------------------------------------------------- signatures upload

  /**
   * Adds signatures to stored keys (client-server POST /keys/signatures/upload): the
   * user's self-signing key over their devices, their devices over their master key, and
   * their user-signing key over other users' master keys. Each failure is reported per key.
   */
  async uploadSignatures(userId: string, request: Record<string, Record<string, Record<string, unknown>>>): Promise<{
    failures: Record<string, Record<string, { errcode: string; error: string }>>;
  }> {
    const failures: Record<string, Record<string, { errcode: string; error: string }>> = {};
    const fail = (targetUser: string, keyId: string, error: KeysError) => {
      failures[targetUser] ??= {};
      failures[targetUser][keyId] = { errcode: error.errcode, error: error.message };
    };
    const own = await this.crossSigningKeys(userId);
    type Accepted = { targetUser: string; targetKey: string; signerKeyId: string; signature: string; change: KeyChange; deviceId?: string };
    const accepted: Accepted[] = [];

    for (const [targetUser, objects] of Object.entries(request)) {
      for (const [keyId, object] of Object.entries(objects)) {
        try {
          accepted.push(...(await this.checkSignedObject(userId, own, targetUser, keyId, object)));
        } catch (error) {
          if (!(error instanceof KeysError)) throw error;
          fail(targetUser, keyId, error);
        }
      }
    }
    if (accepted.length === 0) return { failures };

    const { position, changes } = await this.db.transaction((tx) => {
      let position = 0;
      const changes: KeyChange[] = [];
      for (const a of accepted) {
        tx.run(
          `INSERT INTO key_signatures (target_user_id, target_key_id, signer_user_id, signer_key_id, signature) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (target_user_id, target_key_id, signer_user_id, signer_key_id) DO UPDATE SET signature = excluded.signature`,
          [a.targetUser, a.targetKey, userId, a.signerKeyId, a.signature],
        );
        changes.push(a.change);
        // A newly signed device is a device list update federation will send; other signatures only concern /sync.
        if (a.deviceId !== undefined) {
          position = this.recordDeviceChange(tx, a.targetUser, a.deviceId, false);
        } else {
          position = nextStreamId(tx);
          this.insertKeyChange(tx, position, a.change);
        }
      }
      return { position, changes };
    });
    await this.announce(position, changes);
    return { failures };
  }

  private async checkSignedObject(
    userId: string,
    own: Map<CrossSigningKeyType, { publicKey: string; key: CrossSigningKey; json: string }>,
    targetUser: string,
    keyId: string,
    object: Record<string, unknown>,
  ): Promise<{ targetUser: string; targetKey: string; signerKeyId: string; signature: string; change: KeyChange; deviceId?: string }[]> {
    const mine = (object['signatures'] as Signatures | undefined)?.[userId];
    if (typeof mine !== 'object' || mine === null) throw keysInvalidParam(`no signatures by ${userId}`);
    const verifyAll = async (accept: (signerKeyId: string) => string | undefined) => {
      const out: { signerKeyId: string; signature: string }[] = [];
      for (const [signerKeyId, signature] of Object.entries(mine)) {
        const publicKey = accept(signerKeyId);
        if (publicKey === undefined) continue;
        if (typeof signature !== 'string' || !(await this.verify(object, userId, signerKeyId, publicKey))) {
          throw keysInvalidSignature(`invalid signature ${signerKeyId}`);
        }
        out.push({ signerKeyId, signature });
      }
      if (out.length === 0) throw keysInvalidParam('no signature by a key that may sign this');
      return out;
    };
    const mustMatch = (storedJson: string) => {
      if (withoutSignatures(JSON.parse(storedJson) as object) !== withoutSignatures(object)) {
        throw keysInvalidParam('the signed object does not match the stored key');
      }
    };

    if (targetUser === userId) {
      const master = own.get('master');
      if (master && keyId === master.publicKey) {
        // A device of the user signs their master key.
        mustMatch(master.json);
        const devices = new Map(
          (await this.db.all<{ device_id: string; key_json: string }>('SELECT device_id, key_json FROM device_keys WHERE user_id = ?', [userId])).map(
            (r) => [r.device_id, JSON.parse(r.key_json) as DeviceKeys],
          ),
        );
        const signed = await verifyAll((signerKeyId) => {
          const deviceId = signerKeyId.startsWith('ed25519:') ? signerKeyId.slice('ed25519:'.length) : undefined;
          return deviceId === undefined ? undefined : devices.get(deviceId)?.keys[signerKeyId];
        });
        return signed.map((s) => ({ targetUser, targetKey: keyId, ...s, change: { userId, kind: 'signature', audience: null } }));
      }
      const device = await this.db.get<{ key_json: string }>('SELECT key_json FROM device_keys WHERE user_id = ? AND device_id = ?', [userId, keyId]);
      if (!device) throw new KeysError(404, 'M_NOT_FOUND', `unknown device or key ${keyId}`);
      // The user's self-signing key signs one of their devices.
      mustMatch(device.key_json);
      const selfSigning = own.get('self_signing');
      if (!selfSigning) throw keysInvalidParam('the user has no self-signing key');
      const signed = await verifyAll((signerKeyId) => (signerKeyId === `ed25519:${selfSigning.publicKey}` ? selfSigning.publicKey : undefined));
      return signed.map((s) => ({ targetUser, targetKey: keyId, ...s, deviceId: keyId, change: { userId, kind: 'device', audience: null } }));
    }

    // The user's user-signing key signs another user's master key; only the signer hears of it.
    // A remote user's master key is the one their server gave us (their device list).
    const master = this.options.users.isLocal(targetUser) ? (await this.crossSigningKeys(targetUser)).get('master') : await this.remoteMasterKey(targetUser);
    if (!master || master.publicKey !== keyId) throw new KeysError(404, 'M_NOT_FOUND', `${keyId} is not ${targetUser}'s master key`);
    mustMatch(master.json);
    const userSigning = own.get('user_signing');
    if (!userSigning) throw keysInvalidParam('the user has no user-signing key');
    const signed = await verifyAll((signerKeyId) => (signerKeyId === `ed25519:${userSigning.publicKey}` ? userSigning.publicKey : undefined));
    return signed.map((s) => ({ targetUser, targetKey: keyId, ...s, change: { userId: targetUser, kind: 'signature', audience: userId } }));
  }

  // ---------------------------------------------------------- device lists

  private insertKeyChange(tx: WriteTransaction, position: number, change: KeyChange): void {
    tx.run('INSERT INTO key_changes (stream_id, user_id, kind, audience) VALUES (?, ?, ?, ?)', [position, change.userId, change.kind, change.audience]);
  }

  /** Records a change of a local device: for /sync, and on the outbound stream federation reads. */
  private recordDeviceChange(tx: WriteTransaction, userId: string, deviceId: string, deleted: boolean): number {
    const position = nextStreamId(tx);
    const prev = tx.get<{ id: number | null }>('SELECT MAX(stream_id) AS id FROM device_list_stream WHERE user_id = ?', [userId]);
    tx.run('INSERT INTO device_list_stream (stream_id, user_id, device_id, prev_id, deleted) VALUES (?, ?, ?, ?, ?)', [
      position, userId, deviceId, prev?.id ?? null, deleted ? 1 : 0,
    ]);
    this.insertKeyChange(tx, position, { userId, kind: 'device', audience: null });
    return position;
  }

  /** Wakes the /sync long-polls of everyone who should hear of these changes. */
  private async announce(position: number, changes: KeyChange[], first = position): Promise<void> {
    for (const change of changes) {
      if (change.kind !== 'device' || change.audience !== null || !this.options.users.isLocal(change.userId)) continue;
      for (const listener of this.deviceChangeListeners) listener(change.userId, first, position);
    }
    const userIds = new Set<string>();
    for (const change of changes) {
      if (change.audience !== null) {
        userIds.add(change.audience);
        continue;
      }
      userIds.add(change.userId);
      for (const user of await this.sharingRoomsWith(change.userId)) userIds.add(user);
    }
    this.options.notify({ position, userIds: [...userIds] });
  }

  /** Users joined to any room the user is joined to (the user included), and those rooms. */
  private async sharingRoomsWith(userId: string): Promise<Set<string>> {
    return (await this.sharedRooms(userId)).users;
  }

  private async sharedRooms(userId: string): Promise<{ rooms: Set<string>; users: Set<string> }> {
    const rooms = new Set(await this.options.membership.roomsOf(userId, ['join']));
    const users = new Set<string>([userId]);
    for (const roomId of rooms) {
      for (const member of await this.options.membership.members(roomId, 'join')) users.add(member);
    }
    return { rooms, users };
  }

  /**
   * Users whose device lists `userId` should refresh or drop for (since, upTo]:
   * `changed` holds users sharing a room whose devices or cross-signing keys changed,
   * users who joined a shared room, and every member of a room the user joined;
   * `left` holds users the user no longer shares any room with.
   */
  async deviceListChanges(userId: string, since: number, upTo: number): Promise<{ changed: string[]; left: string[] }> {
    const keyRows = await this.db.all<{ user_id: string; audience: string | null }>(
      'SELECT DISTINCT user_id, audience FROM key_changes WHERE stream_id > ? AND stream_id <= ?', [since, upTo],
    );
    const memberEvents = await this.options.membership.memberChanges(userId, since, upTo);
    if (keyRows.length === 0 && memberEvents.length === 0) return { changed: [], left: [] };

    const shared = await this.sharedRooms(userId);
    const changed = new Set<string>();
    for (const row of keyRows) {
      if (row.audience === null ? shared.users.has(row.user_id) : row.audience === userId) changed.add(row.user_id);
    }
    const maybeLeft = new Set<string>();
    for (const event of memberEvents) {
      const { roomId, membership } = event;
      const gone = membership === 'leave' || membership === 'ban';
      if (event.userId === userId) {
        // The user joined a room: its members' devices matter now. Left it: perhaps no longer.
        if (membership !== 'join' && !gone) continue;
        for (const member of await this.options.membership.members(roomId, 'join')) {
          if (member !== userId) (membership === 'join' ? changed : maybeLeft).add(member);
        }
      } else if (membership === 'join' && shared.rooms.has(roomId)) {
        changed.add(event.userId);
      } else if (gone) {
        maybeLeft.add(event.userId);
      }
    }
    const left = [...maybeLeft].filter((u) => !shared.users.has(u));
    for (const user of left) changed.delete(user);
    return { changed: [...changed].sort(), left: left.sort() };
  }

  /**
   * The outbound device list stream of a local user after `afterStreamId`: the
   * m.device_list_update EDUs federation sends to peers, oldest first, each with the
   * device's current keys and name (or `deleted`).
   */
  async deviceListUpdates(userId: string, afterStreamId = 0, limit = 100): Promise<DeviceListUpdate[]> {
    const rows = await this.db.all<{ stream_id: number; device_id: string; prev_id: number | null; deleted: number }>(
      'SELECT stream_id, device_id, prev_id, deleted FROM device_list_stream WHERE user_id = ? AND stream_id > ? ORDER BY stream_id LIMIT ?',
      [userId, afterStreamId, limit],
    );
    const names = new Map((await this.options.users.listDevices(userId)).map((d) => [d.device_id, d.display_name]));
    const updates: DeviceListUpdate[] = [];
    for (const row of rows) {
      const update: DeviceListUpdate = { user_id: userId, device_id: row.device_id, stream_id: row.stream_id, prev_id: row.prev_id === null ? [] : [row.prev_id] };
      const keys = row.deleted ? undefined : (await this.query(userId, { [userId]: [row.device_id] })).device_keys[userId]?.[row.device_id];
      if (row.deleted || !names.has(row.device_id)) update.deleted = true;
      else {
        const name = names.get(row.device_id);
        if (name) update.device_display_name = name;
        if (keys) {
          const { unsigned: _u, ...signed } = keys;
          update.keys = signed as DeviceKeys;
        }
      }
      updates.push(update);
    }
    return updates;
  }

  // ----------------------------------------------- users DeviceListener

  /** A device was created (login): a device list change, announced once the transaction commits. */
  devicesAdded(tx: WriteTransaction, userId: string, deviceIds: string[]): void {
    for (const deviceId of deviceIds) this.pendingChange(userId, this.recordDeviceChange(tx, userId, deviceId, false));
  }

  /** A device was renamed: its name is part of the device list other servers hold. */
  devicesChanged(tx: WriteTransaction, userId: string, deviceIds: string[]): void {
    for (const deviceId of deviceIds) this.pendingChange(userId, this.recordDeviceChange(tx, userId, deviceId, false));
  }

  private pendingChange(userId: string, position: number): void {
    const pending = this.pendingDeviceChanges.get(userId);
    this.pendingDeviceChanges.set(userId, { first: pending?.first ?? position, last: position });
  }

  /** Devices were deleted: their keys and pending messages go with them, and it is a device list change. */
  devicesRemoved(tx: WriteTransaction, userId: string, deviceIds: string[]): void {
    for (const deviceId of deviceIds) {
      for (const table of ['device_keys', 'one_time_keys', 'fallback_keys', 'to_device_messages', 'to_device_txns']) {
        tx.run(`DELETE FROM ${table} WHERE user_id = ? AND device_id = ?`, [userId, deviceId]);
      }
      tx.run('DELETE FROM key_signatures WHERE target_user_id = ? AND target_key_id = ?', [userId, deviceId]);
      this.pendingChange(userId, this.recordDeviceChange(tx, userId, deviceId, true));
    }
  }

  /** The users transaction that added or removed devices committed: wake those who should know. */
  devicesCommitted(userId: string): void {
    const pending = this.pendingDeviceChanges.get(userId);
    if (pending === undefined) return;
    this.pendingDeviceChanges.delete(userId);
    this.announce(pending.last, [{ userId, kind: 'device', audience: null }], pending.first).catch((error) => this.options.log?.('announcing a device change failed', error));
  }

  // ----------------------------------------------------- sync extension

  /** Fills the /sync parts this component owns (Sync's SyncExtension). */
  async contribute(request: KeysSyncRequest, response: KeysSyncResponse): Promise<void> {
    const { userId, deviceId, since, upTo } = request;
    const messages = await this.toDevice.deliver(userId, deviceId, since, upTo);
    if (messages.length > 0 || !request.initial) response.to_device = { events: messages };
    // Device lists are only for incremental syncs; after an initial one clients use /keys/query.
    if (!request.initial) response.device_lists = await this.deviceListChanges(userId, since, upTo);
    const { counts, unusedFallback } = await this.keyCounts(userId, deviceId);
    response.device_one_time_keys_count = counts;
    response.device_unused_fallback_key_types = unusedFallback;
  }

  /** The client synced from `since`: to-device messages delivered up to there are done with. */
  async acknowledge(userId: string, deviceId: string, since: number): Promise<void> {
    await this.toDevice.acknowledge(userId, deviceId, since);
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const objectAt = (value: unknown, key: string): Record<string, unknown> => {
  const inner = isObject(value) ? value[key] : undefined;
  return isObject(inner) ? inner : {};
};

const COUNT_SQL = 'SELECT algorithm, COUNT(*) AS n FROM one_time_keys WHERE user_id = ? AND device_id = ? GROUP BY algorithm';

function oneTimeKeyCounts(rows: { algorithm: string; n: number }[]): Record<string, number> {
  // signed_curve25519 is always present: some clients read its absence as "unknown" and never upload.
  const counts: Record<string, number> = { [SIGNED_CURVE25519]: 0 };
  for (const row of rows) counts[row.algorithm] = row.n;
  return counts;
}

function uploadEntries(upload: CrossSigningUpload): [CrossSigningKeyType, CrossSigningKey][] {
  const entries: [CrossSigningKeyType, CrossSigningKey][] = [];
  if (upload.master_key) entries.push(['master', upload.master_key]);
  if (upload.self_signing_key) entries.push(['self_signing', upload.self_signing_key]);
  if (upload.user_signing_key) entries.push(['user_signing', upload.user_signing_key]);
  return entries;
}

/** Checks a cross-signing key's shape; returns its public key. */
function checkCrossSigningKey(key: CrossSigningKey, userId: string, type: CrossSigningKeyType): string {
  if (key.user_id !== userId) throw keysInvalidParam(`the ${type} key's user_id must be ${userId}`);
  if (!key.usage.includes(type)) throw keysInvalidParam(`the ${type} key's usage must include ${type}`);
  const entries = Object.entries(key.keys);
  if (entries.length !== 1) throw keysInvalidParam(`the ${type} key must have exactly one public key`);
  const [keyId, publicKey] = entries[0]!;
  if (keyId !== `ed25519:${publicKey}` || !decodeKey(publicKey)) {
    throw keysInvalidParam(`the ${type} key must be an ed25519 public key named ed25519:<public key>`);
  }
  return publicKey;
}
