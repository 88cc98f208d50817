import { encodeBase64 } from '../../src/crypto/base64.ts';
import { defaultEd25519Backend, type SigningKey } from '../../src/crypto/ed25519.ts';
import { signJson } from '../../src/crypto/signing.ts';

// Real, signed end-to-end encryption keys as a client makes them, for tests that
// drive the keys endpoints without a crypto library.

export interface KeyPair {
  key: SigningKey;
  pub: string;
}

export async function newKey(): Promise<KeyPair> {
  const key = await (await defaultEd25519Backend()).keyFromSeed(crypto.getRandomValues(new Uint8Array(32)));
  return { key, pub: encodeBase64(key.publicKey) };
}

/** Device keys for an account, signed by the device's own ed25519 key. */
export async function deviceKeys(account: { userId: string; deviceId: string }, overrides: Record<string, unknown> = {}) {
  const { key, pub } = await newKey();
  const deviceId = (overrides['device_id'] as string | undefined) ?? account.deviceId;
  const unsigned = {
    user_id: account.userId,
    device_id: deviceId,
    algorithms: ['m.olm.v1.curve25519-aes-sha2', 'm.megolm.v1.aes-sha2'],
    keys: { [`ed25519:${deviceId}`]: pub, [`curve25519:${deviceId}`]: encodeBase64(crypto.getRandomValues(new Uint8Array(32))) },
    ...overrides,
  };
  return { key, pub, signed: await signJson(unsigned, account.userId, `ed25519:${account.deviceId}`, key) };
}

export async function crossSigningKey(userId: string, usage: string, signer?: KeyPair) {
  const { key, pub } = await newKey();
  const object = { user_id: userId, usage: [usage], keys: { [`ed25519:${pub}`]: pub } };
  return { key, pub, object: signer ? await signJson(object, userId, `ed25519:${signer.pub}`, signer.key) : object };
}

/** A user's master key, and self-signing and user-signing keys signed by it. */
export async function crossSigningSet(userId: string) {
  const master = await crossSigningKey(userId, 'master');
  const selfSigning = await crossSigningKey(userId, 'self_signing', master);
  const userSigning = await crossSigningKey(userId, 'user_signing', master);
  return { master, selfSigning, userSigning };
}
