/**
 * Our own signing keys as a server with a DNS name has them: an ordinary ed25519 key under a key
 * ID such as `ed25519:a_XXXX`, made on first start and kept, and the keys it replaced, still
 * served under `old_verify_keys` (valid for events signed before they expired, never for
 * requests). Where they are kept is the host's (`SigningKeyStorage`); a hex-named Hearth server
 * keeps its fixed `ed25519:hearth` key instead (`keyring.ts`).
 */
import { decodeBase64, encodeBase64 } from '../crypto/base64.ts';
import { SEED_LENGTH, type Ed25519Backend, type SigningKey } from '../crypto/ed25519.ts';
import { randomString, type RandomBytes } from '../crypto/random.ts';
import { signJson } from '../crypto/signing.ts';

export interface OldSigningKey {
  keyId: string;
  /** The public key, unpadded base64. */
  key: string;
  expiredTs: number;
}

/** What the host keeps: the current seed (secret) and the public halves of the keys it replaced. */
export interface SigningKeyState {
  keyId: string;
  /** The current key's 32-byte seed, unpadded base64. */
  seed: string;
  old: OldSigningKey[];
}

/** Durable storage for our keys, the host's: it must keep the seed secret (a file only we can read). */
export interface SigningKeyStorage {
  load(): Promise<SigningKeyState | undefined>;
  save(state: SigningKeyState): Promise<void>;
}

/** How long the key document we serve says it stays valid: a day, so a rotation is seen within one. */
export const OWN_KEY_VALIDITY_MS = 24 * 60 * 60 * 1000;

const KEY_VERSION_ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

/** A new key ID: `ed25519:a_` and four random letters or digits (the version matches [a-zA-Z0-9_]). */
export function newKeyId(random: RandomBytes): string {
  return `ed25519:a_${randomString(random, 4, KEY_VERSION_ALPHABET)}`;
}

export class ServerSigningKeys {
  private constructor(
    private readonly options: { storage: SigningKeyStorage; ed25519: Ed25519Backend; random: RandomBytes; now: () => number },
    private state: SigningKeyState,
    private current: SigningKey,
  ) {}

  /** Our keys as stored, or a new key (stored before this returns) on first start. */
  static async open(options: { storage: SigningKeyStorage; ed25519: Ed25519Backend; random: RandomBytes; now: () => number }): Promise<ServerSigningKeys> {
    let state = await options.storage.load();
    if (!state) {
      state = { keyId: newKeyId(options.random), seed: encodeBase64(options.random(SEED_LENGTH)), old: [] };
      await options.storage.save(state);
    }
    return new ServerSigningKeys(options, state, await options.ed25519.keyFromSeed(decodeBase64(state.seed)));
  }

  get keyId(): string {
    return this.state.keyId;
  }

  get signingKey(): SigningKey {
    return this.current;
  }

  get oldKeys(): readonly OldSigningKey[] {
    return this.state.old;
  }

  /** A new current key; the one it replaces expires now and stays listed as old. Stored before it is used. */
  async rotate(): Promise<void> {
    let keyId = newKeyId(this.options.random);
    while (keyId === this.state.keyId || this.state.old.some((k) => k.keyId === keyId)) keyId = newKeyId(this.options.random);
    const seed = this.options.random(SEED_LENGTH);
    const next: SigningKeyState = {
      keyId,
      seed: encodeBase64(seed),
      old: [...this.state.old, { keyId: this.state.keyId, key: encodeBase64(this.current.publicKey), expiredTs: this.options.now() }],
    };
    const key = await this.options.ed25519.keyFromSeed(seed);
    await this.options.storage.save(next);
    this.state = next;
    this.current = key;
  }

  /** Our verify key for a key ID, when it is ours: the current one, or an old one with when it expired. */
  publicKey(keyId: string): { key: Uint8Array; expiredTs?: number } | undefined {
    if (keyId === this.state.keyId) return { key: this.current.publicKey };
    const old = this.state.old.find((k) => k.keyId === keyId);
    return old ? { key: decodeBase64(old.key), expiredTs: old.expiredTs } : undefined;
  }

  /** The self-signed document of GET /_matrix/key/v2/server. */
  document(serverName: string, validityMs = OWN_KEY_VALIDITY_MS): Promise<Record<string, unknown>> {
    return signJson(
      {
        server_name: serverName,
        valid_until_ts: this.options.now() + validityMs,
        verify_keys: { [this.state.keyId]: { key: encodeBase64(this.current.publicKey) } },
        old_verify_keys: Object.fromEntries(this.state.old.map((k) => [k.keyId, { key: k.key, expired_ts: k.expiredTs }])),
      },
      serverName,
      this.state.keyId,
      this.current,
    );
  }
}

/** Keys kept in memory only: for tests, and for a host that has not chosen where to keep them yet. */
export function memorySigningKeyStorage(initial?: SigningKeyState): SigningKeyStorage & { state: SigningKeyState | undefined } {
  const storage = {
    state: initial,
    load: async () => storage.state,
    save: async (state: SigningKeyState) => void (storage.state = state),
  };
  return storage;
}
