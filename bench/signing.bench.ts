// Ed25519 sign/verify speed for each backend, on a typical event-sized message.
// Baseline: tweetnacl, measured in the same run.
import { createWebCryptoBackend, tweetnaclBackend, type Ed25519Backend } from '../src/crypto/ed25519.ts';
import { canonicalJson, utf8 } from '../src/crypto/canonical-json.ts';
import { computeContentHash } from '../src/crypto/signing.ts';
import { measure, report } from './harness.ts';

const message = utf8(
  canonicalJson({
    type: 'm.room.message', room_id: '!abcdefghijklmnop:example.org', sender: '@alice:example.org',
    origin_server_ts: 1_700_000_000_000, depth: 42, prev_events: ['$' + 'a'.repeat(43)], auth_events: ['$' + 'b'.repeat(43), '$' + 'c'.repeat(43)],
    content: { msgtype: 'm.text', body: 'Hello there, this is a message of typical size. '.repeat(3) },
  }),
);

export async function run(): Promise<void> {
  const backends: Ed25519Backend[] = [tweetnaclBackend, createWebCryptoBackend(globalThis.crypto.subtle)];
  const results: Record<string, { sign: number; verify: number }> = {};
  for (const backend of backends) {
    const key = await backend.keyFromSeed(new Uint8Array(32).fill(1));
    const signature = await key.sign(message);
    const iterations = backend.name === 'tweetnacl' ? 100 : 2000;
    const sign = await measure(iterations, () => key.sign(message));
    const verify = await measure(iterations, () => backend.verify(key.publicKey, message, signature));
    results[backend.name] = { sign, verify };
  }
  const hash = await measure(20000, () => computeContentHash({ content: { body: 'x'.repeat(300) }, type: 'm.room.message' }));
  const nacl = results['tweetnacl']!;
  const web = results['webcrypto']!;
  report('ed25519', `${message.length}-byte message`, [
    ['tweetnacl sign', nacl.sign, 'ms'],
    ['tweetnacl verify', nacl.verify, 'ms'],
    ['webcrypto sign', web.sign, 'ms', `${(nacl.sign / web.sign).toFixed(0)}× faster than tweetnacl`],
    ['webcrypto verify', web.verify, 'ms', `${(nacl.verify / web.verify).toFixed(0)}× faster than tweetnacl`],
    ['content hash (canonical JSON + SHA-256)', hash, 'ms'],
  ]);
}
