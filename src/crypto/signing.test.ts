import { describe, expect, it } from 'vitest';
import { SPEC_KEY_ID, SPEC_PUBLIC_KEY_B64, SPEC_SEED, SPEC_SERVER } from '../../test/unit/spec-key.ts';
import { decodeBase64, encodeBase64 } from './base64.ts';
import { canonicalJson } from './canonical-json.ts';
import { createWebCryptoBackend, defaultEd25519Backend, tweetnaclBackend, type Ed25519Backend } from './ed25519.ts';
import { signJson, verifyJsonSignature } from './signing.ts';

const backends: Ed25519Backend[] = [tweetnaclBackend, createWebCryptoBackend(globalThis.crypto.subtle)];

describe.each(backends)('JSON signing with $name (spec-vectors §3)', (backend) => {
  it('derives the public key from the seed', async () => {
    const key = await backend.keyFromSeed(SPEC_SEED);
    expect(encodeBase64(key.publicKey)).toBe(SPEC_PUBLIC_KEY_B64);
  });

  it('signs {}', async () => {
    const key = await backend.keyFromSeed(SPEC_SEED);
    const signed = await signJson({}, SPEC_SERVER, SPEC_KEY_ID, key);
    expect(canonicalJson(signed)).toBe(
      '{"signatures":{"domain":{"ed25519:1":"K8280/U9SSy9IVtjBuVeLr+HpOB4BQFWbg+UZaADMtTdGYI7Geitb76LTrr5QV/7Xg4ahLwYGYZzuHGZKM5ZAQ"}}}',
    );
  });

  it('signs {"one":1,"two":"Two"} and keeps unsigned out of the signature', async () => {
    const key = await backend.keyFromSeed(SPEC_SEED);
    const signed = await signJson({ one: 1, two: 'Two', unsigned: { age_ts: 5 } }, SPEC_SERVER, SPEC_KEY_ID, key);
    expect(signed.signatures.domain!['ed25519:1']).toBe(
      'KqmLSbO39/Bzb0QIYE82zqLwsA+PDzYIpIRA2sRQ4sL53+sN6/fpNSoqE7BP7vBZhG6kYdD13EIMJpvhJI+6Bw',
    );
    expect(signed.unsigned).toEqual({ age_ts: 5 });
  });

  it('verifies a good signature and rejects tampering, wrong keys and bad base64', async () => {
    const key = await backend.keyFromSeed(SPEC_SEED);
    const signed = await signJson({ one: 1, two: 'Two' }, SPEC_SERVER, SPEC_KEY_ID, key);
    const publicKey = decodeBase64(SPEC_PUBLIC_KEY_B64);
    expect(await verifyJsonSignature(signed, SPEC_SERVER, SPEC_KEY_ID, publicKey, backend)).toBe(true);
    expect(await verifyJsonSignature({ ...signed, unsigned: { x: 1 } }, SPEC_SERVER, SPEC_KEY_ID, publicKey, backend)).toBe(true);
    expect(await verifyJsonSignature({ ...signed, one: 2 }, SPEC_SERVER, SPEC_KEY_ID, publicKey, backend)).toBe(false);
    const other = await backend.keyFromSeed(new Uint8Array(32).fill(7));
    expect(await verifyJsonSignature(signed, SPEC_SERVER, SPEC_KEY_ID, other.publicKey, backend)).toBe(false);
    const badBase64 = { ...signed, signatures: { domain: { 'ed25519:1': '!!!not base64!!!' } } };
    expect(await verifyJsonSignature(badBase64, SPEC_SERVER, SPEC_KEY_ID, publicKey, backend)).toBe(false);
    const shortSig = { ...signed, signatures: { domain: { 'ed25519:1': 'AAAA' } } };
    expect(await verifyJsonSignature(shortSig, SPEC_SERVER, SPEC_KEY_ID, publicKey, backend)).toBe(false);
    expect(await verifyJsonSignature(signed, SPEC_SERVER, 'ed25519:2', publicKey, backend)).toBe(false);
    expect(await backend.verify(new Uint8Array(5), new Uint8Array(1), new Uint8Array(64))).toBe(false);
  });
});

describe('backend choice', () => {
  it('uses WebCrypto where the runtime has Ed25519', async () => {
    expect((await defaultEd25519Backend()).name).toBe('webcrypto');
  });
  it('rejects a seed of the wrong length', async () => {
    for (const backend of backends) await expect(backend.keyFromSeed(new Uint8Array(31))).rejects.toThrow(/32 bytes/);
  });
});
