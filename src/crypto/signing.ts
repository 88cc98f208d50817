import { decodeBase64, encodeBase64, Base64Error } from './base64.ts';
import { canonicalJson, utf8, type JsonObject } from './canonical-json.ts';
import type { Ed25519Backend, SigningKey } from './ed25519.ts';
import { sha256 } from './sha256.ts';

/** `signatures` block: server name (or user ID) → key ID → unpadded base64 signature. */
export type Signatures = Record<string, Record<string, string>>;

/** The bytes that are signed: canonical JSON without `signatures` and `unsigned`. */
export function signingBytes(object: object): Uint8Array {
  const { signatures: _s, unsigned: _u, ...rest } = object as Record<string, unknown>;
  return utf8(canonicalJson(rest));
}

/** Signs JSON (appendices §Signing JSON), returning a copy with the signature added. */
export async function signJson<T extends object>(
  object: T,
  signer: string,
  keyId: string,
  key: SigningKey,
): Promise<T & { signatures: Signatures }> {
  const signature = encodeBase64(await key.sign(signingBytes(object)));
  const existing = ((object as { signatures?: Signatures }).signatures ?? {}) as Signatures;
  return {
    ...object,
    signatures: { ...existing, [signer]: { ...(existing[signer] ?? {}), [keyId]: signature } },
  };
}

/** Checks one signature. False (never a throw) when it is missing, malformed or wrong. */
export async function verifyJsonSignature(
  object: object,
  signer: string,
  keyId: string,
  publicKey: Uint8Array,
  backend: Ed25519Backend,
): Promise<boolean> {
  const signature = (object as { signatures?: Signatures }).signatures?.[signer]?.[keyId];
  if (typeof signature !== 'string') return false;
  return verifySignedBytes(signingBytes(object), signature, publicKey, backend);
}

/**
 * Checks one signature (unpadded base64, as in a `signatures` block) over bytes already
 * encoded (signingBytes' output). False (never a throw) when it is missing, malformed or wrong.
 */
export async function verifySignedBytes(bytes: Uint8Array, signature: unknown, publicKey: Uint8Array, backend: Ed25519Backend): Promise<boolean> {
  if (typeof signature !== 'string') return false;
  let signatureBytes: Uint8Array;
  try {
    signatureBytes = decodeBase64(signature);
  } catch (e) {
    if (e instanceof Base64Error) return false;
    throw e;
  }
  return backend.verify(publicKey, bytes, signatureBytes);
}

/** Content hash (server-server §Calculating the content hash): SHA-256 without unsigned, signatures, hashes. */
export function computeContentHash(event: object): Uint8Array {
  const { unsigned: _u, signatures: _s, hashes: _h, ...rest } = event as JsonObject;
  return sha256(utf8(canonicalJson(rest)));
}
