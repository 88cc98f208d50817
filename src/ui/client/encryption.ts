/**
 * This device's end-to-end encryption on matrix-js-sdk's Rust crypto: cross-signing made at
 * account creation (its upload confirmed with the password, user-interactive auth), secret
 * storage and key backup under a recovery key shown once, and a later sign-in verified with
 * that key (the cross-signing keys read from secret storage sign this device; the backup is restored).
 */
import { ClientEvent, Method, type MatrixClient } from 'matrix-js-sdk';
import { CryptoEvent, decodeRecoveryKey, type CryptoCallbacks } from 'matrix-js-sdk/lib/crypto-api/index.js';
import type { SecretStorageKeyDescription } from 'matrix-js-sdk/lib/secret-storage.js';
import { WrongRecoveryKey, type EncryptionStatus } from '../chat.ts';

/** A recovery key made here and not yet confirmed as saved: kept so a reload does not lose it. */
const UNSAVED_RECOVERY_KEY = 'hearth-unsaved-recovery-key';

export class Encryption {
  /** Secret storage keys this page holds (the recovery key, once made or typed): key ID → key. */
  private readonly keys = new Map<string, Uint8Array>();
  private status: EncryptionStatus = { available: false, verified: false, canVerify: false, recoveryKey: undefined, settingUp: false };
  private client: MatrixClient | undefined;

  constructor(
    private readonly userId: string,
    private readonly changed: () => void,
    newAccount = false,
  ) {
    const recoveryKey = unsavedRecoveryKey(userId);
    this.status = { ...this.status, recoveryKey, settingUp: newAccount && !recoveryKey };
  }

  /** What the SDK asks for when it reads or writes secret storage. */
  readonly callbacks: CryptoCallbacks = {
    getSecretStorageKey: async ({ keys }) => {
      for (const keyId of Object.keys(keys)) {
        const key = this.keys.get(keyId);
        if (key) return [keyId, key];
      }
      return null;
    },
    cacheSecretStorageKey: (keyId, _keyInfo, key) => void this.keys.set(keyId, key),
  };

  current(): EncryptionStatus {
    return this.status;
  }

  /** The Rust crypto runs for `client`: follow what changes this device's trust. */
  async attach(client: MatrixClient): Promise<void> {
    this.client = client;
    const refresh = () => void this.refresh();
    client.on(CryptoEvent.KeysChanged, refresh);
    client.on(CryptoEvent.UserTrustStatusChanged, refresh);
    client.on(CryptoEvent.DevicesUpdated, refresh);
    await this.refresh();
  }

  private async refresh(): Promise<void> {
    const crypto = this.client?.getCrypto();
    if (!crypto) return;
    const device = await crypto.getDeviceVerificationStatus(this.userId, this.client!.getDeviceId()!);
    // Whether the account has cross-signing keys is asked of the homeserver (/keys/query). Should that fail
    // (a new sign-in's first moments), no crypto event may come to ask again: the next sync does.
    const canVerify = await crypto.userHasCrossSigningKeys(this.userId, true).catch(() => undefined);
    if (canVerify === undefined) this.client!.once(ClientEvent.Sync, () => void this.refresh());
    this.set({ available: true, verified: device?.crossSigningVerified ?? false, canVerify: canVerify ?? this.status.canVerify });
  }

  private set(change: Partial<EncryptionStatus>): void {
    const next = { ...this.status, ...change };
    if (JSON.stringify(next) === JSON.stringify(this.status)) return;
    this.status = next;
    this.changed();
  }

  /**
   * A new account: cross-signing keys (their upload needs no password the first time; a homeserver
   * that asks gets it), then secret storage under a new recovery key holding them and the key backup's.
   */
  async setUpNewAccount(password: string): Promise<void> {
    const client = this.client!;
    const crypto = client.getCrypto()!;
    try {
      await crypto.bootstrapCrossSigning({ authUploadDeviceSigningKeys: passwordAuth(this.userId, password) });
      const recoveryKey = await crypto.createRecoveryKeyFromPassphrase();
      await crypto.bootstrapSecretStorage({ createSecretStorageKey: async () => recoveryKey, setupNewSecretStorage: true, setupNewKeyBackup: true });
      localStorage.setItem(UNSAVED_RECOVERY_KEY, JSON.stringify({ userId: this.userId, key: recoveryKey.encodedPrivateKey }));
      this.set({ recoveryKey: recoveryKey.encodedPrivateKey, settingUp: false });
    } finally {
      this.set({ settingUp: false });
    }
    await this.refresh();
  }

  /** The setup will not run (the crypto could not start): the page stops waiting for its key. */
  setUpAbandoned(): void {
    this.set({ settingUp: false });
  }

  /** Saved, or given up with the session: it is not kept or shown any more. */
  confirmRecoveryKeySaved(): void {
    localStorage.removeItem(UNSAVED_RECOVERY_KEY);
    this.set({ recoveryKey: undefined });
  }

  /**
   * How many of this device's room keys are not in the account's key backup yet (0 with no backup on). The SDK
   * uploads a new key after a random wait of up to 10 s (its backup loop); a sign-out before then would delete the
   * only copy, and the recovery key would not open those messages. Read from the keys themselves (exported from the
   * crypto) and the backup's list of sessions on the homeserver: the SDK keeps its own count private.
   */
  async keysNotBackedUp(): Promise<number> {
    const client = this.client;
    const crypto = client?.getCrypto();
    if (!client || !crypto) return 0;
    const version = await crypto.getActiveSessionBackupVersion();
    if (!version) return 0;
    const [held, backedUp] = await Promise.all([
      crypto.exportRoomKeys(),
      client.http.authedRequest<{ rooms?: Record<string, { sessions?: Record<string, unknown> }> }>(Method.Get, '/room_keys/keys', { version }),
    ]);
    return held.filter((key) => !backedUp.rooms?.[key.room_id]?.sessions?.[key.session_id]).length;
  }

  /**
   * Resolves once every room key of this device is in the key backup (or the backup is off): checked again each time
   * the SDK's backup loop reports, which it does when it has nothing left to upload. Rejects if a check fails.
   */
  keysBackedUp(): Promise<void> {
    const client = this.client;
    if (!client) return Promise.resolve();
    return new Promise((resolve, reject) => {
      let checking = false;
      let again = false;
      const check = (): void => {
        // A report during a check is checked after it: the check under way may have read the list before that upload.
        if (checking) return void (again = true);
        checking = true;
        again = false;
        this.keysNotBackedUp().then(
          (missing) => {
            checking = false;
            if (missing === 0) {
              stop();
              resolve();
            } else if (again) check();
          },
          (error: unknown) => {
            stop();
            reject(error);
          },
        );
      };
      const stop = (): void => {
        client.off(CryptoEvent.KeyBackupSessionsRemaining, check);
        client.off(CryptoEvent.KeyBackupStatus, check);
      };
      client.on(CryptoEvent.KeyBackupSessionsRemaining, check);
      client.on(CryptoEvent.KeyBackupStatus, check);
      check();
    });
  }

  /** Opens secret storage with the recovery key: this device is cross-signed, and the backup's keys come in. */
  async verifyWithRecoveryKey(text: string): Promise<void> {
    const client = this.client;
    const crypto = client?.getCrypto();
    if (!client || !crypto) throw new Error('encryption is not running in this page');
    let key: Uint8Array;
    try {
      key = decodeRecoveryKey(text.trim());
    } catch {
      throw new WrongRecoveryKey('That is not a recovery key: check what you typed (it is 48 letters and digits, in groups of four).');
    }
    const keyId = await client.secretStorage.getDefaultKeyId();
    const description = keyId ? ((await client.secretStorage.getKey(keyId))?.[1] as SecretStorageKeyDescription | undefined) : undefined;
    if (!keyId || !description) throw new WrongRecoveryKey('This account has no recovery key set up.');
    if (!(await client.secretStorage.checkKey(key, description))) throw new WrongRecoveryKey('That recovery key does not match this account.');
    this.keys.set(keyId, key);
    await crypto.bootstrapCrossSigning({});
    await crypto.loadSessionBackupPrivateKeyFromSecretStorage();
    await crypto.checkKeyBackupAndEnable();
    await this.refresh();
    // Older messages come in from the backup as it is read; the timeline redraws as they decrypt.
    void crypto.restoreKeyBackup().catch(() => undefined);
  }
}

/** The unsaved recovery key made here for `userId`, if any (another account's is not shown). */
function unsavedRecoveryKey(userId: string): string | undefined {
  try {
    const kept = JSON.parse(localStorage.getItem(UNSAVED_RECOVERY_KEY) ?? 'null') as { userId?: string; key?: string } | null;
    return kept?.userId === userId && typeof kept.key === 'string' ? kept.key : undefined;
  } catch {
    return undefined;
  }
}

/** Answers user-interactive auth with the account's password (m.login.password). */
function passwordAuth(userId: string, password: string) {
  return async <T>(makeRequest: (auth: Record<string, unknown> | null) => Promise<T>): Promise<T> => {
    try {
      return await makeRequest(null);
    } catch (error) {
      const e = error as { httpStatus?: number; data?: { session?: string; flows?: unknown } };
      if (e.httpStatus !== 401 || !e.data?.flows) throw error;
      return makeRequest({ type: 'm.login.password', identifier: { type: 'm.id.user', user: userId }, password, session: e.data.session });
    }
  };
}
