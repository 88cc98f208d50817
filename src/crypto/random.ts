import { encodeBase64Url } from './base64.ts';

/** Randomness, injected so hosts and tests can control it; defaults to WebCrypto. */
export type RandomBytes = (length: number) => Uint8Array;

export const webRandomBytes: RandomBytes = (length) => globalThis.crypto.getRandomValues(new Uint8Array(length));

/** An unguessable URL-safe token with `bytes` bytes of entropy. */
export function randomToken(random: RandomBytes, bytes = 32): string {
  return encodeBase64Url(random(bytes));
}

/** A random string drawn from `alphabet` (rejection sampling, so no bias). */
export function randomString(random: RandomBytes, length: number, alphabet: string): string {
  const limit = 256 - (256 % alphabet.length);
  let out = '';
  while (out.length < length) {
    for (const byte of random(length * 2)) {
      if (byte < limit && out.length < length) out += alphabet[byte % alphabet.length];
    }
  }
  return out;
}
