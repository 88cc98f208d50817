import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { encodeBase64 } from '../../src/crypto/base64.ts';
import { tweetnaclBackend } from '../../src/crypto/ed25519.ts';
import { signJson, verifyJsonSignature } from '../../src/crypto/signing.ts';
import { stopAllHearths } from '../support/hearth-process.ts';
import { createTestTls, spawnHttpsHearth, type HttpsHearth, type TestTls } from '../support/https-hosts.ts';
import { startScriptedRemote, type ScriptedRemote } from '../support/scripted-remote.ts';
import { validateFederationResponse } from '../support/spec-schema.ts';
import { api, register, type Account } from './harness.ts';

// Keys, joins, invites and server ACLs (issue 35, "Server-server behaviours an independent remote
// server found missing"), against a remote server that is not Hearth: a DNS-named Hearth host
// (`npm run serve` in a process of its own, over real HTTPS) and the scripted remote of
// test/support/scripted-remote.ts, which signs its own requests and events and answers each
// request as a case needs: a key its origin no longer lists, a server that only speaks the v1
// endpoints, a send_join answer with a bad event in it, a float in an invite. Each case is named
// after what it checks; the conformance suite that found them is sytest's tests/50federation.

const enc = encodeURIComponent;
const V3 = '/_matrix/client/v3';
const DAY = 24 * 60 * 60 * 1000;

let tls: TestTls;
let host: HttpsHearth;
let remote: ScriptedRemote;
let alice: Account;
let userCount = 0;

beforeAll(async () => {
  tls = await createTestTls();
  host = await spawnHttpsHearth(tls);
});

afterAll(async () => {
  await host?.close();
  await stopAllHearths();
  await tls?.dispose();
});

beforeEach(async ({ onTestFailed }) => {
  // A remote of its own for each case, so no case sees another's scripted answers or keys.
  remote = await startScriptedRemote(tls);
  alice = await register(host, `alice${++userCount}`);
  const from = host.process.output().length;
  onTestFailed(() => console.log(`--- Hearth's output during the test:\n${host.process.output().slice(from).split('\n').slice(-100).join('\n')}`));
});

afterEach(async () => {
  await remote.close();
});

/** A request of the test's own to the host's key server, which needs no X-Matrix. */
async function keyQuery(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await host.fetch(`${host.url}${path}`, { method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: response.status, body: await response.json() };
}

/** A key document of `serverName`'s, signed by a key of its own under `keyId`, valid until `validUntil`. */
async function keyDocument(serverName: string, keyId: string, validUntil: number): Promise<Record<string, unknown>> {
  const key = await tweetnaclBackend.keyFromSeed(crypto.getRandomValues(new Uint8Array(32)));
  return signJson({ server_name: serverName, valid_until_ts: validUntil, verify_keys: { [keyId]: { key: encodeBase64(key.publicKey) } }, old_verify_keys: {} }, serverName, keyId, key);
}

const keyServerPath = /^\/_matrix\/key\/v2\/server$/;
const keyIdsIn = (answer: { server_keys: Record<string, any>[] }) => answer.server_keys.map((d) => Object.keys(d['verify_keys']));

describe('keys: Hearth as a notary for a server that is not Hearth', () => {
  it('serves a server’s keys by GET, with and without the key ID that the form before Matrix 1.6 names, to anyone, countersigned', async () => {
    for (const path of [`/_matrix/key/v2/query/${enc(remote.name)}`, `/_matrix/key/v2/query/${enc(remote.name)}/${enc(remote.keys.keyId)}`]) {
      const answer = await keyQuery('GET', path);
      expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBe(200);
      validateFederationResponse('GET', `/_matrix/key/v2/query/${enc(remote.name)}`, 200, answer.body);
      expect(keyIdsIn(answer.body), path).toEqual([[remote.keys.keyId]]);
      const document = answer.body.server_keys[0];
      const ours = await keyQuery('GET', '/_matrix/key/v2/server');
      const [notaryKeyId, notaryKey] = Object.entries(ours.body.verify_keys as Record<string, { key: string }>)[0]!;
      expect(await verifyJsonSignature(document, host.name, notaryKeyId, Buffer.from(notaryKey.key, 'base64'), tweetnaclBackend), path).toBe(true);
    }
  });

  it('keeps serving a key its origin no longer lists, for a query that names it, and the kept key when the origin fails', async () => {
    const expired = Date.now() - DAY;
    const first = await keyDocument(remote.name, 'ed25519:key_1', expired);
    const query = (keyId: string, minimum: number) => keyQuery('POST', '/_matrix/key/v2/query', { server_keys: { [remote.name]: { [keyId]: { minimum_valid_until_ts: minimum } } } });

    remote.answerNext('GET', keyServerPath, () => ({ status: 200, body: first }));
    const one = await query('ed25519:key_1', 0);
    expect(keyIdsIn(one.body)).toEqual([['ed25519:key_1']]);

    // Asked for a later validity, the notary asks the origin again, which now lists another key only.
    const second = remote.answerNext('GET', keyServerPath, async () => ({ status: 200, body: await keyDocument(remote.name, 'ed25519:key_2', expired + 1000) }));
    await query('ed25519:key_1', Date.now());
    await second;

    // Asked for key_1 again, valid until when it was: the document that has it, and only that.
    const fetchesBefore = remote.received.filter((r) => keyServerPath.test(r.path)).length;
    const three = await query('ed25519:key_1', expired);
    expect(three.status, JSON.stringify(three.body)).toBe(200);
    expect(keyIdsIn(three.body)).toEqual([['ed25519:key_1']]);
    expect(three.body.server_keys[0].valid_until_ts).toBe(expired);
    // What it kept was valid long enough: the origin was not asked.
    expect(remote.received.filter((r) => keyServerPath.test(r.path)).length).toBe(fetchesBefore);

    // An origin that answers 400, or a document whose signature does not verify, takes nothing away.
    remote.answerNext('GET', keyServerPath, () => ({ status: 400, body: {} }));
    expect(keyIdsIn((await query('ed25519:key_1', expired + 1)).body)).toEqual([['ed25519:key_1']]);
    const forged = { ...(await keyDocument(remote.name, 'ed25519:key_1', Date.now() + DAY)), valid_until_ts: Date.now() + 2 * DAY };
    remote.answerNext('GET', keyServerPath, () => ({ status: 200, body: forged }));
    const afterForgery = await query('ed25519:key_1', expired + 1);
    expect(afterForgery.body.server_keys.map((d: any) => d.verify_keys['ed25519:key_1'].key)).toEqual([(first['verify_keys'] as any)['ed25519:key_1'].key]);
  });

  it('refuses a request whose X-Matrix origin has a port that is not a number with 400', async () => {
    const profile = `/_matrix/federation/v1/query/profile?user_id=${enc(alice.userId)}`;
    const refused = await remote.call(host.name, 'GET', profile, undefined, { origin: 'localhost:http' });
    expect([refused.status, refused.body.errcode], JSON.stringify(refused.body)).toEqual([400, 'M_UNAUTHORIZED']);
    // The same request from a proper name is answered.
    expect((await remote.call(host.name, 'GET', profile)).status).toBe(200);
  });
});

void api;
void V3;
