// Peers meet → E2EE-ready (issue 11): the time from a libp2p connection opening
// between two Hearth peers to the other side's client holding the current device
// list: its /sync naming the user in device_lists.changed, and the /keys/query it
// then sends returning the device that was added while the peers were apart.
//
// Two homeservers in this process, each on durable files, each with its own libp2p
// node (TCP on 127.0.0.1); alice is on A, bob on B, and they share a room. A round:
// B's libp2p node stops (the peers are apart); bob signs in on a new device that
// uploads its keys, and B's m.device_list_update EDUs to A fail and wait in B's queue;
// B's node starts again with the same key and dials A. Time zero is A's
// onPeerConnected for B. Three wirings, each over the same rounds:
// 1. as Hearth is wired: on connect, B's queue wakes and sends the waiting updates
//    (push), and A resyncs the device lists of B's users through /user/devices (pull);
// 2. A's eager resync alone: B's onPeerConnected is not forwarded, so B's queue sleeps
//    through its (long) backoff and only A's pull brings the device;
// 3. /keys/query only, as Dendrite did: neither side forwards onPeerConnected, and A's
//    copy of bob's list is marked stale while the peers are apart (as A leaves a list it
//    knows it missed updates to: a gap in prev_id, a failed resync); nothing happens on
//    connect until alice's client sends /keys/query, which it does at time zero, the
//    earliest any client could, and that query resyncs the list. (Left unmarked, the
//    query would be answered from A's old copy, and the device would stay unknown
//    until B's queue next retried.)
// The /sync is a long-poll open across the reconnect, as a client's would be. Only
// onPeerConnected is wired (the Node host also forwards onPeerDiscovered, which may
// start the resync before the connection opens: a head start this figure leaves out).
// Both servers share this thread, so each waits on the other's CPU work: on two
// machines the figures can only be lower.
import { tcp } from '@libp2p/tcp';
import { encodeBase64 } from '../src/crypto/base64.ts';
import { defaultEd25519Backend } from '../src/crypto/ed25519.ts';
import { signJson } from '../src/crypto/signing.ts';
import { FederationUnreachable, type FederationTransport } from '../src/federation/transport.ts';
import { createHomeserver, homeserverSchemas, type Homeserver } from '../src/homeserver.ts';
import { startHttpServer } from '../src/node/http-server.ts';
import { createP2PNode, type P2PNode } from '../src/p2p/node.ts';
import type { Database } from '../src/storage/database.ts';
import { openBenchDatabase } from './bench-database.ts';
import { clientRequest, percentile, report, type Row } from './harness.ts';

const ROUNDS = 15;
const WARMUP_ROUNDS = 2;
/** A round that takes longer than this is counted as not ready. */
const ROUND_DEADLINE_MS = 10_000;
const enc = encodeURIComponent;
const PASSWORD = 'bench-password';

type Json = any;

const call = (url: string, method: string, path: string, token?: string, body?: unknown): Promise<Json> =>
  clientRequest((request) => fetch(request), url + path, method, token, body);

interface Account {
  userId: string;
  token: string;
  deviceId: string;
}

/** Whether each side forwards the connection's opening to its homeserver. */
interface Wiring {
  a: boolean;
  b: boolean;
}

/**
 * A homeserver whose libp2p node can be stopped and started again under it (the host's
 * transport points at whichever node is up), and whose onPeerConnected the bench sees.
 */
interface Peer {
  url: string;
  homeserver: Homeserver;
  db: Database;
  node: P2PNode | undefined;
  seed: Uint8Array;
  startNode(bootstrap: string[]): Promise<P2PNode>;
  stopNode(): Promise<void>;
  /** Called with the server name when a peer connects, before (and whether or not) the homeserver hears of it. */
  onConnect: (serverName: string) => void;
  forward: boolean;
  /** Federation requests this peer answered, and those it sent, with when they were done. */
  inbound: { method: string; path: string; eduTypes: string[]; at: number }[];
  outbound: { method: string; path: string; status: number; at: number }[];
  close(): Promise<void>;
}

async function startPeer(queueBackoff?: { initialMs: number; maxMs: number; refusedMs: number }): Promise<Peer> {
  const seed = crypto.getRandomValues(new Uint8Array(32));
  const { db, close: closeDb } = await openBenchDatabase(homeserverSchemas);
  const transport: FederationTransport = {
    send: async (destination, request, options) => {
      if (!peer.node) throw new FederationUnreachable(destination, 'libp2p is down');
      const response = await peer.node.transport.send(destination, request, options);
      peer.outbound.push({ method: request.method, path: new URL(request.url).pathname, status: response.status, at: performance.now() });
      return response;
    },
  };
  const homeserver = await createHomeserver({ database: db, seed, rateLimits: false, passwordIterations: 1000, federation: { transport, backoff: queueBackoff } });
  await homeserver.start();
  const http = await startHttpServer(homeserver.fetch);
  const peer: Peer = {
    url: http.url,
    homeserver,
    db,
    node: undefined,
    seed,
    onConnect: () => {},
    forward: true,
    inbound: [],
    outbound: [],
    async startNode(bootstrap) {
      peer.node = await createP2PNode({
        seed,
        transports: [tcp()],
        listen: ['/ip4/127.0.0.1/tcp/0'],
        bootstrap,
        handler: async (request, remote) => {
          const body = request.method === 'PUT' ? ((await request.clone().json()) as { edus?: { edu_type: string }[] }) : {};
          const response = await homeserver.federation.fetch(request, remote);
          peer.inbound.push({ method: request.method, path: new URL(request.url).pathname, eduTypes: (body.edus ?? []).map((e) => e.edu_type), at: performance.now() });
          return response;
        },
        onPeerConnected: (name) => {
          peer.onConnect(name);
          if (peer.forward) homeserver.federation.peerConnected(name);
        },
      });
      return peer.node;
    },
    async stopNode() {
      const node = peer.node;
      peer.node = undefined;
      await node?.stop();
    },
    async close() {
      await peer.stopNode();
      await http.close();
      await homeserver.close();
      await closeDb();
    },
  };
  return peer;
}

const ed25519 = await defaultEd25519Backend();

async function uploadKeys(peer: Peer, account: Account): Promise<void> {
  const key = await ed25519.keyFromSeed(crypto.getRandomValues(new Uint8Array(32)));
  const deviceKeys = await signJson({
    user_id: account.userId,
    device_id: account.deviceId,
    algorithms: ['m.olm.v1.curve25519-aes-sha2', 'm.megolm.v1.aes-sha2'],
    keys: { [`ed25519:${account.deviceId}`]: encodeBase64(key.publicKey), [`curve25519:${account.deviceId}`]: encodeBase64(crypto.getRandomValues(new Uint8Array(32))) },
  }, account.userId, `ed25519:${account.deviceId}`, key);
  await call(peer.url, 'POST', '/_matrix/client/v3/keys/upload', account.token, { device_keys: deviceKeys });
}

const asAccount = (r: Json): Account => ({ userId: r.user_id, token: r.access_token, deviceId: r.device_id });
const register = async (peer: Peer, username: string) =>
  asAccount(await call(peer.url, 'POST', '/_matrix/client/v3/register', undefined, { username, password: PASSWORD, auth: { type: 'm.login.dummy' } }));
const login = async (peer: Peer, username: string) =>
  asAccount(await call(peer.url, 'POST', '/_matrix/client/v3/login', undefined, { type: 'm.login.password', identifier: { type: 'm.id.user', user: username }, password: PASSWORD }));

/** Resolves at the next time `peer` hears that `serverName` connected. */
function nextConnect(peer: Peer, serverName: string): Promise<number> {
  return new Promise((resolve) => {
    peer.onConnect = (name) => {
      if (name !== serverName) return;
      peer.onConnect = () => {};
      resolve(performance.now());
    };
  });
}

interface Round {
  /** From the connection's opening (A's onPeerConnected) to alice's /sync naming bob in device_lists.changed. */
  changedMs: number;
  /** ...to a /keys/query of alice's returning the new device. */
  readyMs: number;
  /** ...to A answering B's transaction with the waiting updates (the push), if any. */
  pushMs?: number;
  /** ...to A having B's answer to its resync of bob (the pull), if any. */
  pullMs?: number;
}

export async function run(): Promise<void> {
  // B's queue sleeps long after a failure, so only what the wiring wakes can bring the update.
  const a = await startPeer();
  const b = await startPeer({ initialMs: 120_000, maxMs: 120_000, refusedMs: 120_000 });
  const nodeA = await a.startNode([]);
  const addressOfA = nodeA.multiaddrs();
  const aName = a.homeserver.serverName;
  const bName = b.homeserver.serverName;
  const connected = nextConnect(a, bName);
  await b.startNode(addressOfA);
  await connected;

  const alice = await register(a, 'alice');
  const bob = await register(b, 'bob');
  await uploadKeys(b, bob);
  const room = await call(a.url, 'POST', '/_matrix/client/v3/createRoom', alice.token, { invite: [bob.userId] });
  await call(b.url, 'POST', `/_matrix/client/v3/join/${enc(room.room_id)}?via=${aName}`, bob.token, {});
  if ((await a.homeserver.services.rooms.membership(room.room_id, bob.userId)) !== 'join') throw new Error("A does not hold bob's join");
  // A holds bob's list from the start (a first /keys/query resyncs it).
  const first = await call(a.url, 'POST', '/_matrix/client/v3/keys/query', alice.token, { device_keys: { [bob.userId]: [] } });
  if (!first.device_keys[bob.userId]?.[bob.deviceId]) throw new Error("A could not fetch bob's devices");
  let since = (await call(a.url, 'GET', '/_matrix/client/v3/sync?timeout=0', alice.token)).next_batch as string;

  const hasDevice = (answer: Json, deviceId: string) => answer.device_keys?.[bob.userId]?.[deviceId] !== undefined;

  async function round(wiring: Wiring, markStale: boolean, clientAsksAtConnect: boolean): Promise<Round | undefined> {
    a.forward = wiring.a;
    b.forward = wiring.b;
    await b.stopNode();
    const device = await login(b, 'bob');
    await uploadKeys(b, device);
    if (markStale) await a.db.transaction((tx) => tx.run('UPDATE remote_device_lists SET stale = 1 WHERE user_id = ?', [bob.userId]));

    // alice's long-poll, open across the reconnect; and, in the third wiring, her query at the connection's opening.
    const deadline = performance.now() + ROUND_DEADLINE_MS;
    let query: Promise<{ answer: Json; at: number }> | undefined;
    const connectedAt = new Promise<number>((resolve) => {
      a.onConnect = (name) => {
        if (name !== bName) return;
        a.onConnect = () => {};
        const at = performance.now();
        if (clientAsksAtConnect) query = call(a.url, 'POST', '/_matrix/client/v3/keys/query', alice.token, { device_keys: { [bob.userId]: [] } }).then((answer) => ({ answer, at: performance.now() }));
        resolve(at);
      };
    });
    const changed = (async () => {
      while (performance.now() < deadline) {
        const body = await call(a.url, 'GET', `/_matrix/client/v3/sync?timeout=${Math.max(1, Math.round(deadline - performance.now()))}&since=${since}`, alice.token);
        since = body.next_batch;
        if (body.device_lists?.changed?.includes(bob.userId)) return performance.now();
      }
      return undefined;
    })();
    await b.startNode(addressOfA);
    const t0 = await connectedAt;
    const changedAt = await changed;
    let readyAt: number | undefined;
    if (query) {
      const { answer, at } = await query;
      if (hasDevice(answer, device.deviceId)) readyAt = at;
    } else if (changedAt !== undefined) {
      // What a client does on device_lists.changed.
      const answer = await call(a.url, 'POST', '/_matrix/client/v3/keys/query', alice.token, { device_keys: { [bob.userId]: [] } });
      if (hasDevice(answer, device.deviceId)) readyAt = performance.now();
    }
    if (changedAt === undefined || readyAt === undefined) return undefined;
    const push = a.inbound.find((r) => r.at > t0 && r.path.startsWith('/_matrix/federation/v1/send/') && r.eduTypes.includes('m.device_list_update'));
    const pull = a.outbound.find((r) => r.at > t0 && r.path === `/_matrix/federation/v1/user/devices/${enc(bob.userId)}`);
    return { changedMs: changedAt - t0, readyMs: readyAt - t0, ...(push ? { pushMs: push.at - t0 } : {}), ...(pull ? { pullMs: pull.at - t0 } : {}) };
  }

  const variants: { label: string; wiring: Wiring; markStale: boolean; clientAsks: boolean }[] = [
    { label: 'as wired: B pushes its waiting updates, A resyncs eagerly', wiring: { a: true, b: true }, markStale: false, clientAsks: false },
    { label: "A's eager resync alone (B's queue left asleep)", wiring: { a: true, b: false }, markStale: false, clientAsks: false },
    { label: '/keys/query only (nothing on connect; A knows its copy is stale)', wiring: { a: false, b: false }, markStale: true, clientAsks: true },
  ];
  const rows: Row[] = [];
  const started = performance.now();
  for (const variant of variants) {
    const results: Round[] = [];
    let missed = 0;
    for (let i = 0; i < WARMUP_ROUNDS + ROUNDS; i++) {
      const result = await round(variant.wiring, variant.markStale, variant.clientAsks);
      if (i < WARMUP_ROUNDS) continue;
      if (result) results.push(result);
      else missed++;
    }
    const changed = results.map((r) => r.changedMs).sort((x, y) => x - y);
    const ready = results.map((r) => r.readyMs).sort((x, y) => x - y);
    const note = `${results.length} rounds${missed ? `, ${missed} not ready within ${ROUND_DEADLINE_MS / 1000} s` : ''}; max ${ready.at(-1)?.toFixed(0) ?? '–'} ms`;
    rows.push([`${variant.label}: E2EE-ready (new device in /keys/query)`, percentile(ready, 50), 'ms p50', `${note}; target ≤ 1000 ms`]);
    rows.push([`  of which: /sync shows bob in device_lists.changed`, percentile(changed, 50), 'ms p50', `max ${changed.at(-1)?.toFixed(0) ?? '–'} ms`]);
    const push = results.flatMap((r) => (r.pushMs === undefined ? [] : [r.pushMs])).sort((x, y) => x - y);
    const pull = results.flatMap((r) => (r.pullMs === undefined ? [] : [r.pullMs])).sort((x, y) => x - y);
    if (push.length > 0) rows.push(['  B\'s transaction with the updates answered by A (push)', percentile(push, 50), 'ms p50', `${push.length} rounds`]);
    if (pull.length > 0) rows.push(['  B\'s answer to A\'s resync of bob back at A (pull)', percentile(pull, 50), 'ms p50', `${pull.length} rounds`]);
  }
  const elapsed = performance.now() - started;
  a.onConnect = () => {};
  report('peers meet → E2EE-ready', `two peers over libp2p TCP on 127.0.0.1, durable files, from A's onPeerConnected; ${ROUNDS} rounds each after ${WARMUP_ROUNDS} warm-up, a device added on B while apart; ${(elapsed / 1000).toFixed(1)} s`, rows);

  // The last variant left B's queue asleep in its long backoff: as if A had just reconnected, wake it.
  a.forward = b.forward = true;
  b.homeserver.federation.peerConnected(a.homeserver.serverName);
  await recoveries(a, b, alice, bob);
  await b.close();
  await a.close();
}

/**
 * The two ways a list goes wrong while peers stay connected, each from the moment it is
 * noticed to the new device listed by alice's /keys/query, beside a /keys/query answered from
 * the list A holds (the same request, no resync), measured in turns:
 * - a missing update: B's m.device_list_update for bob's new device is lost (A's intake skips
 *   it); the next, for that device's keys, names it as prev_id (time zero: A takes that one);
 * - a rejoin: alice leaves the only room she shares with bob, he adds a device (B tells A
 *   nothing: no room is shared), and alice joins again (time zero: her /join answered).
 */
async function recoveries(a: Peer, b: Peer, alice: Account, bob: Account): Promise<void> {
  const bName = b.homeserver.serverName;
  const query = () => call(a.url, 'POST', '/_matrix/client/v3/keys/query', alice.token, { device_keys: { [bob.userId]: [] } });
  const listed = async (deviceId: string) => (await query()).device_keys?.[bob.userId]?.[deviceId] !== undefined;
  const room = (await call(a.url, 'POST', '/_matrix/client/v3/createRoom', alice.token, { preset: 'public_chat' })).room_id as string;
  await call(b.url, 'POST', `/_matrix/client/v3/join/${enc(room)}?via=${a.homeserver.serverName}`, bob.token, {});
  let bobSince = (await call(b.url, 'GET', '/_matrix/client/v3/sync?timeout=0', bob.token)).next_batch as string;
  /** Long-polls bob's /sync until the room's timeline shows the user's membership. */
  const untilBobSees = async (roomId: string, userId: string, membership: string) => {
    for (;;) {
      const body = await call(b.url, 'GET', `/_matrix/client/v3/sync?timeout=10000&since=${bobSince}`, bob.token);
      bobSince = body.next_batch;
      if ((body.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: Json) => e.type === 'm.room.member' && e.state_key === userId && e.content?.membership === membership)) return;
    }
  };
  /** Polls /keys/query until the device is listed: each answer waits for the resync in flight, so this waits on it, not on a clock. */
  const untilListed = async (deviceId: string, deadline: number) => {
    while (performance.now() < deadline) if (await listed(deviceId)) return performance.now();
    return undefined;
  };

  // A's intake of m.device_list_update, seen: the next one can be lost (as if in transit), and each arrival timed.
  const lists = a.homeserver.services.keys.remoteLists;
  const receiveUpdate = lists.receiveUpdate.bind(lists);
  let loseNext: (() => void) | undefined;
  let arrived: ((at: number) => void) | undefined;
  lists.receiveUpdate = async (origin, update) => {
    if (loseNext) return void (loseNext(), (loseNext = undefined));
    arrived?.(performance.now());
    return receiveUpdate(origin, update);
  };

  const cached: number[] = [];
  const missing: number[] = [];
  const rejoin: number[] = [];
  const joins: number[] = [];
  let missed = 0;
  for (let i = 0; i < WARMUP_ROUNDS + ROUNDS; i++) {
    const warm = i < WARMUP_ROUNDS;
    // From the list A holds, fresh.
    let t = performance.now();
    await query();
    if (!warm) cached.push(performance.now() - t);

    // A new device's update lost on the way, then its keys' update, whose prev_id names the lost one.
    const dropped = new Promise<void>((resolve) => (loseNext = resolve));
    const lost = await login(b, 'bob');
    await dropped;
    const noticed = new Promise<number>((resolve) => (arrived = resolve));
    await uploadKeys(b, lost);
    const t0 = await noticed;
    arrived = undefined;
    const ready = await untilListed(lost.deviceId, t0 + ROUND_DEADLINE_MS);
    if (ready === undefined) missed++;
    else if (!warm) missing.push(ready - t0);

    // Apart in no room, then together again.
    await call(a.url, 'POST', `/_matrix/client/v3/rooms/${enc(room)}/leave`, alice.token, {});
    await untilBobSees(room, alice.userId, 'leave');
    const meanwhile = await login(b, 'bob');
    await uploadKeys(b, meanwhile);
    t = performance.now();
    await call(a.url, 'POST', `/_matrix/client/v3/join/${enc(room)}?via=${bName}`, alice.token, {});
    const joined = performance.now();
    const usable = await untilListed(meanwhile.deviceId, joined + ROUND_DEADLINE_MS);
    if (usable === undefined) missed++;
    else if (!warm) {
      rejoin.push(usable - joined);
      joins.push(joined - t);
    }
  }
  lists.receiveUpdate = receiveUpdate;
  const sorted = (xs: number[]) => [...xs].sort((x, y) => x - y);
  const base = percentile(sorted(cached), 50);
  const row = (label: string, xs: number[]): Row => {
    const p50 = percentile(sorted(xs), 50);
    return [label, p50, 'ms p50', `${(p50 / base).toFixed(1)}× the cached /keys/query; max ${sorted(xs).at(-1)?.toFixed(0) ?? '–'} ms`];
  };
  report('device lists recover', `the same two peers, connected; ${ROUNDS} rounds after ${WARMUP_ROUNDS} warm-up${missed ? `; ${missed} not ready within ${ROUND_DEADLINE_MS / 1000} s` : ''}`, [
    ['/keys/query answered from the list A holds (the baseline)', base, 'ms p50', `max ${sorted(cached).at(-1)?.toFixed(0)} ms`],
    row('a missing update detected → the resynced list lists the lost device', missing),
    row('a rejoin answered → the device added while apart listed', rejoin),
    ['  the rejoin itself (make_join, send_join through B)', percentile(sorted(joins), 50), 'ms p50', ''],
  ]);
}
