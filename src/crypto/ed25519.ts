import nacl from 'tweetnacl';

/**
 * Ed25519 behind one small interface. WebCrypto's native Ed25519 signs ~100× faster
 * than tweetnacl (0.1 ms vs 10 ms here), and every event is signed once and verified
 * by every server that receives it, so we use it wherever the runtime has it
 * (Node 20, Chromium page/Worker/service worker) and fall back to tweetnacl.
 */
export interface Ed25519Backend {
  readonly name: 'webcrypto' | 'tweetnacl';
  keyFromSeed(seed: Uint8Array): Promise<SigningKey>;
  /** Returns false, never throws, for a wrong key, a bad signature or malformed input. */
  verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): Promise<boolean>;
}

export interface SigningKey {
  readonly publicKey: Uint8Array;
  sign(message: Uint8Array): Promise<Uint8Array>;
}

export const SEED_LENGTH = 32;
export const PUBLIC_KEY_LENGTH = 32;
export const SIGNATURE_LENGTH = 64;

function checkSeed(seed: Uint8Array): void {
  if (seed.length !== SEED_LENGTH) throw new Error(`an Ed25519 seed is ${SEED_LENGTH} bytes, got ${seed.length}`);
}

export const tweetnaclBackend: Ed25519Backend = {
  name: 'tweetnacl',
  async keyFromSeed(seed) {
    checkSeed(seed);
    const pair = nacl.sign.keyPair.fromSeed(seed);
    return {
      publicKey: pair.publicKey,
      sign: async (message) => nacl.sign.detached(message, pair.secretKey),
    };
  },
  async verify(publicKey, message, signature) {
    if (publicKey.length !== PUBLIC_KEY_LENGTH || signature.length !== SIGNATURE_LENGTH) return false;
    return nacl.sign.detached.verify(message, signature, publicKey);
  },
};

// A raw seed becomes PKCS#8 DER by this fixed prefix (RFC 8410).
const PKCS8_PREFIX = new Uint8Array([
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
]);

function base64UrlToBytes(text: string): Uint8Array {
  const b64 = text.replace(/-/g, '+').replace(/_/g, '/');
  const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

// WebCrypto wants ArrayBuffer-backed views; copying also detaches us from callers' buffers.
const buf = (bytes: Uint8Array): Uint8Array<ArrayBuffer> => new Uint8Array(bytes);

export function createWebCryptoBackend(subtle: SubtleCrypto): Ed25519Backend {
  // Imported verify keys are cached: importing costs about as much as verifying.
  const verifyKeys = new Map<string, Promise<CryptoKey>>();
  const verifyKey = (publicKey: Uint8Array): Promise<CryptoKey> => {
    const id = publicKey.join(',');
    let key = verifyKeys.get(id);
    if (!key) {
      if (verifyKeys.size > 4096) verifyKeys.clear();
      key = subtle.importKey('raw', buf(publicKey), { name: 'Ed25519' }, false, ['verify']);
      key.catch(() => verifyKeys.delete(id));
      verifyKeys.set(id, key);
    }
    return key;
  };
  return {
    name: 'webcrypto',
    async keyFromSeed(seed) {
      checkSeed(seed);
      const der = new Uint8Array(PKCS8_PREFIX.length + SEED_LENGTH);
      der.set(PKCS8_PREFIX);
      der.set(seed, PKCS8_PREFIX.length);
      const privateKey = await subtle.importKey('pkcs8', der, { name: 'Ed25519' }, true, ['sign']);
      const jwk = await subtle.exportKey('jwk', privateKey);
      if (!jwk.x) throw new Error('WebCrypto did not export the Ed25519 public key');
      return {
        publicKey: base64UrlToBytes(jwk.x),
        sign: async (message) => new Uint8Array(await subtle.sign({ name: 'Ed25519' }, privateKey, buf(message))),
      };
    },
    async verify(publicKey, message, signature) {
      if (publicKey.length !== PUBLIC_KEY_LENGTH || signature.length !== SIGNATURE_LENGTH) return false;
      try {
        return await subtle.verify({ name: 'Ed25519' }, await verifyKey(publicKey), buf(signature), buf(message));
      } catch {
        return false;
      }
    },
  };
}

let detected: Promise<Ed25519Backend> | undefined;

/** The fastest backend this runtime offers, detected once by trying to import a key. */
export function defaultEd25519Backend(): Promise<Ed25519Backend> {
  detected ??= (async () => {
    const subtle = globalThis.crypto?.subtle;
    if (!subtle) return tweetnaclBackend;
    try {
      const backend = createWebCryptoBackend(subtle);
      await backend.keyFromSeed(new Uint8Array(SEED_LENGTH));
      return backend;
    } catch {
      return tweetnaclBackend;
    }
  })();
  return detected;
}
