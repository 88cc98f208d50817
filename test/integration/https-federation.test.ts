import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer as createHttpsServer } from 'node:https';
import { type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultEd25519Backend } from '../../src/crypto/ed25519.ts';
import { webRandomBytes } from '../../src/crypto/random.ts';
import { signNewEvent, type PDU } from '../../src/events/pdu.ts';
import { requireRoomVersion } from '../../src/events/room-versions.ts';
import { FederationClient } from '../../src/federation/client.ts';
import { memorySigningKeyStorage, ServerSigningKeys } from '../../src/federation/signing-keys.ts';
import { authorizationHeader } from '../../src/federation/x-matrix.ts';
import { createHttpsFederationTransport, type HttpsFederationTransport } from '../../src/node/https-federation.ts';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.ts';
import { stopAllHearths } from '../support/hearth-process.ts';
import { createTestTls, spawnHttpsHearth, type HttpsHearth, type TestTls } from '../support/https-hosts.ts';
import { freePort } from '../support/node-peer.ts';
import { validateFederationRequest, validateFederationResponse } from '../support/spec-schema.ts';
import type { TestCa } from '../support/test-ca.ts';
import { api, register, type Account } from './harness.ts';
import { decryptedBodies as decrypted, knownDevices, sdk, startClient, startEncryptedRoom, until, waitFor } from './sdk.ts';

// Two Hearth hosts with DNS names, `localhost:P1` and `localhost:P2`, each `npm run serve --
// --server-name … --tls-cert … --tls-key …` in a process of its own, federating over real HTTPS
// on loopback: certificates from a CA of the test's own (NODE_EXTRA_CA_CERTS for the hosts,
// test/support/https-fetch.ts for the clients here), keys fetched from each other's key server.
// matrix-js-sdk drives them as it would any homeserver (issue 20). A third host (`localhost:P3`,
// which trusts A as a notary) joins after A rotates its key; a fake server of the test's own
// signs requests to them, to see X-Matrix verified with a fetched key, `destination` checked, and
// a key had through the notary when its server is gone; it also joins a room to read its state
// and history, and sends transactions over the limits. Server discovery between processes: C is
// named `localhost` with no port, reached through a `.well-known/matrix/server` delegation the
// test serves (HEARTH_WELL_KNOWN_PORT), another fake server through an SRV record of the test's
// own DNS server (HEARTH_DNS_SERVERS), and one with a certificate for the wrong name is refused.

const PASSWORD = 'correct horse battery staple';
const enc = encodeURIComponent;

let tls: TestTls;
let ca: TestCa;
let leaf: { cert: string; key: string };
/** Where each host writes the server-server exchanges it answered (HEARTH_TRACE_FEDERATION), one file per host. */
let traceDir: string;
const directories: string[] = [];
const clients: sdk.MatrixClient[] = [];
/** The test's `.well-known/matrix/server` for the name `localhost` (C's), and its DNS server for SRV. */
let wellKnown: TestHttps;
let delegatedTo: string | undefined;
let dns: TestDnsServer;

/** An HTTPS server of the test's own: what it was asked (with the Host header), and how many connections it had. */
interface TestHttps {
  port: number;
  requests: { host: string; path: string }[];
  connections(): number;
  close(): Promise<void>;
}

async function testHttps(tls: { cert: string; key: string }, answer: (path: string, host: string) => Promise<{ status: number; body: unknown }>): Promise<TestHttps> {
  const requests: TestHttps['requests'] = [];
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createHttpsServer(tls, (req, res) => {
    const host = req.headers.host ?? '';
    requests.push({ host, path: req.url ?? '' });
    req.resume();
    void answer(req.url ?? '', host).then(({ status, body }) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
  });
  server.on('connection', (socket: Socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    requests,
    connections: () => connections,
    close: () => new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    }),
  };
}

/** A server that is only a key, on HTTPS of its own: it serves its key document and signs requests (`client`) as `name`. */
interface FakeServer {
  name: string;
  keys: ServerSigningKeys;
  server: TestHttps | undefined;
  transport: HttpsFederationTransport;
  client: FederationClient;
}

async function fakeServer(nameFor: (port: number) => string, tls = leaf): Promise<FakeServer> {
  const keys = await ServerSigningKeys.open({ storage: memorySigningKeyStorage(), ed25519: await defaultEd25519Backend(), random: webRandomBytes, now: Date.now });
  let name = '';
  const server = await testHttps(tls, async (path) => (path === '/_matrix/key/v2/server' ? { status: 200, body: await keys.document(name) } : { status: 404, body: { errcode: 'M_UNRECOGNIZED' } }));
  name = nameFor(server.port);
  // It finds the hosts as they find each other; its bodies may be larger than a server would send.
  const transport = createHttpsFederationTransport({ extraCa: [ca.cert], wellKnownPort: wellKnown.port, dnsServers: [dns.address], limits: { maxRequestBytes: 16 * 1024 * 1024 } });
  return { name, keys, server, transport, client: new FederationClient(transport, name, keys.keyId, keys.signingKey) };
}

type Host = HttpsHearth;

async function startHost(port: number, dataDir: string, extra: string[] = [], name = `localhost:${port}`): Promise<Host> {
  return spawnHttpsHearth(tls, {
    port,
    dataDir,
    name,
    args: extra,
    env: {
      HEARTH_TRACE_FEDERATION: join(traceDir, `${port}.jsonl`),
      HEARTH_WELL_KNOWN_PORT: String(wellKnown.port),
      HEARTH_DNS_SERVERS: dns.address,
    },
  });
}

/** A host named `localhost:PORT`, or with `delegated` the name `localhost`, which the test's well-known delegates to `localhost:PORT`. */
async function newHost(extra: string[] = [], delegated = false): Promise<Host> {
  const dataDir = await mkdtemp(join(tmpdir(), 'hearth-https-'));
  directories.push(dataDir);
  const port = await freePort();
  if (delegated) delegatedTo = `localhost:${port}`;
  return startHost(port, dataDir, extra, delegated ? 'localhost' : undefined);
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
  tls = await createTestTls();
  ({ ca, leaf, dir: traceDir } = tls);
  dns = await startDnsServer();
  // `https://localhost/.well-known/matrix/server`, on the port the hosts are told to ask.
  wellKnown = await testHttps(leaf, async (path, host) =>
    path === '/.well-known/matrix/server' && host === `localhost:${wellKnown.port}` && delegatedTo ? { status: 200, body: { 'm.server': delegatedTo } } : { status: 404, body: { errcode: 'M_NOT_FOUND' } });
  [a, b] = await Promise.all([newHost(), newHost()]);
  alice = await register(a, 'alice', PASSWORD);
  bob = await register(b, 'bob', PASSWORD);
  aliceClient = await client(a, alice);
  bobClient = await client(b, bob);
}, 60_000);

afterAll(async () => {
  for (const c of clients.splice(0)) c.stopClient();
  await stopAllHearths();
  await wellKnown?.close();
  await dns?.close();
  for (const dir of directories) await rm(dir, { recursive: true, force: true });
  await tls?.dispose();
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

describe('the rest of the server-server API between the two hosts, over HTTPS', () => {
  const createRoom = async (body: Record<string, unknown>) => {
    const r = await api(a, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body.room_id as string;
  };
  const membershipOnA = (roomId: string, userId: string) => aliceClient.getRoom(roomId)?.getMember(userId)?.membership;

  it('knock: bob knocks on a room of A’s (make_knock, send_knock); A’s members see it, B lists the room as knocked', async () => {
    const porch = await createRoom({ name: 'Porch', initial_state: [{ type: 'm.room.join_rules', state_key: '', content: { join_rule: 'knock' } }] });
    await bobClient.knockRoom(porch, { viaServers: [a.name], reason: 'let me in' });
    await waitFor(bobClient, () => bobClient.getRoom(porch)?.getMyMembership() === 'knock', 10_000, 'the knocked room on B');
    await waitFor(aliceClient, () => membershipOnA(porch, bob.userId) === 'knock', 10_000, "bob's knock on A");
  });

  it('leave: bob rejects an invite (make_leave, send_leave), then joins and leaves; A sees each', async () => {
    const study = await createRoom({ name: 'Study', preset: 'private_chat' });
    await aliceClient.invite(study, bob.userId);
    await waitFor(bobClient, () => bobClient.getRoom(study)?.getMyMembership() === 'invite', 10_000, 'the invite on B');
    await bobClient.leave(study);
    await waitFor(aliceClient, () => membershipOnA(study, bob.userId) === 'leave', 10_000, "bob's rejection on A");

    await aliceClient.invite(study, bob.userId);
    await waitFor(bobClient, () => bobClient.getRoom(study)?.getMyMembership() === 'invite', 10_000, 'the second invite on B');
    await bobClient.joinRoom(study, { viaServers: [a.name] });
    await waitFor(aliceClient, () => membershipOnA(study, bob.userId) === 'join', 10_000, "bob's join on A");
    await bobClient.leave(study);
    await waitFor(aliceClient, () => membershipOnA(study, bob.userId) === 'leave', 10_000, "bob's leave on A");
  });

  it('a ban: bob, joined, is banned on A and kicked on both servers; B itself then refuses his sends there', async () => {
    const cellar = await createRoom({ name: 'Cellar', preset: 'public_chat' });
    await bobClient.joinRoom(cellar, { viaServers: [a.name] });
    await waitFor(aliceClient, () => membershipOnA(cellar, bob.userId) === 'join', 10_000, "bob's join on A");
    await aliceClient.ban(cellar, bob.userId, 'enough');
    await waitFor(aliceClient, () => membershipOnA(cellar, bob.userId) === 'ban', 10_000, 'the ban on A');
    await waitFor(bobClient, () => bobClient.getRoom(cellar)?.getMyMembership() === 'ban', 10_000, 'the ban on B');
    const refused = await api(b, 'PUT', `/_matrix/client/v3/rooms/${enc(cellar)}/send/m.room.message/after-ban`, { token: bob.accessToken, body: { msgtype: 'm.text', body: 'still here?' } });
    expect(refused.status).toBe(403);
    expect(refused.body.errcode).toBe('M_FORBIDDEN');
  });

  it('media: a file uploaded on A downloads through B (/federation/v1/media/download)', async () => {
    const bytes = new TextEncoder().encode('a file that crossed over HTTPS');
    const uploaded = await api(a, 'POST', '/_matrix/media/v3/upload?filename=note.txt', { token: alice.accessToken, rawBody: bytes, headers: { 'content-type': 'text/plain' } });
    expect(uploaded.status).toBe(200);
    const [server, mediaId] = (uploaded.body.content_uri as string).slice('mxc://'.length).split('/') as [string, string];
    expect(server).toBe(a.name);
    const downloaded = await api(b, 'GET', `/_matrix/client/v1/media/download/${enc(server)}/${enc(mediaId)}`, { token: bob.accessToken, unchecked: true });
    expect(downloaded.status).toBe(200);
    expect(downloaded.body).toBe('a file that crossed over HTTPS');
  });

  it("/publicRooms of the other server: bob lists A's directory through B", async () => {
    const lobby = await createRoom({ name: 'Lobby', preset: 'public_chat', visibility: 'public' });
    const listed = await api(b, 'GET', `/_matrix/client/v3/publicRooms?server=${enc(a.name)}`, { token: bob.accessToken });
    expect(listed.status).toBe(200);
    expect(listed.body.chunk.map((r: any) => r.room_id)).toContain(lobby);
    expect(listed.body.chunk.find((r: any) => r.room_id === lobby)).toMatchObject({ name: 'Lobby', num_joined_members: 1 });
  });

  it('space hierarchy: a space on B with a child room on A is walked through A’s /federation/v1/hierarchy', async () => {
    const library = await createRoom({ name: 'Library', topic: 'on A', preset: 'public_chat' });
    const space = (await api(b, 'POST', '/_matrix/client/v3/createRoom', { token: bob.accessToken, body: { name: 'Bob’s space', preset: 'public_chat', creation_content: { type: 'm.space' } } })).body.room_id as string;
    const child = await api(b, 'PUT', `/_matrix/client/v3/rooms/${enc(space)}/state/m.space.child/${enc(library)}`, { token: bob.accessToken, body: { via: [a.name] } });
    expect(child.status).toBe(200);
    const walked = await api(b, 'GET', `/_matrix/client/v1/rooms/${enc(space)}/hierarchy`, { token: bob.accessToken });
    expect(walked.status).toBe(200);
    expect(walked.body.rooms.map((r: any) => r.name)).toEqual(['Bob’s space', 'Library']);
    expect(walked.body.rooms[1]).toMatchObject({ room_id: library, topic: 'on A', join_rule: 'public' });
  });

  it('OpenID: a token alice got from A is exchanged for her user ID at A’s /federation/v1/openid/userinfo', async () => {
    const issued = await api(a, 'POST', `/_matrix/client/v3/user/${enc(alice.userId)}/openid/request_token`, { token: alice.accessToken, body: {} });
    expect(issued.status).toBe(200);
    expect(issued.body.matrix_server_name).toBe(a.name);
    const path = `/_matrix/federation/v1/openid/userinfo?access_token=${enc(issued.body.access_token)}`;
    const info = await api(a, 'GET', path, { unchecked: true });
    validateFederationResponse('GET', '/_matrix/federation/v1/openid/userinfo', info.status, info.body);
    expect(info).toMatchObject({ status: 200, body: { sub: alice.userId } });
    const unknown = await api(a, 'GET', '/_matrix/federation/v1/openid/userinfo?access_token=not-a-token', { unchecked: true });
    expect(unknown.status).toBe(401);
  });
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
    c = await newHost(['--trusted-key-server', a.name], true);
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
    let z: FakeServer;
    const fakes: FakeServer[] = [];

    beforeAll(async () => {
      z = await fakeServer((port) => `localhost:${port}`);
      fakes.push(z);
    });
    afterAll(async () => {
      for (const fake of fakes) {
        await fake.server?.close();
        fake.transport.close();
      }
    });

    /** A request signed by `from` (Z unless given), naming `destination` in its X-Matrix header, sent to `host`. */
    async function signed(host: Host, method: string, path: string, options: { body?: unknown; destination?: string; signingKey?: FakeServer['keys']['signingKey']; from?: FakeServer } = {}): Promise<Response> {
      const from = options.from ?? z;
      const authorization = await authorizationHeader(method, path, from.name, options.destination ?? host.name, options.body, from.keys.keyId, options.signingKey ?? from.keys.signingKey);
      const body = options.body === undefined ? undefined : JSON.stringify(options.body);
      return from.transport.send(host.name, new Request(`https://${host.name}${path}`, { method, headers: { authorization, ...(body ? { 'content-type': 'application/json' } : {}) }, body }));
    }
    const signedGet = (host: Host, path: string, destination = host.name, signingKey = z.keys.signingKey) => signed(host, 'GET', path, { destination, signingKey });
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

    it('Z joins a room of A’s (make_join, send_join), then reads it: /state, /state_ids, /event_auth, /event, /get_missing_events', async () => {
      const yard = (await api(a, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { name: 'Yard', preset: 'public_chat' } })).body.room_id as string;
      const zed = `@zed:${z.name}`;
      const made = await z.client.makeJoin(a.name, yard, zed, ['10', '11']);
      const version = requireRoomVersion(made.room_version ?? '1');
      const { event, eventId } = await signNewEvent({ ...made.event, origin_server_ts: Date.now() }, version, z.name, z.keys.keyId, z.keys.signingKey);
      const joined = await z.client.sendJoin(a.name, yard, eventId, event as unknown as PDU);
      const stateTypes = [...joined.state!].map((e) => (e as PDU).type);
      expect(stateTypes).toEqual(expect.arrayContaining(['m.room.create', 'm.room.power_levels', 'm.room.join_rules']));

      const check = (method: string, path: string, body: unknown) => validateFederationResponse(method, path, 200, body);
      const answer = await z.client.state(a.name, yard, eventId);
      const state = { pdus: [...answer.pdus!] as PDU[], auth_chain: [...answer.auth_chain!] };
      check('GET', `/_matrix/federation/v1/state/${enc(yard)}`, state);
      expect(state.pdus.map((e) => e.type)).toEqual(expect.arrayContaining(['m.room.create', 'm.room.member']));
      const ids = await z.client.stateIds(a.name, yard, eventId);
      check('GET', `/_matrix/federation/v1/state_ids/${enc(yard)}`, ids);
      expect(ids.pdu_ids).toHaveLength(state.pdus.length);
      const auth = await z.client.eventAuth(a.name, yard, eventId);
      check('GET', `/_matrix/federation/v1/event_auth/${enc(yard)}/${enc(eventId)}`, auth);
      expect(auth.auth_chain.map((e) => e.type)).toContain('m.room.create');
      const one = await z.client.event(a.name, eventId);
      check('GET', `/_matrix/federation/v1/event/${enc(eventId)}`, one);
      expect(one.pdus).toHaveLength(1);
      expect(one.pdus[0]).toMatchObject({ type: 'm.room.member', state_key: zed, content: { membership: 'join' } });

      // alice writes twice more; what lies between Z's join and the latest comes by /get_missing_events.
      const sent: string[] = [];
      for (const body of ['one for zed', 'two for zed']) {
        sent.push((await api(a, 'PUT', `/_matrix/client/v3/rooms/${enc(yard)}/send/m.room.message/${enc(body)}`, { token: alice.accessToken, body: { msgtype: 'm.text', body } })).body.event_id);
      }
      const missing = await z.client.getMissingEvents(a.name, yard, { earliest_events: [eventId], latest_events: [sent[1]!], limit: 10, min_depth: 0 });
      check('POST', `/_matrix/federation/v1/get_missing_events/${enc(yard)}`, missing);
      expect(missing.events.map((e) => (e.content as { body?: string }).body)).toEqual(['one for zed']);
    });

    it('transactions over the limits, signed by Z: 51 PDUs or 101 EDUs is 400 (the transaction ID left unused), a body over 4 MiB is 413', async () => {
      const txn = (extra: Record<string, unknown>) => ({ origin: z.name, origin_server_ts: Date.now(), pdus: [], ...extra });
      const edu = { edu_type: 'm.typing', content: { room_id: hall, user_id: `@zed:${z.name}`, typing: false } };
      // PDUs shaped as the spec's (Z's own membership, 51 times): the count alone is refused.
      const pdu = { type: 'm.room.member', room_id: hall, sender: `@zed:${z.name}`, state_key: `@zed:${z.name}`, content: { membership: 'join' }, origin_server_ts: Date.now(), depth: 1, prev_events: [], auth_events: [], hashes: { sha256: 'x' }, signatures: {} };
      for (const [what, body] of [['51 PDUs', txn({ pdus: Array.from({ length: 51 }, () => pdu) })], ['101 EDUs', txn({ edus: Array.from({ length: 101 }, () => edu) })]] as const) {
        const refused = await signed(a, 'PUT', '/_matrix/federation/v1/send/over-the-limit', { body });
        expect(refused.status, what).toBe(400);
        expect(await refused.json(), what).toMatchObject({ errcode: 'M_BAD_JSON' });
      }
      const fine = await signed(a, 'PUT', '/_matrix/federation/v1/send/over-the-limit', { body: txn({}) });
      expect(fine.status).toBe(200);
      expect(await fine.json()).toEqual({ pdus: {} });

      const huge = await signed(a, 'PUT', '/_matrix/federation/v1/send/too-large', { body: txn({ edus: [{ edu_type: 'org.example.pad', content: { pad: 'x'.repeat(5 * 1024 * 1024) } }] }) });
      expect(huge.status).toBe(413);
      expect(await huge.json()).toMatchObject({ errcode: 'M_TOO_LARGE' });
    });

    it('discovery between processes: A and B reach C, named `localhost` with no port, through the .well-known delegation the test serves', async () => {
      expect(c.name).toBe('localhost');
      expect(wellKnown.requests.length).toBeGreaterThan(0);
      expect(wellKnown.requests.every((r) => r.path === '/.well-known/matrix/server' && r.host === `localhost:${wellKnown.port}`)).toBe(true);
      // B sends to C by the delegated name: carol has bob's message.
      const sent = await api(b, 'PUT', `/_matrix/client/v3/rooms/${enc(hall)}/send/m.room.message/to-c`, { token: bob.accessToken, body: { msgtype: 'm.text', body: 'to C, found through .well-known' } });
      expect(sent.status).toBe(200);
      const carolClient = await client(c, carol);
      await waitFor(carolClient, () => bodies(carolClient, hall).includes('to C, found through .well-known'), 15_000, "bob's message on C");
      // And C's user is known to A as on `localhost`: A asks C for her profile, through the delegation.
      const profile = await api(a, 'GET', `/_matrix/client/v3/profile/${enc(carol.userId)}`, { token: alice.accessToken });
      expect(profile.status).toBe(200);
      expect(profile.body).toMatchObject({ displayname: 'carol' });
    });

    it('discovery through SRV: a server named `srv.localhost` is found by `_matrix-fed._tcp.srv.localhost` on the test’s DNS server, its certificate checked for that name', async () => {
      const srvLeaf = ca.issue(['srv.localhost']);
      const y = await fakeServer(() => 'srv.localhost', srvLeaf);
      fakes.push(y);
      dns.srv.set('_matrix-fed._tcp.srv.localhost', [{ target: 'localhost', port: y.server!.port }]);
      const ok = await signed(a, 'GET', profilePath(alice.userId), { from: y });
      expect(ok.status).toBe(200);
      expect(dns.asked).toContain('SRV _matrix-fed._tcp.srv.localhost');
      // A asked for Y's key at the SRV target, naming the server itself in Host (and SNI).
      expect(y.server!.requests).toContainEqual({ host: 'srv.localhost', path: '/_matrix/key/v2/server' });
    });

    it('a certificate for the wrong name is refused: A connects to W but never asks it for its key, and W’s request is 401', async () => {
      const w = await fakeServer((port) => `localhost:${port}`, ca.issue(['wrong.localhost']));
      fakes.push(w);
      const refused = await signed(a, 'GET', profilePath(alice.userId), { from: w });
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({ errcode: 'M_UNAUTHORIZED' });
      expect(w.server!.connections()).toBeGreaterThan(0);
      expect(w.server!.requests).toEqual([]);
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
    // And the rest of it: knocks, leaves, state and history, media, the directory, OpenID, spaces.
    for (const kind of ['/_matrix/federation/v1/make_knock', '/_matrix/federation/v1/send_knock', '/_matrix/federation/v1/make_leave', '/_matrix/federation/v2/send_leave', '/_matrix/federation/v1/state', '/_matrix/federation/v1/state_ids', '/_matrix/federation/v1/event_auth', '/_matrix/federation/v1/event', '/_matrix/federation/v1/get_missing_events', '/_matrix/federation/v1/media', '/_matrix/federation/v1/publicRooms', '/_matrix/federation/v1/openid', '/_matrix/federation/v1/hierarchy']) {
      expect(kinds, kind).toContain(kind);
    }
  });
});
