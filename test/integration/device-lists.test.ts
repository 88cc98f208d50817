import initSqlJs from 'sql.js';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeBase64 } from '../../src/crypto/base64.ts';
import { defaultEd25519Backend } from '../../src/crypto/ed25519.ts';
import { signJson } from '../../src/crypto/signing.ts';
import type { FederationTransport } from '../../src/federation/transport.ts';
import { createHomeserver, homeserverSchemas, type Homeserver } from '../../src/homeserver.ts';
import type { Database } from '../../src/storage/database.ts';
import type { BackoffPolicy } from '../../src/util/backoff.ts';
import { openSqlJsDatabase } from '../../src/storage/sqljs-database.ts';
import { until } from '../support/federated-homeservers.ts';
import { InProcessNetwork } from '../support/in-process-federation.ts';
import { longPollUntil, syncPath } from '../support/sync-until.ts';
import { validateClientRequest, validateClientResponse } from '../support/spec-schema.ts';

// Device lists of remote users, against each of the traps Dendrite's device list
// updater fell into (issue 11), between real homeservers in one process whose
// federation requests go through InProcessNetwork. Each server's outbound
// requests pass a hook, so a test can hold an answer back (a resync in flight
// while updates arrive) or act at the very moment a transaction is answered.

const PASSWORD = 'correct horse battery staple';
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;

interface Account {
  userId: string;
  accessToken: string;
  deviceId: string;
}

/** One request a server sent to another, as it was answered. */
interface Exchange {
  destination: string;
  method: string;
  path: string;
  request: any;
  status: number;
  response: any;
  /** performance.now() when the answer came back (status 0: the destination could not be reached). */
  at: number;
}

/**
 * Wraps each outbound federation request: `send` carries it; what the hook returns is
 * what the sending server gets. The default just sends.
 */
type Around = (exchange: { origin: string; destination: string; method: string; path: string; body: any }, send: () => Promise<Response>) => Promise<Response>;

interface Server {
  homeserver: Homeserver;
  serverName: string;
  db: Database;
  sent: Exchange[];
  around: Around;
  api(method: string, path: string, options?: { token?: string; body?: unknown }): Promise<{ status: number; body: any }>;
  register(username: string): Promise<Account>;
  login(username: string): Promise<Account>;
  /** Uploads signed device keys for the account's device; resolves once stored. */
  uploadKeys(account: Account): Promise<Record<string, unknown>>;
}

const parse = (text: string): unknown => (text === '' ? undefined : JSON.parse(text));
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.homeserver.close()));
});

async function startServers(count: number, options: { deviceListBackoff?: BackoffPolicy } = {}): Promise<{ network: InProcessNetwork; servers: Server[] }> {
  const network = new InProcessNetwork();
  const ed25519 = await defaultEd25519Backend();
  const started: Server[] = [];
  for (let i = 0; i < count; i++) {
    const db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: homeserverSchemas });
    const sent: Exchange[] = [];
    let name = '';
    const inner = network.transportFor(() => name);
    const server = { sent, db, around: ((_, send) => send()) as Around } as unknown as Server;
    const transport: FederationTransport = {
      send: async (destination, request, options) => {
        const url = new URL(request.url);
        const path = url.pathname + url.search;
        const requestText = await request.clone().text();
        let response: Response;
        try {
          response = await server.around(
            { origin: name, destination, method: request.method, path, body: parse(requestText) },
            () => inner.send(destination, request, options),
          );
        } catch (error) {
          // A failure to reach the destination is recorded with status 0.
          sent.push({ destination, method: request.method, path, request: parse(requestText), status: 0, response: undefined, at: performance.now() });
          throw error;
        }
        sent.push({ destination, method: request.method, path, request: parse(requestText), status: response.status, response: parse(await response.clone().text()), at: performance.now() });
        return response;
      },
    };
    const homeserver = await createHomeserver({
      database: db,
      seed: crypto.getRandomValues(new Uint8Array(32)),
      rateLimits: false,
      passwordIterations: 1000,
      log: (message, error) => console.error(message, error),
      federation: { transport, backoff: { initialMs: 20, maxMs: 100, refusedMs: 50 }, ...(options.deviceListBackoff ? { deviceListBackoff: options.deviceListBackoff } : {}) },
    });
    name = homeserver.serverName;
    network.add(homeserver);
    await homeserver.start();
    server.homeserver = homeserver;
    server.serverName = name;
    server.api = async (method, path, options = {}) => {
      if (options.body !== undefined) validateClientRequest(method, path, options.body);
      const headers: Record<string, string> = {};
      if (options.token) headers['authorization'] = `Bearer ${options.token}`;
      if (options.body !== undefined) headers['content-type'] = 'application/json';
      const response = await homeserver.fetch(new Request(`http://hearth.test${path}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) }));
      const body = parse(await response.text());
      validateClientResponse(method, path, response.status, body);
      return { status: response.status, body };
    };
    const account = (body: any): Account => ({ userId: body.user_id, accessToken: body.access_token, deviceId: body.device_id });
    server.register = async (username) => {
      const r = await server.api('POST', `${V3}/register`, { body: { username, password: PASSWORD, auth: { type: 'm.login.dummy' } } });
      if (r.status !== 200) throw new Error(`register ${username}: ${r.status} ${JSON.stringify(r.body)}`);
      return account(r.body);
    };
    server.login = async (username) => {
      const r = await server.api('POST', `${V3}/login`, { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: username }, password: PASSWORD } });
      if (r.status !== 200) throw new Error(`login ${username}: ${r.status} ${JSON.stringify(r.body)}`);
      return account(r.body);
    };
    server.uploadKeys = async (who) => {
      const key = await ed25519.keyFromSeed(crypto.getRandomValues(new Uint8Array(32)));
      const deviceKeys = await signJson({
        user_id: who.userId,
        device_id: who.deviceId,
        algorithms: ['m.olm.v1.curve25519-aes-sha2', 'm.megolm.v1.aes-sha2'],
        keys: { [`ed25519:${who.deviceId}`]: encodeBase64(key.publicKey), [`curve25519:${who.deviceId}`]: encodeBase64(crypto.getRandomValues(new Uint8Array(32))) },
      }, who.userId, `ed25519:${who.deviceId}`, key);
      const r = await server.api('POST', `${V3}/keys/upload`, { token: who.accessToken, body: { device_keys: deviceKeys } });
      expect(r.status).toBe(200);
      return deviceKeys as Record<string, unknown>;
    };
    started.push(server);
    servers.push(server);
  }
  return { network, servers: started };
}

/** A room `owner` creates and each guest (a user of another server) joins. */
async function sharedRoom(owner: Server, ownerAccount: Account, guests: [Server, Account][]): Promise<string> {
  const { body: created } = await owner.api('POST', `${V3}/createRoom`, { token: ownerAccount.accessToken, body: {} });
  const roomId = created.room_id as string;
  for (const [server, account] of guests) {
    expect((await owner.api('POST', `${V3}/rooms/${enc(roomId)}/invite`, { token: ownerAccount.accessToken, body: { user_id: account.userId } })).status).toBe(200);
    expect((await server.api('POST', `${V3}/join/${enc(roomId)}`, { token: account.accessToken, body: {} })).status).toBe(200);
  }
  for (const [, account] of guests) await until(async () => (await owner.homeserver.services.rooms.membership(roomId, account.userId)) === 'join');
  return roomId;
}

/** A client's /keys/query timeout longer than any test runs: an answer that comes waited on no timeout. */
const PATIENT_CLIENT_MS = 10 * 60_000;

const query = (server: Server, account: Account, users: Record<string, string[]>, timeout?: number) =>
  server.api('POST', `${V3}/keys/query`, { token: account.accessToken, body: { device_keys: users, ...(timeout === undefined ? {} : { timeout }) } });

const sync = async (server: Server, account: Account, since?: string) => {
  const r = await server.api('GET', `${V3}/sync?timeout=0${since ? `&since=${since}` : ''}`, { token: account.accessToken });
  expect(r.status).toBe(200);
  return r.body;
};

/** key_changes rows about a user on a server: one per change its clients are told of. */
const keyChanges = async (server: Server, userId: string) =>
  (await server.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM key_changes WHERE user_id = ?', [userId]))!.n;

const remoteList = (server: Server, userId: string) => server.homeserver.services.keys.remoteLists.get(userId);

const resyncsOf = (server: Server, userId: string) => server.sent.filter((e) => e.method === 'GET' && e.path === `/_matrix/federation/v1/user/devices/${enc(userId)}`);

/** Device list updates about `userId`'s device `deviceId` in a transaction body. */
const carriesUpdate = (body: any, userId: string, deviceId: string, withKeys: boolean) =>
  (body?.edus ?? []).some((e: any) => e.edu_type === 'm.device_list_update' && e.content.user_id === userId && e.content.device_id === deviceId && (!withKeys || e.content.keys));

/** A promise and the function that resolves it. */
function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/** alice on A and bob on B share a room, bob's first device has keys, and A holds bob's list. */
async function aliceAndBob() {
  const { network, servers: [a, b] } = await startServers(2);
  const alice = await a!.register('alice');
  const bob = await b!.register('bob');
  const bobKeys = await b!.uploadKeys(bob);
  const roomId = await sharedRoom(a!, alice, [[b!, bob]]);
  const first = await query(a!, alice, { [bob.userId]: [] });
  expect(first.body.device_keys[bob.userId]).toEqual({ [bob.deviceId]: { ...bobKeys, unsigned: {} } });
  expect((await remoteList(a!, bob.userId))?.stale).toBe(false);
  return { network, a: a!, b: b!, alice, bob, roomId };
}

describe('device lists across servers: the traps Dendrite fell into', () => {
  it('a resync that finds nothing new records no key change and wakes no client', async () => {
    const { a, b, alice, bob } = await aliceAndBob();
    // Another user of B whom A has never synced: asking for them queues behind bob's resync
    // on B's queue (one request per server at a time), so its answer says bob's is done.
    const dave = await b.register('dave');
    const since = (await sync(a, alice)).next_batch;
    const before = await keyChanges(a, bob.userId);
    const resyncs = resyncsOf(a, bob.userId).length;

    await a.homeserver.services.keys.remoteLists.peerConnected(b.serverName);
    expect((await query(a, alice, { [dave.userId]: [] })).body.failures).toEqual({});

    expect(resyncsOf(a, bob.userId).slice(resyncs).map((e) => e.status)).toEqual([200]);
    expect(await keyChanges(a, bob.userId)).toBe(before);
    expect((await sync(a, alice, since)).device_lists?.changed ?? []).not.toContain(bob.userId);
    expect((await a.api('GET', `${V3}/keys/changes?from=${since}`, { token: alice.accessToken })).body.changed).not.toContain(bob.userId);
  });

  it('a resync that finds nothing new records no key change even when a device of the user never uploaded keys', async () => {
    const { a, b, alice, bob } = await aliceAndBob();
    // bob signs in somewhere that never uploads keys (a bot, a client without encryption):
    // the update reaches A, yet there is nothing to encrypt to.
    const keyless = await b.login('bob');
    await until(async () => (await remoteList(a, bob.userId))?.devices[keyless.deviceId] !== undefined);
    const dave = await b.register('dave');
    const since = (await sync(a, alice)).next_batch;
    const before = await keyChanges(a, bob.userId);
    const served = (await query(a, alice, { [bob.userId]: [] })).body.device_keys[bob.userId];

    await a.homeserver.services.keys.remoteLists.peerConnected(b.serverName);
    expect((await query(a, alice, { [dave.userId]: [] })).body.failures).toEqual({});

    expect((await query(a, alice, { [bob.userId]: [] })).body.device_keys[bob.userId]).toEqual(served);
    expect(await keyChanges(a, bob.userId)).toBe(before);
    expect((await sync(a, alice, since)).device_lists?.changed ?? []).not.toContain(bob.userId);
  });

  it('an unreachable server is a prompt failure in /keys/query, while the other servers\' users are answered', async () => {
    const { network, servers: [a, b, c] } = await startServers(3);
    const alice = await a!.register('alice');
    const bob = await b!.register('bob');
    const carol = await c!.register('carol');
    const bobKeys = await b!.uploadKeys(bob);
    const carolKeys = await c!.uploadKeys(carol);
    await sharedRoom(a!, alice, [[b!, bob], [c!, carol]]);

    // Neither list was ever synced; C cannot be reached. The client would wait ten minutes: the
    // answer comes within the test's run, so it waited on no timeout, only on C's refusal.
    network.down.add(c!.serverName);
    let r = await query(a!, alice, { [bob.userId]: [], [carol.userId]: [] }, PATIENT_CLIENT_MS);
    expect(Object.keys(r.body.failures)).toEqual([c!.serverName]);
    expect(r.body.device_keys[bob.userId]).toEqual({ [bob.deviceId]: { ...bobKeys, unsigned: {} } });
    expect(r.body.device_keys[carol.userId]).toBeUndefined();

    // C is back (and says so by connecting); carol's list is synced.
    network.down.delete(c!.serverName);
    a!.homeserver.federation.peerConnected(c!.serverName);
    await until(async () => (await remoteList(a!, carol.userId))?.stale === false);
    r = await query(a!, alice, { [carol.userId]: [] });
    expect(r.body.failures).toEqual({});
    expect(r.body.device_keys[carol.userId]).toEqual({ [carol.deviceId]: { ...carolKeys, unsigned: {} } });

    // C goes away again and A hears of a change it cannot fetch: the list A holds is still
    // served, marked by C's entry in failures, and the answer is as prompt; bob's is unaffected.
    network.down.add(c!.serverName);
    await a!.homeserver.services.keys.remoteLists.receiveUpdate(c!.serverName, { user_id: carol.userId, device_id: 'UNSEEN', stream_id: 1_000_000, prev_id: [999_999] });
    expect((await remoteList(a!, carol.userId))?.stale).toBe(true);
    r = await query(a!, alice, { [bob.userId]: [], [carol.userId]: [] }, PATIENT_CLIENT_MS);
    expect(Object.keys(r.body.failures)).toEqual([c!.serverName]);
    expect(r.body.device_keys[carol.userId]).toEqual({ [carol.deviceId]: { ...carolKeys, unsigned: {} } });
    expect(r.body.device_keys[bob.userId]).toEqual({ [bob.deviceId]: { ...bobKeys, unsigned: {} } });
  });

  it('a server that failed is retried by itself, with no client asking and no word from it', async () => {
    const { network, servers: [a, c] } = await startServers(2);
    const alice = await a!.register('alice');
    const carol = await c!.register('carol');
    await c!.uploadKeys(carol);
    await sharedRoom(a!, alice, [[c!, carol]]);

    // One failure (C unreachable) while a client asks; C comes back with no word of it.
    network.down.add(c!.serverName);
    expect(Object.keys((await query(a!, alice, { [carol.userId]: [] })).body.failures)).toEqual([c!.serverName]);
    const failures = resyncsOf(a!, carol.userId).length;
    network.down.delete(c!.serverName);
    // The updater tries again of itself after its backoff (2 s first; Dendrite waited up to an hour;
    // how soon is bench/device-lists.bench.ts's to measure).
    await until(async () => (await remoteList(a!, carol.userId))?.stale === false, 30_000);
    expect(resyncsOf(a!, carol.userId).slice(failures).map((e) => e.status)).toContain(200);
  });

  it('a server that failed is resynced the moment it reconnects, long before its backoff ends', async () => {
    // A backoff no test outlives: a resync that comes at all came from the reconnect.
    const { network, servers: [a, c] } = await startServers(2, { deviceListBackoff: { initialMs: 10 * 60_000, maxMs: 10 * 60_000, refusedMs: 10 * 60_000 } });
    const alice = await a!.register('alice');
    const carol = await c!.register('carol');
    await c!.uploadKeys(carol);
    await sharedRoom(a!, alice, [[c!, carol]]);

    network.down.add(c!.serverName);
    await a!.homeserver.services.keys.remoteLists.receiveUpdate(c!.serverName, { user_id: carol.userId, device_id: 'UNSEEN', stream_id: 1_000_000, prev_id: [999_999] });
    await until(() => resyncsOf(a!, carol.userId).at(-1)?.status === 0);
    expect((await remoteList(a!, carol.userId))?.stale).toBe(true);
    network.down.delete(c!.serverName);
    a!.homeserver.federation.peerConnected(c!.serverName);
    await until(async () => (await remoteList(a!, carol.userId))?.stale === false, 30_000);
    expect(resyncsOf(a!, carol.userId).at(-1)!.status).toBe(200);
    expect((await query(a!, alice, { [carol.userId]: [] })).body.failures).toEqual({});
  });

  it('/send answers only once the device list update it carried is stored', async () => {
    const { a, b, alice, bob } = await aliceAndBob();
    // The moment B's transaction carrying the new device's keys is answered, a client on A asks.
    let asked: Promise<{ status: number; body: any }> | undefined;
    let newDevice = '';
    b.around = async (exchange, send) => {
      const response = await send();
      if (!asked && exchange.destination === a.serverName && response.ok && carriesUpdate(exchange.body, bob.userId, newDevice, true)) asked = query(a, alice, { [bob.userId]: [] });
      return response;
    };
    const phone = await b.login('bob');
    newDevice = phone.deviceId;
    const phoneKeys = await b.uploadKeys(phone);
    await until(() => asked !== undefined);
    const seen = await asked!;
    expect(seen.body.device_keys[bob.userId][phone.deviceId]).toEqual({ ...phoneKeys, unsigned: {} });
  });

  it('/send answers only once the update is stored, also when it must resync and a resync is already in flight', async () => {
    const { a, b, alice, bob } = await aliceAndBob();
    // A's copy of bob's list is stale (an update was missed), so the updates that follow
    // cannot be applied on top of it: each asks for a resync. The first resync's answer is
    // held until B's transaction with the new device's keys has been answered.
    const held = gate();
    let holding = true;
    a.around = async (exchange, send) => {
      const response = await send();
      if (holding && exchange.path.startsWith('/_matrix/federation/v1/user/devices/')) {
        holding = false;
        await held.promise;
      }
      return response;
    };
    let asked: Promise<{ status: number; body: any }> | undefined;
    let newDevice = '';
    b.around = async (exchange, send) => {
      const response = await send();
      if (!asked && exchange.destination === a.serverName && response.ok && carriesUpdate(exchange.body, bob.userId, newDevice, true)) {
        asked = query(a, alice, { [bob.userId]: [] });
        held.open();
      }
      return response;
    };
    await a.homeserver.services.keys.remoteLists.receiveUpdate(b.serverName, { user_id: bob.userId, device_id: 'MISSED', stream_id: 1_000_000, prev_id: [999_999] });
    const phone = await b.login('bob');
    newDevice = phone.deviceId;
    const phoneKeys = await b.uploadKeys(phone);
    await until(() => asked !== undefined);
    const seen = await asked!;
    expect(seen.body.failures).toEqual({});
    expect(seen.body.device_keys[bob.userId][phone.deviceId]).toEqual({ ...phoneKeys, unsigned: {} });
  });

  it('several updates and a resync of the same user at once: the final list is right, each real change one key change', async () => {
    const { network, a, b, alice, bob } = await aliceAndBob();
    const since = (await sync(a, alice)).next_batch;
    const before = await keyChanges(a, bob.userId);
    const from = (await remoteList(a, bob.userId))!.streamId;
    // bob signs in on three devices, each uploading keys, while B's updates cannot reach A...
    network.dropped.add(`${b.serverName}>${a.serverName}`);
    const devices = await Promise.all([1, 2, 3].map(async () => {
      const device = await b.login('bob');
      return { device, keys: await b.uploadKeys(device) };
    }));
    // ...then those updates (as B would send them) and a resync of bob all arrive at once.
    const updates = await b.homeserver.services.keys.deviceListUpdates(bob.userId, from);
    expect(updates).toHaveLength(6); // a sign-in and a key upload each
    await Promise.all([
      ...updates.map((u) => a.homeserver.services.keys.remoteLists.receiveUpdate(b.serverName, { ...u })),
      a.homeserver.services.keys.remoteLists.peerConnected(b.serverName),
      ...updates.map((u) => a.homeserver.services.keys.remoteLists.receiveUpdate(b.serverName, { ...u })),
    ]);
    // bob's resync is done once a /keys/query that waits for a fresh list is answered.
    await until(async () => (await remoteList(a, bob.userId))?.stale === false);
    const r = await query(a, alice, { [bob.userId]: [] });
    expect(r.body.failures).toEqual({});
    expect(r.body.device_keys[bob.userId]).toEqual(Object.fromEntries([
      [bob.deviceId, expect.objectContaining({ device_id: bob.deviceId })],
      ...devices.map((d) => [d.device.deviceId, { ...d.keys, unsigned: {} }]),
    ]));
    const changes = (await keyChanges(a, bob.userId)) - before;
    expect(changes).toBeGreaterThan(0);
    expect(changes).toBeLessThanOrEqual(updates.length);
    expect((await sync(a, alice, since)).device_lists.changed).toEqual([bob.userId]);
  });

  it('a resync answer older than the updates applied while it was in flight undoes none of them', async () => {
    const { a, b, alice, bob } = await aliceAndBob();
    const dave = await b.register('dave');
    const since = (await sync(a, alice)).next_batch;
    const before = await keyChanges(a, bob.userId);
    // A resync of bob starts, and B's answer (bob's list as it is now) is held back...
    const held = gate();
    let holding = true;
    a.around = async (exchange, send) => {
      const response = await send();
      if (holding && exchange.path === `/_matrix/federation/v1/user/devices/${enc(bob.userId)}`) {
        holding = false;
        await held.promise;
      }
      return response;
    };
    await a.homeserver.services.keys.remoteLists.peerConnected(b.serverName);
    await until(() => !holding);
    // ...while bob signs in on two more devices, and B's updates about them reach A and are applied.
    const devices: { device: Account; keys: Record<string, unknown> }[] = [];
    for (let i = 0; i < 2; i++) {
      const device = await b.login('bob');
      await until(async () => (await remoteList(a, bob.userId))?.devices[device.deviceId] !== undefined);
      const keys = await b.uploadKeys(device);
      await until(async () => (await remoteList(a, bob.userId))?.devices[device.deviceId]?.keys !== undefined);
      devices.push({ device, keys });
    }
    const applied = await keyChanges(a, bob.userId);
    // Now the old answer arrives; dave's resync, on the same queue, finishes after it.
    held.open();
    expect((await query(a, alice, { [dave.userId]: [] })).body.failures).toEqual({});

    expect((await query(a, alice, { [bob.userId]: [] })).body.device_keys[bob.userId]).toEqual(Object.fromEntries([
      [bob.deviceId, expect.objectContaining({ device_id: bob.deviceId })],
      ...devices.map((d) => [d.device.deviceId, { ...d.keys, unsigned: {} }]),
    ]));
    // Four updates, at most four changes; the old answer added none.
    expect(applied - before).toBeLessThanOrEqual(4);
    expect(await keyChanges(a, bob.userId)).toBe(applied);
    expect((await sync(a, alice, since)).device_lists.changed).toEqual([bob.userId]);
  });
});

/** Long-polls a user's /sync from `since` until `done` holds. */
const syncUntil = (server: Server, account: Account, done: (body: any) => boolean, since?: string) =>
  longPollUntil(async (from) => (await server.api('GET', syncPath(from, 1000), { token: account.accessToken })).body, done, { since, rounds: 30, who: account.userId });
const changedIn = (userId: string) => (body: any) => (body.device_lists?.changed ?? []).includes(userId);

describe('device lists after membership changes', () => {
  it('a remote user who leaves is in device_lists.left and their updates stop, while another user of their server goes on', async () => {
    const { servers: [a, b] } = await startServers(2);
    const alice = await a!.register('alice');
    const [bob, dave] = [await b!.register('bob'), await b!.register('dave')];
    await b!.uploadKeys(bob);
    await b!.uploadKeys(dave);
    const roomId = await sharedRoom(a!, alice, [[b!, bob], [b!, dave]]);
    expect(Object.keys((await query(a!, alice, { [bob.userId]: [], [dave.userId]: [] })).body.device_keys).sort()).toEqual([bob.userId, dave.userId].sort());
    const since = (await sync(a!, alice)).next_batch;

    expect((await b!.api('POST', `${V3}/rooms/${enc(roomId)}/leave`, { token: bob.accessToken, body: {} })).status).toBe(200);
    const left = await syncUntil(a!, alice, (s) => (s.device_lists?.left ?? []).includes(bob.userId), since);
    expect(left.device_lists.changed ?? []).not.toContain(bob.userId);

    // Both sign in on a new device: only dave's reaches alice.
    const sent = b!.sent.length;
    await b!.uploadKeys(await b!.login('bob'));
    const daveTwo = await b!.login('dave');
    await b!.uploadKeys(daveTwo);
    const changed = await syncUntil(a!, alice, (s) => changedIn(dave.userId)(s), left.next_batch);
    expect(changed.device_lists.changed).not.toContain(bob.userId);
    const toA = b!.sent.slice(sent).filter((e) => e.destination === a!.serverName && e.path.startsWith('/_matrix/federation/v1/send/'));
    expect(toA.some((e) => carriesUpdate(e.request, dave.userId, daveTwo.deviceId, true))).toBe(true);
    expect(toA.some((e) => (e.request?.edus ?? []).some((edu: any) => edu.content?.user_id === bob.userId))).toBe(false);
    expect((await a!.api('GET', `${V3}/keys/changes?from=${left.next_batch}`, { token: alice.accessToken })).body.changed).not.toContain(bob.userId);
    expect(Object.keys((await query(a!, alice, { [dave.userId]: [] })).body.device_keys[dave.userId]).sort()).toEqual([dave.deviceId, daveTwo.deviceId].sort());
  });

  it('a remote user who adds a device while out of every shared room and rejoins is changed, and /keys/query lists the new device', async () => {
    const { a, b, alice, bob, roomId } = await aliceAndBob();
    const { body: open } = await a.api('PUT', `${V3}/rooms/${enc(roomId)}/state/m.room.join_rules/`, { token: alice.accessToken, body: { join_rule: 'public' } });
    expect(open.event_id).toBeDefined();
    expect((await b.api('POST', `${V3}/rooms/${enc(roomId)}/leave`, { token: bob.accessToken, body: {} })).status).toBe(200);
    const left = await syncUntil(a, alice, (s) => (s.device_lists?.left ?? []).includes(bob.userId));

    const second = await b.login('bob');
    const secondKeys = await b.uploadKeys(second);
    expect((await b.api('POST', `${V3}/join/${enc(roomId)}?server_name=${a.serverName}`, { token: bob.accessToken, body: {} })).status).toBe(200);

    await syncUntil(a, alice, changedIn(bob.userId), left.next_batch);
    expect((await a.api('GET', `${V3}/keys/changes?from=${left.next_batch}`, { token: alice.accessToken })).body.changed).toContain(bob.userId);
    const keys = (await query(a, alice, { [bob.userId]: [] })).body.device_keys[bob.userId];
    expect(keys[second.deviceId]).toEqual({ ...secondKeys, unsigned: {} });
    expect(Object.keys(keys).sort()).toEqual([bob.deviceId, second.deviceId].sort());
  });
});
