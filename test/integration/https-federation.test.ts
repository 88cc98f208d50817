import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultEd25519Backend } from '../../src/crypto/ed25519.ts';
import { webRandomBytes } from '../../src/crypto/random.ts';
import { memorySigningKeyStorage, ServerSigningKeys } from '../../src/federation/signing-keys.ts';
import { authorizationHeader } from '../../src/federation/x-matrix.ts';
import { createHttpsFederationTransport, type HttpsFederationTransport } from '../../src/node/https-federation.ts';
import { startHttpsServer } from '../../src/node/https-server.ts';
import type { RunningHttpServer } from '../../src/node/http-server.ts';
import { spawnHearth, stopAllHearths, type HearthProcess } from '../support/hearth-process.ts';
import { httpsFetch } from '../support/https-fetch.ts';
import { validateFederationRequest, validateFederationResponse } from '../support/spec-schema.ts';
import { createTestCa, type TestCa } from '../support/test-ca.ts';
import { api, register, type Account } from './harness.ts';
import { decryptedBodies as decrypted, knownDevices, sdk, startClient, startEncryptedRoom, until, waitFor } from './sdk.ts';

// Two Hearth hosts with DNS names, `localhost:P1` and `localhost:P2`, each `npm run serve --
// --server-name … --tls-cert … --tls-key …` in a process of its own, federating over real HTTPS
// on loopback: certificates from a CA of the test's own (NODE_EXTRA_CA_CERTS for the hosts,
// test/support/https-fetch.ts for the clients here), keys fetched from each other's key server.
// matrix-js-sdk drives them as it would any homeserver (issue 20). A third host (`localhost:P3`,
// which trusts A as a notary) joins after A rotates its key; a fake server of the test's own
// signs requests to them, to see X-Matrix verified with a fetched key, `destination` checked, and
// a key had through the notary when its server is gone.

const PASSWORD = 'correct horse battery staple';
const enc = encodeURIComponent;

/** A port the OS gives and takes back: the server name must name the port before the host starts. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

let ca: TestCa;
let certFile: string;
let keyFile: string;
let leaf: { cert: string; key: string };
/** Where each host writes the server-server exchanges it answered (HEARTH_TRACE_FEDERATION), one file per host. */
let traceDir: string;
const fetchFn = (() => {
  let f: ReturnType<typeof httpsFetch> | undefined;
  return () => (f ??= httpsFetch(ca.cert));
})();
const directories: string[] = [];
const clients: sdk.MatrixClient[] = [];

interface Host {
  name: string;
  port: number;
  dataDir: string;
  url: string;
  fetch: typeof fetch;
  process: HearthProcess;
}

async function startHost(port: number, dataDir: string, extra: string[] = []): Promise<Host> {
  const name = `localhost:${port}`;
  const child = await spawnHearth({
    dataDir,
    port,
    listen: [],
    args: ['--server-name', name, '--tls-cert', certFile, '--tls-key', keyFile, ...extra],
    env: { NODE_EXTRA_CA_CERTS: ca.certFile, HEARTH_TRACE_FEDERATION: join(traceDir, `${port}.jsonl`) },
  });
  expect(child.serverName).toBe(name);
  return { name, port, dataDir, url: `https://localhost:${port}`, fetch: fetchFn(), process: child };
}

async function newHost(extra: string[] = []): Promise<Host> {
  const dataDir = await mkdtemp(join(tmpdir(), 'hearth-https-'));
  directories.push(dataDir);
  return startHost(await freePort(), dataDir, extra);
}

async function client(host: Host, account: Account, crypto = false): Promise<sdk.MatrixClient> {
  const c = await startClient(host.url, account, { fetchFn: host.fetch, crypto });
  clients.push(c);
  return c;
}

async function login(host: Host, username: string): Promise<Account> {
  const r = await api(host, 'POST', '/_matrix/client/v3/login', { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: username }, password: PASSWORD } });
  expect(r.status).toBe(200);
  return { userId: r.body.user_id, accessToken: r.body.access_token, deviceId: r.body.device_id };
}

/** A document a key server answers, checked against the spec. */
async function keyServer(host: Host): Promise<any> {
  const r = await api(host, 'GET', '/_matrix/key/v2/server', { unchecked: true });
  expect(r.status).toBe(200);
  validateFederationResponse('GET', '/_matrix/key/v2/server', 200, r.body);
  return r.body;
}

const bodies = (c: sdk.MatrixClient, roomId: string) => c.getRoom(roomId)?.getLiveTimeline().getEvents().filter((e) => e.getType() === 'm.room.message').map((e) => e.getContent()['body'] as string) ?? [];
let a: Host;
let b: Host;
let alice: Account;
let bob: Account;
let aliceClient: sdk.MatrixClient;
let bobClient: sdk.MatrixClient;
let hall: string;

beforeAll(async () => {
  ca = createTestCa();
  leaf = ca.issue(['localhost', '127.0.0.1']);
  const dir = await mkdtemp(join(tmpdir(), 'hearth-https-tls-'));
  directories.push(dir);
  traceDir = dir;
  certFile = join(dir, 'cert.pem');
  keyFile = join(dir, 'key.pem');
  await writeFile(certFile, leaf.cert);
  await writeFile(keyFile, leaf.key, { mode: 0o600 });
  [a, b] = await Promise.all([newHost(), newHost()]);
  alice = await register(a, 'alice', PASSWORD);
  bob = await register(b, 'bob', PASSWORD);
  aliceClient = await client(a, alice);
  bobClient = await client(b, bob);
}, 60_000);

afterAll(async () => {
  for (const c of clients.splice(0)) c.stopClient();
  await stopAllHearths();
  fetchFn().close();
  for (const dir of directories) await rm(dir, { recursive: true, force: true });
  ca?.dispose();
});

describe('two DNS-named Hearth hosts over HTTPS, driven by matrix-js-sdk', () => {
  it('serves its self-signed key under an ed25519:a_ key ID, and fetches the other host’s as a notary would', async () => {
    const keys = await keyServer(a);
    expect(keys.server_name).toBe(a.name);
    expect(Object.keys(keys.verify_keys)).toEqual([expect.stringMatching(/^ed25519:a_[A-Za-z0-9]{4}$/)]);
    expect(Object.keys(keys.signatures[a.name])).toEqual(Object.keys(keys.verify_keys));
    const query = await api(a, 'GET', `/_matrix/key/v2/query/${enc(b.name)}`, { unchecked: true });
    expect(query.status).toBe(200);
    validateFederationResponse('GET', `/_matrix/key/v2/query/${enc(b.name)}`, 200, query.body);
    expect(query.body.server_keys).toHaveLength(1);
    expect(Object.keys(query.body.server_keys[0].signatures).sort()).toEqual([a.name, b.name].sort());
  });

  it('invite, join by alias, messages both ways, and backfill of what came before the join', async () => {
    ({ room_id: hall } = await aliceClient.createRoom({ preset: sdk.Preset.PublicChat, room_alias_name: 'hall', name: 'Hall' }));
    for (let i = 1; i <= 25; i++) {
      const r = await api(a, 'PUT', `/_matrix/client/v3/rooms/${enc(hall)}/send/m.room.message/h${i}`, { token: alice.accessToken, body: { msgtype: 'm.text', body: `history ${i}` } });
      expect(r.status).toBe(200);
    }
    await aliceClient.invite(hall, bob.userId);
    await waitFor(bobClient, () => bobClient.getRoom(hall)?.getMyMembership() === 'invite', 10_000, 'the invite on B');
    await bobClient.joinRoom(`#hall:${a.name}`);
    await waitFor(aliceClient, () => aliceClient.getRoom(hall)?.getMember(bob.userId)?.membership === 'join', 10_000, "bob's join on A");

    await aliceClient.sendTextMessage(hall, 'hello bob, over HTTPS');
    await waitFor(bobClient, () => bodies(bobClient, hall).includes('hello bob, over HTTPS'), 10_000, "alice's message on B");
    await bobClient.sendTextMessage(hall, 'hello alice, over HTTPS');
    await waitFor(aliceClient, () => bodies(aliceClient, hall).includes('hello alice, over HTTPS'), 10_000, "bob's message on A");

    // B holds nothing from before bob's join: paging back asks A (/backfill) over HTTPS.
    const room = bobClient.getRoom(hall)!;
    for (let i = 0; i < 5 && !bodies(bobClient, hall).includes('history 1'); i++) await bobClient.scrollback(room, 30);
    const seen = bodies(bobClient, hall);
    for (let i = 1; i <= 25; i++) expect(seen).toContain(`history ${i}`);
  });

  it('typing, read receipts, presence and to-device messages cross between the hosts', async () => {
    await aliceClient.sendTyping(hall, true, 30_000);
    await waitFor(bobClient, () => bobClient.getRoom(hall)?.getMember(alice.userId)?.typing, 10_000, "alice's typing on B");
    await aliceClient.sendTyping(hall, false, 0);
    await waitFor(bobClient, () => bobClient.getRoom(hall)?.getMember(alice.userId)?.typing === false, 10_000, 'alice stopping typing on B');

    const last = aliceClient.getRoom(hall)!.getLiveTimeline().getEvents().filter((e) => e.getSender() === bob.userId).at(-1)!;
    await aliceClient.sendReadReceipt(last);
    await waitFor(bobClient, () => bobClient.getRoom(hall)?.getEventReadUpTo(alice.userId) === last.getId(), 10_000, "alice's receipt on B");

    await aliceClient.setPresence({ presence: 'online', status_msg: 'on HTTPS' });
    await waitFor(bobClient, () => bobClient.getUser(alice.userId)?.presenceStatusMsg === 'on HTTPS', 10_000, "alice's presence on B");

    const received = new Promise<sdk.MatrixEvent>((resolve) => bobClient.on(sdk.ClientEvent.ToDeviceEvent, (event) => event.getType() === 'org.example.ping' && resolve(event)));
    await aliceClient.sendToDevice('org.example.ping', new Map([[bob.userId, new Map([[bob.deviceId, { n: 42 }]])]]));
    const ping = await received;
    expect(ping.getSender()).toBe(alice.userId);
    expect(ping.getContent()).toEqual({ n: 42 });
  });

  it('end-to-end encryption with Rust crypto: messages decrypt both ways, and a new device of bob’s is learnt and gets the keys', async () => {
    const aliceE2ee = await client(a, await login(a, 'alice'), true);
    const bobE2ee = await client(b, await login(b, 'bob'), true);
    const secret = await startEncryptedRoom(aliceE2ee, bobE2ee);

    await aliceE2ee.sendTextMessage(secret, 'a secret for bob');
    await until(bobE2ee, () => decrypted(bobE2ee, secret).includes('a secret for bob'), 'the secret decrypted on B');
    await bobE2ee.sendTextMessage(secret, 'a secret for alice');
    await until(aliceE2ee, () => decrypted(aliceE2ee, secret).includes('a secret for alice'), 'the secret decrypted on A');
    const stored = await api(b, 'GET', `/_matrix/client/v3/rooms/${enc(secret)}/messages?dir=b&limit=10`, { token: bob.accessToken });
    expect(JSON.stringify(stored.body)).not.toContain('a secret');

    // A new device: its keys reach A as an m.device_list_update, and alice's client learns of it.
    const bob3 = await login(b, 'bob');
    const bob3Client = await client(b, bob3, true);
    await until(aliceE2ee, async () => (await knownDevices(aliceE2ee, bob.userId)).includes(bob3.deviceId), "alice's client learning bob's new device");
    await aliceE2ee.sendTextMessage(secret, 'for your new device too');
    await until(bob3Client, () => decrypted(bob3Client, secret).includes('for your new device too'), 'the message decrypted on the new device');
    await until(bobE2ee, () => decrypted(bobE2ee, secret).includes('for your new device too'), 'the message decrypted on the first device');
  }, 90_000);
});

describe('keys: rotation, X-Matrix verified with the fetched key, and a notary', () => {
  let c: Host;
  let carol: Account;
  let oldKeyId: string;

  it('--rotate-key: the old key is served under old_verify_keys, new events verify with the new key, and a newcomer accepts the events signed before', async () => {
    oldKeyId = Object.keys((await keyServer(a)).verify_keys)[0]!;
    await a.process.stop('SIGTERM');
    a = await startHost(a.port, a.dataDir, ['--rotate-key']);
    const rotated = await keyServer(a);
    const newKeyId = Object.keys(rotated.verify_keys)[0]!;
    expect(newKeyId).not.toBe(oldKeyId);
    expect(Object.keys(rotated.old_verify_keys)).toEqual([oldKeyId]);
    expect(rotated.old_verify_keys[oldKeyId].expired_ts).toBeLessThanOrEqual(Date.now());

    // B has A's old key as current; an event under the new key ID sends it for A's keys again.
    const r = await api(a, 'PUT', `/_matrix/client/v3/rooms/${enc(hall)}/send/m.room.message/after-rotation`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'signed with the new key' } });
    expect(r.status).toBe(200);
    await waitFor(bobClient, () => bodies(bobClient, hall).includes('signed with the new key'), 15_000, 'the message under the new key on B');

    // C has never seen A: the room's state, all signed before the rotation, verifies with the old key.
    c = await newHost(['--trusted-key-server', a.name]);
    carol = await register(c, 'carol', PASSWORD);
    const join = await api(c, 'POST', `/_matrix/client/v3/join/${enc(`#hall:${a.name}`)}`, { token: carol.accessToken, body: {} });
    expect(join.status, JSON.stringify(join.body)).toBe(200);
    const history = await api(c, 'GET', `/_matrix/client/v3/rooms/${enc(hall)}/messages?dir=b&limit=50`, { token: carol.accessToken });
    expect(history.status).toBe(200);
    const seen = history.body.chunk.filter((e: any) => e.type === 'm.room.message').map((e: any) => e.content.body);
    expect(seen).toContain('signed with the new key');
    expect(seen).toContain('history 25');
  }, 60_000);

  describe('a server of the test’s own signs requests to the hosts', () => {
    let z: { name: string; keys: ServerSigningKeys; server: RunningHttpServer | undefined; transport: HttpsFederationTransport };

    beforeAll(async () => {
      const port = await freePort();
      const name = `localhost:${port}`;
      const keys = await ServerSigningKeys.open({ storage: memorySigningKeyStorage(), ed25519: await defaultEd25519Backend(), random: webRandomBytes, now: Date.now });
      const server = await startHttpsServer(
        async (request) => (new URL(request.url).pathname === '/_matrix/key/v2/server' ? Response.json(await keys.document(name)) : Response.json({ errcode: 'M_UNRECOGNIZED' }, { status: 404 })),
        { ...leaf, port },
      );
      const transport = createHttpsFederationTransport({ extraCa: [ca.cert] });
      z = { name, keys, server, transport };
    });
    afterAll(async () => {
      await z?.server?.close();
      z?.transport.close();
    });

    /** A GET signed by Z, naming `destination` in its X-Matrix header, sent to `host`. */
    async function signedGet(host: Host, path: string, destination = host.name, signingKey = z.keys.signingKey): Promise<Response> {
      const authorization = await authorizationHeader('GET', path, z.name, destination, undefined, z.keys.keyId, signingKey);
      return z.transport.send(host.name, new Request(`https://${host.name}${path}`, { headers: { authorization } }));
    }
    const profilePath = (userId: string) => `/_matrix/federation/v1/query/profile?user_id=${enc(userId)}`;

    it('X-Matrix is verified with the key fetched from the origin; a wrong destination or a forged signature is 401 M_UNAUTHORIZED', async () => {
      const ok = await signedGet(a, profilePath(alice.userId));
      expect(ok.status).toBe(200);
      const profile = await ok.json();
      validateFederationResponse('GET', profilePath(alice.userId), 200, profile);
      expect(profile).toMatchObject({ displayname: 'alice' });

      const wrongDestination = await signedGet(a, profilePath(alice.userId), b.name);
      expect(wrongDestination.status).toBe(401);
      expect(await wrongDestination.json()).toMatchObject({ errcode: 'M_UNAUTHORIZED' });

      const other = await (await defaultEd25519Backend()).keyFromSeed(webRandomBytes(32));
      const forged = await signedGet(a, profilePath(alice.userId), a.name, other);
      expect(forged.status).toBe(401);
      expect(await forged.json()).toMatchObject({ errcode: 'M_UNAUTHORIZED' });
    });

    it('a notary: A countersigns the keys it fetched; once the origin is gone, C (trusting A) has them through A, B (trusting none) refuses', async () => {
      const query = await api(a, 'GET', `/_matrix/key/v2/query/${enc(z.name)}`, { unchecked: true });
      validateFederationResponse('GET', `/_matrix/key/v2/query/${enc(z.name)}`, 200, query.body);
      expect(Object.keys(query.body.server_keys[0].signatures).sort()).toEqual([a.name, z.name].sort());
      const batch = await api(a, 'POST', '/_matrix/key/v2/query', { unchecked: true, body: { server_keys: { [z.name]: {} } } });
      validateFederationResponse('POST', '/_matrix/key/v2/query', 200, batch.body);
      expect(batch.body.server_keys.map((k: any) => k.server_name)).toEqual([z.name]);

      await z.server!.close();
      z.server = undefined;
      const throughNotary = await signedGet(c, profilePath(carol.userId));
      expect(throughNotary.status).toBe(200);
      expect(await throughNotary.json()).toMatchObject({ displayname: 'carol' });
      const noNotary = await signedGet(b, profilePath(bob.userId));
      expect(noNotary.status).toBe(401);
    });
  });
});

describe('what crossed between the hosts', () => {
  it('every server-server exchange they answered matches the spec’s OpenAPI', async () => {
    const exchanges: { origin: string; method: string; path: string; status: number; request?: unknown; response?: unknown }[] = [];
    for (const file of (await readdir(traceDir)).filter((f) => f.endsWith('.jsonl'))) {
      for (const line of (await readFile(join(traceDir, file), 'utf8')).split('\n').filter(Boolean)) exchanges.push(JSON.parse(line));
    }
    const failures: string[] = [];
    for (const x of exchanges) {
      const path = x.path.split('?')[0]!;
      try {
        if (x.request !== undefined) validateFederationRequest(x.method, path, x.request);
        if (x.response !== undefined) validateFederationResponse(x.method, path, x.status, x.response);
      } catch (error) {
        failures.push(`${x.method} ${x.path} → ${x.status}: ${(error as Error).message}`);
      }
    }
    expect(failures).toEqual([]);
    // The whole of it went over HTTPS: transactions, joins, invites, backfill, directory, device lists, keys.
    const kinds = new Set(exchanges.map((x) => x.path.split('/').slice(0, 5).join('/').split('?')[0]));
    for (const kind of ['/_matrix/federation/v1/send', '/_matrix/federation/v1/make_join', '/_matrix/federation/v2/send_join', '/_matrix/federation/v2/invite', '/_matrix/federation/v1/backfill', '/_matrix/federation/v1/query', '/_matrix/federation/v1/user', '/_matrix/key/v2/server', '/_matrix/key/v2/query']) {
      expect(kinds, kind).toContain(kind);
    }
  });
});
