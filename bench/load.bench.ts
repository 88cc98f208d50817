// Load between Hearth peers over real libp2p (TCP on 127.0.0.1), each homeserver on
// native SQLite files, each figure beside a baseline from the same run:
// 1. a burst of 10,000 messages from 10 clients into one room on A, until all are on B
//    (B in its own process), beside the same burst into a room of A's own;
// 2. fan-out: N peers (HEARTH_BENCH_PEERS, default 20, in this process: each its own
//    homeserver, database and libp2p node) in one room, one message until all N−1 have it,
//    beside a room of two of the same peers;
// 3. a fault: B, sending a burst, is killed with SIGKILL halfway, restarted on its data
//    folder, and the client retries what was not acknowledged (same transaction IDs).
//    Verdict: every acknowledged event is still there, and all arrive on A exactly once.
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { webRandomBytes } from '../src/crypto/random.ts';
import { acceptedEvents, startBenchPeer, untilAccepted, type BenchPeer } from './federation-peer.ts';
import { call, register as registerWith, startChildPeer, type ChildPeer, type Reachable } from './federation.bench.ts';
import { percentile, report } from './harness.ts';

const BURST = 10_000;
const BURST_CLIENTS = 10;
const FANOUT_PEERS = Number(process.env.HEARTH_BENCH_PEERS ?? 20);
const FANOUT_ROUNDS = 10;
const FAULT_MESSAGES = 2_000;
const FAULT_IN_FLIGHT = 8;

const enc = encodeURIComponent;
const MiB = (bytes: number) => bytes / 2 ** 20;
const peakRss = () => process.resourceUsage().maxRSS * 1024;

const register = (server: Reachable, username: string) => registerWith((...args) => call(server, ...args), username);
const createRoom = async (server: Reachable, token: string): Promise<string> => (await call(server, 'POST', '/_matrix/client/v3/createRoom', token, { preset: 'public_chat' })).room_id;
const join_ = (server: Reachable, token: string, roomId: string, via: string) => call(server, 'POST', `/_matrix/client/v3/join/${enc(roomId)}?via=${via}`, token, {});
const send = (server: Reachable, token: string, roomId: string, txnId: string, body: string): Promise<{ event_id: string }> =>
  call(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/${enc(txnId)}`, token, { msgtype: 'm.text', body });

/** `clients` clients, each sending its share of `total` messages one after another; resolves when all are acknowledged. */
async function burstFrom(server: Reachable, clients: { token: string }[], roomId: string, prefix: string, total: number): Promise<void> {
  await Promise.all(clients.map(async (client, c) => {
    for (let i = c; i < total; i += clients.length) await send(server, client.token, roomId, `${prefix}${i}`, `${prefix} ${i}`);
  }));
}

// ------------------------------------------------------------------ 1. burst

async function burst() {
  const a = await startBenchPeer({ seed: webRandomBytes(32) });
  const b = await startChildPeer(webRandomBytes(32), a.p2p.multiaddrs());
  try {
    const clients = await Promise.all(Array.from({ length: BURST_CLIENTS }, (_, i) => register(a, `sender${i}`)));
    const bob = await register(b, 'bob');
    const shared = await createRoom(a, clients[0]!.token);
    const local = await createRoom(a, clients[0]!.token);
    for (const c of clients.slice(1)) for (const room of [shared, local]) await join_(a, c.token, room, a.homeserver.serverName);
    await join_(b, bob.token, shared, a.homeserver.serverName);
    const memoryBefore = { a: process.memoryUsage().rss, b: await b.command<{ rss: number }>({ cmd: 'memory' }) };

    // Baseline: the same burst into a room only A's users are in, before and after (this machine is shared: both are shown).
    const baseline = async (prefix: string) => {
      const t0 = performance.now();
      await burstFrom(a, clients, local, prefix, BURST);
      return performance.now() - t0;
    };
    const localBefore = await baseline('before');

    const arrived = b.command({ cmd: 'untilCount', roomId: shared, type: 'm.room.message', count: BURST });
    const started = performance.now();
    await burstFrom(a, clients, shared, 'burst', BURST);
    const acknowledgedMs = performance.now() - started;
    await arrived;
    const arrivedMs = performance.now() - started;
    const bMemory = await b.command<{ rss: number; peakRss: number }>({ cmd: 'memory' });
    const aPeak = peakRss();
    const localAfter = await baseline('after');
    const localMs = (localBefore + localAfter) / 2;
    const onA = await acceptedEvents(a, shared, 'm.room.message');
    report('load: a burst of 10,000 messages into one room, across two hosts', `${BURST_CLIENTS} clients on A sending one at a time each (${BURST_CLIENTS} in flight), A → B over libp2p, B in its own process, native SQLite`, [
      ['all 10,000 on B, from the first send', arrivedMs, 'ms', `${((BURST / arrivedMs) * 1000).toFixed(0)} messages/s; the last acknowledged to A's clients at ${acknowledgedMs.toFixed(0)} ms`],
      ['baseline: the same burst into a room of A\'s own, all acknowledged (mean of before and after)', localMs, 'ms', `${((BURST / localMs) * 1000).toFixed(0)} messages/s; before ${localBefore.toFixed(0)} ms, after ${localAfter.toFixed(0)} ms`],
      ['across two hosts / one host', arrivedMs / localMs, '×', `against before ${(arrivedMs / localBefore).toFixed(2)}×, after ${(arrivedMs / localAfter).toFixed(2)}×; load average ${loadavg()[0]!.toFixed(1)} on ${availableParallelism()} cores`],
      ['A resident memory: before → peak', MiB(aPeak), 'MiB', `from ${MiB(memoryBefore.a).toFixed(0)} MiB; A's process also runs the 10 clients`],
      ['B resident memory: before → peak', MiB(bMemory.peakRss), 'MiB', `from ${MiB(memoryBefore.b.rss).toFixed(0)} MiB, ${MiB(bMemory.rss).toFixed(0)} MiB after`],
      ['messages in the room on A / on B', onA, '', `B: ${await b.command<number>({ cmd: 'count', roomId: shared, type: 'm.room.message' })}`],
    ]);
  } finally {
    await b.stop();
    await a.close();
  }
}

// ------------------------------------------------------------------ 2. fan-out

async function fanOut() {
  const started = performance.now();
  const first = await startBenchPeer({ seed: webRandomBytes(32) });
  const peers: BenchPeer[] = [first];
  for (let i = 1; i < FANOUT_PEERS; i++) peers.push(await startBenchPeer({ seed: webRandomBytes(32), bootstrap: first.p2p.multiaddrs() }));
  try {
    const users: { userId: string; token: string }[] = [];
    for (const [i, peer] of peers.entries()) users.push(await register(peer, `user${i}`));
    const via = first.homeserver.serverName;
    const everyone = await createRoom(first, users[0]!.token);
    const pair = await createRoom(first, users[0]!.token);
    for (let i = 1; i < peers.length; i++) await join_(peers[i]!, users[i]!.token, everyone, via);
    await join_(peers[1]!, users[1]!.token, pair, via);
    const setUpMs = performance.now() - started;

    let sent = { everyone: 0, pair: 0 };
    const allHave = async (room: string, others: BenchPeer[], count: number, t0: number) => {
      const at: number[] = [];
      await Promise.all(others.map((p) => untilAccepted(p, room, 'm.room.message', count).then(() => at.push(performance.now() - t0))));
      return at.sort((x, y) => x - y);
    };
    // A warm-up message in each, so every connection is open and every join has spread.
    const warm = async () => {
      for (const [room, others] of [[everyone, peers.slice(1)], [pair, [peers[1]!]]] as const) {
        const key = room === everyone ? 'everyone' : 'pair';
        await send(first, users[0]!.token, room, `warm-${key}`, 'warm');
        sent = { ...sent, [key]: sent[key] + 1 };
        await allHave(room, [...others], sent[key], performance.now());
      }
    };
    await warm();
    const last: number[] = [];
    const median: number[] = [];
    const baseline: number[] = [];
    for (let round = 0; round < FANOUT_ROUNDS; round++) {
      {
        const t0 = performance.now();
        const arrived = allHave(everyone, peers.slice(1), ++sent.everyone, t0);
        await send(first, users[0]!.token, everyone, `all-${round}`, `to all ${round}`);
        const at = await arrived;
        last.push(at.at(-1)!);
        median.push(percentile(at, 50));
      }
      {
        const t0 = performance.now();
        const arrived = allHave(pair, [peers[1]!], ++sent.pair, t0);
        await send(first, users[0]!.token, pair, `pair-${round}`, `to one ${round}`);
        baseline.push((await arrived)[0]!);
      }
    }
    const sort = (xs: number[]) => [...xs].sort((x, y) => x - y);
    report(`load: fan-out to ${FANOUT_PEERS} peers in one room`, `${FANOUT_PEERS} homeservers in this process, each its own native SQLite files and libp2p node (TCP on 127.0.0.1), ${FANOUT_ROUNDS} rounds alternating with a 2-peer room of the same peers`, [
      [`one message → all ${FANOUT_PEERS - 1} other peers have it, p50`, percentile(sort(last), 50), 'ms', `max ${Math.max(...last).toFixed(1)} ms; half of them have it after ${percentile(sort(median), 50).toFixed(1)} ms (p50)`],
      ['baseline: one message → the one other peer of a 2-peer room, p50', percentile(sort(baseline), 50), 'ms', `max ${Math.max(...baseline).toFixed(1)} ms`],
      [`${FANOUT_PEERS} peers / 2 peers, p50`, percentile(sort(last), 50) / percentile(sort(baseline), 50), '×'],
      [`set-up: ${FANOUT_PEERS} peers started, ${FANOUT_PEERS - 1} joins over federation`, setUpMs, 'ms'],
      ['resident memory of this process, peak', MiB(peakRss()), 'MiB', `${(MiB(process.memoryUsage().rss) / FANOUT_PEERS).toFixed(1)} MiB per peer now`],
    ]);
  } finally {
    for (const p of peers.reverse()) await p.close();
  }
}

// ------------------------------------------------------------------ 3. kill -9 mid-burst

async function sigkill() {
  const a = await startBenchPeer({ seed: webRandomBytes(32) });
  const seed = webRandomBytes(32);
  const dataDir = await mkdtemp(join(tmpdir(), 'hearth-bench-kill-'));
  let b: ChildPeer = await startChildPeer(seed, a.p2p.multiaddrs(), undefined, dataDir);
  try {
    const alice = await register(a, 'alice');
    const carol = await register(b, 'carol');
    const room = await createRoom(a, alice.token);
    await join_(b, carol.token, room, a.homeserver.serverName);

    const acknowledged = new Map<number, string>();
    let next = 0;
    let killed = false;
    const sender = async (server: Reachable, indices: () => number | undefined) => {
      for (let i = indices(); i !== undefined; i = indices()) {
        try {
          acknowledged.set(i, (await send(server, carol.token, room, `k${i}`, `kill ${i}`)).event_id);
        } catch {
          unacknowledged.push(i); // B is gone: the client will retry this one
        }
        if (!killed && acknowledged.size >= FAULT_MESSAGES / 2) {
          killed = true;
          b.kill();
        }
      }
    };
    const unacknowledged: number[] = [];
    const started = performance.now();
    await Promise.all(Array.from({ length: FAULT_IN_FLIGHT }, () => sender(b, () => (killed || next >= FAULT_MESSAGES ? undefined : next++))));
    await b.exited;
    const killedAt = performance.now() - started;
    for (let i = next; i < FAULT_MESSAGES; i++) unacknowledged.push(i);
    const ackedBeforeKill = new Map(acknowledged);

    const restarted = performance.now();
    b = await startChildPeer(seed, a.p2p.multiaddrs(), undefined, dataDir);
    const restartMs = performance.now() - restarted;
    const retry = [...unacknowledged].sort((x, y) => x - y);
    await Promise.all(Array.from({ length: FAULT_IN_FLIGHT }, () => sender(b, () => retry.shift())));
    const onA = untilAccepted(a, room, 'm.room.message', FAULT_MESSAGES);
    const timeout = new Promise<'timeout'>((resolve) => setTimeout(resolve, 120_000, 'timeout').unref());
    const completed = await Promise.race([onA.then(() => 'done' as const), timeout]);
    const doneMs = performance.now() - restarted;

    // Verdict: each event acknowledged before the kill is on B under the same ID; the
    // room holds each message exactly once on both sides.
    const lost: number[] = [];
    for (const [i, eventId] of ackedBeforeKill) {
      const seen = await fetch(`${b.url}/_matrix/client/v3/rooms/${enc(room)}/event/${enc(eventId)}`, { headers: { authorization: `Bearer ${carol.token}` } });
      if (seen.status !== 200) lost.push(i);
    }
    const countB = await b.command<number>({ cmd: 'count', roomId: room, type: 'm.room.message' });
    const countA = await acceptedEvents(a, room, 'm.room.message');
    const distinctA = (await a.db.get<{ n: number }>(
      "SELECT COUNT(DISTINCT json_extract(json, '$.content.body')) AS n FROM events WHERE room_id = ? AND type = 'm.room.message' AND rejected IS NULL AND outlier = 0",
      [room],
    ))?.n;
    const pass = lost.length === 0 && completed === 'done' && countA === FAULT_MESSAGES && countB === FAULT_MESSAGES && distinctA === FAULT_MESSAGES && acknowledged.size === FAULT_MESSAGES;
    report('load: kill -9 of the sending host mid-burst', `${FAULT_MESSAGES} messages from a client of B, ${FAULT_IN_FLIGHT} in flight, B (own process, native SQLite on files) killed with SIGKILL once ${FAULT_MESSAGES / 2} are acknowledged, restarted on the same folder; the client retries the rest with the same transaction IDs`, [
      ['acknowledged before the kill', ackedBeforeKill.size, 'messages', `killed at ${killedAt.toFixed(0)} ms; ${unacknowledged.length} to retry`],
      ['of those, missing on B after the restart', lost.length, 'messages'],
      ['B restarted (process up, database open, libp2p listening)', restartMs, 'ms'],
      ['restart → all on A', doneMs, 'ms', completed === 'done' ? '' : 'NOT all arrived within 120 s'],
      ['messages on B / on A (distinct on A)', countB, '', `A: ${countA} (${distinctA} distinct)`],
    ]);
    console.log(`  verdict: ${pass ? 'PASS' : 'FAIL'}: ${pass ? 'nothing acknowledged was lost, and the burst completed on both hosts, each message once' : 'see the rows above'}`);
  } finally {
    await b.stop();
    await a.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

export async function run(): Promise<void> {
  const only = process.env.HEARTH_BENCH_LOAD?.split(',');
  if (!only || only.includes('burst')) await burst();
  if (!only || only.includes('fanout')) await fanOut();
  if (!only || only.includes('kill')) await sigkill();
}
