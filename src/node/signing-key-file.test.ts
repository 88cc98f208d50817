import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tweetnaclBackend } from '../crypto/ed25519.ts';
import { webRandomBytes } from '../crypto/random.ts';
import { ServerSigningKeys } from '../federation/signing-keys.ts';
import { signingKeyFile } from './signing-key-file.ts';

let dir: string | undefined;
afterEach(() => dir && rmSync(dir, { recursive: true, force: true }));

describe('the signing key file', () => {
  it('keeps the key made on first start and the rotation, readable only by us', async () => {
    dir = mkdtempSync(join(tmpdir(), 'hearth-keys-'));
    const path = join(dir, 'signing-keys.json');
    const open = () => ServerSigningKeys.open({ storage: signingKeyFile(path), ed25519: tweetnaclBackend, random: webRandomBytes, now: () => 42 });
    const first = await open();
    expect(statSync(path).mode & 0o777).toBe(0o600);
    await first.rotate();
    const again = await open();
    expect([again.keyId, again.oldKeys]).toEqual([first.keyId, first.oldKeys]);
    expect(again.signingKey.publicKey).toEqual(first.signingKey.publicKey);
    writeFileSync(path, '{"nothing": true}');
    await expect(open()).rejects.toThrow(/does not hold signing keys/);
  });
});
