import { decodeBase64 } from '../crypto/base64.ts';
import { canonicalJson } from '../crypto/canonical-json.ts';
import type { Ed25519Backend } from '../crypto/ed25519.ts';
import { verifyJsonSignature, type Signatures } from '../crypto/signing.ts';
import type { Database } from '../storage/database.ts';
import type { KeyChange, KeyChangeLog } from './change-log.ts';
import type { RemoteDeviceLists } from './device-lists.ts';
import { KeysError, keysInvalidParam, keysInvalidSignature } from './errors.ts';
import type { CrossSigningKey, CrossSigningKeyType, DeviceKeys, KeysDirectory } from './types.ts';

export interface CrossSigningUpload {
  master_key?: CrossSigningKey;
  self_signing_key?: CrossSigningKey;
  user_signing_key?: CrossSigningKey;
}

const withoutSignatures = (object: object): string => {
  const { signatures: _s, unsigned: _u, ...rest } = object as Record<string, unknown>;
  return canonicalJson(rest);
};

function decodeKey(text: string): Uint8Array | undefined {
  try {
    const bytes = decodeBase64(text);
    return bytes.length === 32 ? bytes : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Cross-signing: a user's master, self-signing and user-signing keys
 * (POST /keys/device_signing/upload), and the signatures they and the user's devices
 * make over keys (POST /keys/signatures/upload).
 */
export class CrossSigning {
  private readonly signingKeyListeners = new Set<(userId: string) => void>();

  constructor(
    private readonly db: Database,
    private readonly ed25519: Ed25519Backend,
    private readonly users: KeysDirectory,
    private readonly remoteLists: RemoteDeviceLists,
    private readonly changeLog: KeyChangeLog,
  ) {}

  /** Listens to local users' master or self-signing key changes (m.signing_key_update). */
  onLocalSigningKeyChange(listener: (userId: string) => void): void {
    this.signingKeyListeners.add(listener);
  }

  private async verify(object: object, signer: string, keyId: string, publicKey: string): Promise<boolean> {
    const key = decodeKey(publicKey);
    return key !== undefined && verifyJsonSignature(object, signer, keyId, key, this.ed25519);
  }

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
    const deviceIds = new Set((await this.users.listDevices(userId)).map((d) => d.device_id));
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
      return { position: this.changeLog.record(tx, changes), changes };
    });
    if (position !== undefined) await this.changeLog.announce(position, changes);
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
          position = this.changeLog.recordDeviceChange(tx, a.targetUser, a.deviceId, false);
        } else {
          position = this.changeLog.record(tx, [a.change]);
        }
      }
      return { position, changes };
    });
    await this.changeLog.announce(position, changes);
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
    const master = this.users.isLocal(targetUser) ? (await this.crossSigningKeys(targetUser)).get('master') : await this.remoteMasterKey(targetUser);
    if (!master || master.publicKey !== keyId) throw new KeysError(404, 'M_NOT_FOUND', `${keyId} is not ${targetUser}'s master key`);
    mustMatch(master.json);
    const userSigning = own.get('user_signing');
    if (!userSigning) throw keysInvalidParam('the user has no user-signing key');
    const signed = await verifyAll((signerKeyId) => (signerKeyId === `ed25519:${userSigning.publicKey}` ? userSigning.publicKey : undefined));
    return signed.map((s) => ({ targetUser, targetKey: keyId, ...s, change: { userId: targetUser, kind: 'signature', audience: userId } }));
  }
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
