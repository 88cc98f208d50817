// A room the size of Matrix HQ, joined over federation (issue 23): A holds a room of
// 10,000 members, 20,000 state events and 50,000 events of history (built straight
// through A's room engine, signed as any event, and cached under the temp folder
// between runs); B, in its own process, joins it over libp2p. Figures:
// 1. time to a usable room: the join answered, the first /sync (lazy members), the
//    first /messages page; B's peak RSS beside the room's state on the wire;
// 2. in that room, on B: /sync with lazy-loaded members, and a send beside a send into
//    a 2-member room in the same run;
// 3. state resolution of a 20-way fork over 10,000 members, beside 1,000 members.
// HEARTH_BENCH_BIG_MEMBERS / _STATE / _EVENTS shrink the room (a quick run);
// HEARTH_BENCH_PROFILE_DIR writes B's CPU profile (--cpu-prof) there. HEARTH_BENCH_LIVE_HEAP prints
// B's live heap after each phase (a full GC after each, so its RSS figures are not the plain run's),
// and HEARTH_BENCH_HEAP_SNAPSHOTS=DIR writes a heap snapshot there at each. B runs with the V8 flags
// `npm run serve` gives the host, and HEARTH_BENCH_NODE_FLAGS adds more (say `--heap-growing-percent=20`).
import { existsSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EventTemplate } from '../src/rooms/types.ts';
import { call, direct, register, startChildPeer } from './federation.bench.ts';
import { startBenchPeer, type BenchPeer, type MemorySample } from './federation-peer.ts';
import { percentile, report } from './harness.ts';
import { resolveForks } from './state-res.bench.ts';

const MEMBERS = Number(process.env.HEARTH_BENCH_BIG_MEMBERS ?? 10_000);
const STATE = Number(process.env.HEARTH_BENCH_BIG_STATE ?? 20_000);
const EVENTS = Number(process.env.HEARTH_BENCH_BIG_EVENTS ?? 50_000);
const BATCH = 500;
const SENDS = 60;
const SYNCS = 30;
/** The fixed seed of A: a cached database is A's, under the same server name. */
const SEED = new Uint8Array(32).fill(23);
const FIRST_PAGE = 20;

type Json = any;
const enc = encodeURIComponent;
const LAZY = enc(JSON.stringify({ room: { timeline: { limit: 10 }, state: { lazy_load_members: true } }, presence: { types: [] } }));
const MiB = (bytes: number) => bytes / 1024 / 1024;


/** The big room on A, through the room engine in batches (one write each); what it holds. */
async function buildRoom(a: BenchPeer): Promise<string> {
  const alice = await register((...args) => direct(a, ...args), 'alice');
  const roomId = (await direct(a, 'POST', '/_matrix/client/v3/createRoom', alice.token, { preset: 'public_chat', name: 'Big room' })).room_id as string;
  const { rooms } = a.homeserver.services;
  const server = a.homeserver.serverName;
  const member = (i: number) => `@m${i}:${server}`;
  const send = async (make: (i: number) => EventTemplate, count: number) => {
    for (let from = 0; from < count; from += BATCH) {
      await rooms.sendEvents(roomId, Array.from({ length: Math.min(BATCH, count - from) }, (_, k) => make(from + k)));
    }
  };
  await send((i) => ({ type: 'm.room.member', sender: member(i), state_key: member(i), content: { membership: 'join', displayname: `Member ${i}` } }), MEMBERS);
  await send((i) => ({ type: 'org.hearth.bench.state', sender: alice.userId, state_key: `key ${i}`, content: { value: `state ${i} of the big room` } }), STATE - MEMBERS);
  await send((i) => ({ type: 'm.room.message', sender: member(i % MEMBERS), content: { msgtype: 'm.text', body: `history ${i} of an ordinary length, say forty-odd characters` } }), EVENTS - STATE);
  return roomId;
}

/** A with its big room: built once, then kept (its data folder and room ID) under the temp folder. */
async function remoteSide(): Promise<{ a: BenchPeer; roomId: string; buildMs: number | undefined }> {
  const dir = join(tmpdir(), `hearth-bench-big-room-v1-${MEMBERS}-${STATE}-${EVENTS}`);
  const marker = join(dir, 'room.json');
  if (existsSync(marker)) {
    const a = await startBenchPeer({ seed: SEED, dataDir: dir });
    return { a, roomId: (JSON.parse(readFileSync(marker, 'utf8')) as { roomId: string }).roomId, buildMs: undefined };
  }
  const data = join(dir, `build-${process.pid}`);
  mkdirSync(data, { recursive: true });
  const a = await startBenchPeer({ seed: SEED, dataDir: data });
  const started = performance.now();
  const roomId = await buildRoom(a);
  const buildMs = performance.now() - started;
  // Moved into place only once complete: an interrupted build is not reused.
  await a.close();
  const { renameSync } = await import('node:fs');
  renameSync(join(data, 'hearth.sqlite'), join(dir, 'hearth.sqlite'));
  for (const suffix of ['-wal', '-shm']) if (existsSync(join(data, `hearth.sqlite${suffix}`))) renameSync(join(data, `hearth.sqlite${suffix}`), join(dir, `hearth.sqlite${suffix}`));
  writeFileSync(marker, JSON.stringify({ roomId }));
  return { a: await startBenchPeer({ seed: SEED, dataDir: dir }), roomId, buildMs };
}

const median = (xs: number[]) => percentile([...xs].sort((x, y) => x - y), 50);

export async function run(): Promise<void> {
  const { a, roomId, buildMs } = await remoteSide();
  const b = await startChildPeer(crypto.getRandomValues(new Uint8Array(32)), a.p2p.multiaddrs());
  try {
    const dave = await register((...args) => call(b, ...args), 'dave');
    const erin = await register((...args) => call(b, ...args), 'erin');
    const since = (await call(b, 'GET', `/_matrix/client/v3/sync?timeout=0&filter=${LAZY}`, dave.token)).next_batch as string;
    const liveBefore = process.env.HEARTH_BENCH_LIVE_HEAP ? await b.command<number>({ cmd: 'liveHeap' }) : 0;
    type Memory = { rss: number; peakRss: number; cpuMs: number };
    const before = await b.command<Memory>({ cmd: 'memory' });
    await b.command({ cmd: 'timings' });
    await b.command({ cmd: 'memoryTrace', action: 'start' });

    const joinStarted = performance.now();
    const joinAt = Date.now();
    await call(b, 'POST', `/_matrix/client/v3/join/${enc(roomId)}?via=${a.homeserver.serverName}`, dave.token, {});
    const joinMs = performance.now() - joinStarted;
    const joined = await b.command<Memory>({ cmd: 'memory' });
    const live: [string, number][] = [];
    const liveHeap = async (phase: string) => {
      if (!process.env.HEARTH_BENCH_LIVE_HEAP) return;
      const snapshot = process.env.HEARTH_BENCH_HEAP_SNAPSHOTS ? join(process.env.HEARTH_BENCH_HEAP_SNAPSHOTS, `b-${phase.replace(/\W+/g, '-')}.heapsnapshot`) : undefined;
      live.push([phase, await b.command<number>({ cmd: 'liveHeap', ...(snapshot ? { snapshot } : {}) })]);
    };
    await liveHeap('after the join');
    const syncStarted = performance.now();
    const syncAt = Date.now();
    const firstSync = await call(b, 'GET', `/_matrix/client/v3/sync?timeout=0&since=${since}&filter=${LAZY}`, dave.token);
    const syncMs = performance.now() - syncStarted;
    await liveHeap('after the first sync');
    if (!firstSync.rooms?.join?.[roomId]) throw new Error('the first /sync after the join does not have the room');
    const pageStarted = performance.now();
    const pageAt = Date.now();
    const page = await call(b, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=${FIRST_PAGE}&filter=${enc(JSON.stringify({ lazy_load_members: true }))}`, dave.token);
    const pageMs = performance.now() - pageStarted;
    await liveHeap('after the first page');
    const after = await b.command<Memory>({ cmd: 'memory' });
    const samples = await b.command<MemorySample[]>({ cmd: 'memoryTrace', action: 'stop' });
    const sampledPeak = samples.reduce((top, s) => (s.rss > top.rss ? s : top), samples[0]!);
    const phaseOf = (at: number) => (at >= pageAt ? 'the first /messages page' : at >= syncAt ? 'the first /sync' : at >= joinAt ? 'the join' : 'before');
    const startSample = samples[0]!;
    const timings = await b.command<{ outbound: Record<string, number[]>; responseBytes: Record<string, number[]> }>({ cmd: 'timings' });
    // What B asked of A, the join and the page together, with each endpoint's total time.
    const asked = Object.entries(timings.outbound).filter(([, v]) => v.length > 0).map(([k, v]) => `${v.length}× ${k} ${v.reduce((x, y) => x + y, 0).toFixed(0)} ms`).join(', ');
    const wire = timings.responseBytes['PUT send_join']?.[0] ?? NaN;
    const sendJoin = timings.outbound['PUT send_join']?.[0] ?? NaN;
    const makeJoin = timings.outbound['GET make_join']?.[0] ?? NaN;
    const usable = joinMs + syncMs + pageMs;

    // In the room, on B: /sync with lazy members (initial and incremental), and sends beside a 2-member room's.
    const small = (await call(b, 'POST', '/_matrix/client/v3/createRoom', dave.token, { preset: 'public_chat' })).room_id as string;
    await call(b, 'POST', `/_matrix/client/v3/join/${enc(small)}`, erin.token, {});
    const bigSends: number[] = [];
    const smallSends: number[] = [];
    const sendTo = async (room: string, txn: string) => {
      const t = performance.now();
      await call(b, 'PUT', `/_matrix/client/v3/rooms/${enc(room)}/send/m.room.message/${txn}`, dave.token, { msgtype: 'm.text', body: `a message of ordinary length, ${txn}` });
      return performance.now() - t;
    };
    for (let i = 0; i < SENDS + 5; i++) {
      const big = await sendTo(roomId, `big${i}`);
      const two = await sendTo(small, `small${i}`);
      if (i >= 5) bigSends.push(big), smallSends.push(two);
    }
    const initial: number[] = [];
    const incremental: number[] = [];
    const serialised: number[] = [];
    let next = (await call(b, 'GET', `/_matrix/client/v3/sync?timeout=0&filter=${LAZY}`, dave.token)).next_batch as string;
    for (let i = 0; i < SYNCS + 3; i++) {
      let t = performance.now();
      const full = await call(b, 'GET', `/_matrix/client/v3/sync?timeout=0&filter=${LAZY}`, dave.token);
      const initialMs = performance.now() - t;
      if (!full.rooms.join[roomId]) throw new Error('no big room in the initial /sync');
      // Its floor in the same run: the same answer serialised and parsed again, which any server and client pay.
      t = performance.now();
      JSON.parse(JSON.stringify(full));
      const serialiseMs = performance.now() - t;
      await sendTo(roomId, `sync${i}`);
      t = performance.now();
      const inc = await call(b, 'GET', `/_matrix/client/v3/sync?timeout=0&since=${next}&filter=${LAZY}`, dave.token);
      const incMs = performance.now() - t;
      next = inc.next_batch;
      if (i >= 3) initial.push(initialMs), incremental.push(incMs), serialised.push(serialiseMs);
    }
    const members = (firstSync.rooms.join[roomId].state?.events ?? []).filter((e: Json) => e.type === 'm.room.member').length;

    const forks = await resolveForks([1000, MEMBERS]);

    report('big room: joining it over federation', `A's room: ${MEMBERS} members, ${STATE} state events, ${EVENTS} events${buildMs === undefined ? ' (cached build)' : `, built in ${(buildMs / 1000).toFixed(0)} s`}; B in its own process, libp2p over TCP on loopback, native SQLite; load average ${(await import('node:os')).loadavg().map((x) => x.toFixed(1)).join(' ')}`, [
      ['time to a usable room (join + first /sync + first /messages page)', usable / 1000, 's', 'goal ≤ 10 s'],
      ['  POST /join on B', joinMs, 'ms', `make_join ${makeJoin.toFixed(0)} ms, send_join round trip ${sendJoin.toFixed(0)} ms; the rest, ${(joinMs - makeJoin - sendJoin).toFixed(0)} ms, is B checking and storing the state`],
      ['  B\'s CPU time in the join (user + system, all threads)', joined.cpuMs - before.cpuMs, 'ms', `${(after.cpuMs - before.cpuMs).toFixed(0)} ms to the end of the first page`],
      ['  first /sync (lazy members)', syncMs, 'ms', `${members} member events in its state`],
      ['  first /messages page', pageMs, 'ms', `${page.chunk.length} events; B asked A (join and page): ${asked}`],
      ['state on the wire (the send_join answer)', MiB(wire), 'MiB'],
      ['B\'s peak RSS', MiB(Math.max(after.peakRss, before.peakRss)), 'MiB', `before the join ${MiB(before.rss).toFixed(0)} MiB, after ${MiB(after.rss).toFixed(0)} MiB`],
      ['  peak growth during the join / state on the wire', (after.peakRss - before.rss) / wire, '×', `peak RSS / state on the wire ${(after.peakRss / wire).toFixed(1)}×; goal ≤ 3×`],
      ...live.map(([phase, bytes]): [string, number, string, string] => [`  live heap ${phase} (HEARTH_BENCH_LIVE_HEAP)`, MiB(bytes), 'MiB', `+${MiB(bytes - liveBefore).toFixed(1)} MiB on the live heap before the join`]),
      ['  highest RSS sampled (every 10 ms)', MiB(sampledPeak.rss), 'MiB', `during ${phaseOf(sampledPeak.at)}; then, above the start: JS heap +${MiB(sampledPeak.heapUsed - startSample.heapUsed).toFixed(0)} MiB, external (buffers, WASM) +${MiB(sampledPeak.external - startSample.external).toFixed(0)} MiB`],
      ...['the join', 'the first /sync', 'the first /messages page'].map((phase): [string, number, string, string] => {
        const top = samples.filter((s) => phaseOf(s.at) === phase).reduce((max, s) => Math.max(max, s.rss), 0);
        return [`    highest RSS sampled during ${phase}`, MiB(top), 'MiB', `${((top - before.rss) / wire).toFixed(2)}× the state on the wire above the RSS before the join`];
      }),
    ]);
    report('big room: in it, on B', `${SENDS} sends each, alternating; ${SYNCS} syncs; HTTP over loopback`, [
      ['/sync with lazy-loaded members, initial, p50', median(initial), 'ms', 'goal ≤ 50 ms'],
      ['  its floor: the same answer serialised and parsed (JSON.stringify + JSON.parse), p50', median(serialised), 'ms', `the initial /sync is ${(median(initial) / median(serialised)).toFixed(2)}× it`],
      ['/sync with lazy-loaded members, incremental (one new message), p50', median(incremental), 'ms'],
      ['PUT /send into the big room, p50', median(bigSends), 'ms'],
      ['PUT /send into a 2-member room, p50', median(smallSends), 'ms', 'same run, alternating'],
      ['big / 2-member', median(bigSends) / median(smallSends), '×', 'goal ≤ 2×'],
    ]);
    report('big room: state resolution of a 20-way fork', 'TestRoom-built, cold caches; median of runs', [
      [`resolve 20 forks over ${MEMBERS} members`, forks[1]!.median, 'ms', `p90 ${forks[1]!.p90.toFixed(0)} ms; goal ≤ 200 ms`],
      ['  baseline: over 1,000 members', forks[0]!.median, 'ms', `p90 ${forks[0]!.p90.toFixed(0)} ms; ratio ${(forks[1]!.median / forks[0]!.median).toFixed(1)}×`],
    ]);
  } finally {
    await b.stop();
    await a.close();
  }
}
