// Issue 24's load scenario: N Node peers on this machine (HEARTH_BENCH_LOAD_PEERS, default 20),
// each the compiled host as `npm run serve` runs it, in a process of its own with its own data
// folder, OS-chosen ports and libp2p on 127.0.0.1; one room they have all joined. Each peer's
// client sends M messages (HEARTH_BENCH_LOAD_MESSAGES, default 100), one after another, all peers
// at once, while each peer's client long-polls /sync. Baseline in the same run: 2 peers × M.
//
// What is asserted, on every peer (Matrix orders concurrent events per server: /messages is by
// (depth, arrival), so two servers may order events of one depth differently, and both be right):
// - /sync delivered every one of the N×M messages exactly once (by body; a `limited` timeline's gap
//   filled from /messages, as a client does);
// - every peer holds the same event for each message (one event ID each: the same DAG, since an
//   event's ID hashes its prev_events);
// - each peer's /messages order is consistent with prev_events (an event's prev_events come
//   before it), so each sender's messages are in the order it sent them;
// - /messages gives each message once, the same set on every peer, and the same order when read twice.
// How many peers' /messages order is identical to the first peer's is shown, not asserted.
// Figures: the send phase (first send → every peer's /sync has every message), messages/s, and
// each peer's peak resident memory (VmHWM from /proc/<pid>/status).
// HEARTH_BENCH_LOAD_FEDERATION_TIMEOUT_MS gives every peer (baseline too) a federation deadline of
// its own (HEARTH_FEDERATION_TIMEOUT_MS), so that a modest run meets the time-outs a big one does;
// the exchanges past it are counted from the peers' logs.
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../scripts/build.ts';
import { buildNodeHost } from '../scripts/build-node.ts';
import { spawnHearth, type HearthProcess } from '../test/support/hearth-process.ts';
import { call, register as registerWith } from './federation.bench.ts';
import { report, type Row } from './harness.ts';

const PEERS = Number(process.env.HEARTH_BENCH_LOAD_PEERS ?? 20);
const MESSAGES = Number(process.env.HEARTH_BENCH_LOAD_MESSAGES ?? 100);
/** The send phase ends, incomplete, once no peer's /sync has brought a new message for this long. */
const STALL_MS = Number(process.env.HEARTH_BENCH_LOAD_STALL_S ?? 60) * 1000;
/** HEARTH_BENCH_LOAD_FEDERATION_TIMEOUT_MS: each peer's deadline for one federation exchange (HEARTH_FEDERATION_TIMEOUT_MS; 30 s unless given), low enough for timeouts to happen. */
const FEDERATION_TIMEOUT_MS = process.env.HEARTH_BENCH_LOAD_FEDERATION_TIMEOUT_MS;
/** HEARTH_BENCH_LOAD_LOGS=DIR: each peer's output is written to DIR/<run>-peer<i>.log. */
const LOGS = process.env.HEARTH_BENCH_LOAD_LOGS;

type Json = any;
const enc = encodeURIComponent;
const MiB = (kib: number) => kib / 1024;
// The events as servers exchange them (event ID, prev_events, depth), all of them in each answer.
const SYNC_FILTER = enc(JSON.stringify({ event_format: 'federation', room: { timeline: { limit: 100_000, types: ['m.room.message'] }, state: { lazy_load_members: true }, ephemeral: { types: [] } }, presence: { types: [] }, account_data: { types: [] } }));

interface Peer {
  process: HearthProcess;
  url: string;
  user: { userId: string; token: string };
}

/** Peak resident memory of a process so far, in KiB (Linux). */
async function peakRssKiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN);
}

interface Seen {
  /** Message bodies in the order this peer's /sync gave them. */
  order: string[];
  ids: Map<string, string>;
  prev: Map<string, string[]>;
  duplicates: number;
  limited: number;
  syncErrors: number;
  /** /messages answers that were errors while filling a gap. */
  messagesErrors: string[];
  allAt?: number;
}

/**
 * Long-polls one peer's /sync until it has `total` distinct messages (or `stop` says so), recording each as
 * it comes; a `limited` timeline's gap is filled from /messages back to what it had, as a client does.
 */
async function syncAll(peer: Peer, roomId: string, since: string, total: number, progress: { at: number; stop: boolean }): Promise<Seen> {
  const seen: Seen = { order: [], ids: new Map(), prev: new Map(), duplicates: 0, limited: 0, syncErrors: 0, messagesErrors: [] };
  const viaSync = new Set<string>();
  const take = (e: Json, fromSync: boolean) => {
    const body = e.content?.body as string;
    // Twice in /sync is a fault; a gap's event that /sync brings later too (it arrived late) is not.
    if (fromSync && viaSync.has(body)) seen.duplicates++;
    if (fromSync) viaSync.add(body);
    if (seen.ids.has(body)) return;
    seen.order.push(body);
    seen.ids.set(body, e.event_id);
    seen.prev.set(e.event_id, e.prev_events);
    progress.at = performance.now();
  };
  let token = since;
  while (seen.ids.size < total && !progress.stop) {
    let r: Json;
    try {
      r = await call(peer, 'GET', `/_matrix/client/v3/sync?timeout=10000&since=${token}&filter=${SYNC_FILTER}`, peer.user.token);
    } catch (error) {
      // A client polls again after a failed poll (seen here: ECONNRESET on a kept-alive connection under load); counted.
      if (peer.process.child.exitCode !== null || peer.process.child.signalCode !== null) throw error;
      seen.syncErrors++;
      continue;
    }
    token = r.next_batch;
    const room = r.rooms?.join?.[roomId];
    if (!room) continue;
    if (room.timeline.limited) {
      seen.limited++;
      const known = new Set(seen.ids.values());
      const gap: Json[] = [];
      let from: string | undefined = room.timeline.prev_batch;
      while (from) {
        // A /messages that fails (seen: 500 "The stream has been reset" when its backfill's libp2p stream was reset) leaves the gap for now; counted.
        const page = await call(peer, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=1000&from=${enc(from)}&filter=${enc(JSON.stringify({ types: ['m.room.message'] }))}`, peer.user.token).catch((error: Error) => {
          seen.messagesErrors.push(error.message.slice(0, 200));
          return undefined;
        });
        if (!page) break;
        const older = (page.chunk as Json[]).filter((e) => !known.has(e.event_id));
        gap.unshift(...older.reverse());
        from = older.length < page.chunk.length || page.chunk.length === 0 ? undefined : page.end;
      }
      // /messages gives client-format events: their prev_events come from the event as servers see it.
      for (const e of gap) take({ ...e, prev_events: [] }, false);
    }
    for (const e of room.timeline.events as Json[]) take(e, true);
  }
  if (seen.ids.size >= total) seen.allAt = performance.now();
  return seen;
}

/** A room's whole history as one peer's /messages pages it, oldest first: [event ID, body] of each message. */
async function history(peer: Peer, roomId: string): Promise<[string, string][]> {
  const out: [string, string][] = [];
  let from: string | undefined;
  for (;;) {
    const page = await call(peer, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=1000${from ? `&from=${enc(from)}` : ''}`, peer.user.token);
    for (const e of page.chunk as Json[]) if (e.type === 'm.room.message') out.unshift([e.event_id, e.content.body]);
    if (!page.end || page.chunk.length === 0) return out;
    from = page.end;
  }
}

/** How many events of `order` come before one of their own prev_events (0 when the order is consistent with the DAG). */
function againstPrevEvents(order: string[], prev: Map<string, string[]>): number {
  const position = new Map(order.map((id, i) => [id, i]));
  let wrong = 0;
  for (const [i, id] of order.entries()) for (const p of prev.get(id) ?? []) if ((position.get(p) ?? -1) > i) wrong++;
  return wrong;
}

const sameOrder = (a: string[], b: string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

async function scenario(entry: string, peers: number, messages: number) {
  const folders: string[] = [];
  const running: HearthProcess[] = [];
  const spawn = async (bootstrap?: string[]) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'hearth-bench-peers-'));
    folders.push(dataDir);
    const p = await spawnHearth({ entry, dataDir, bootstrap, ...(FEDERATION_TIMEOUT_MS ? { env: { HEARTH_FEDERATION_TIMEOUT_MS: FEDERATION_TIMEOUT_MS } } : {}) });
    running.push(p);
    return p;
  };
  const total = peers * messages;
  try {
    const t0 = performance.now();
    const first = await spawn();
    const rest = await Promise.all(Array.from({ length: peers - 1 }, () => spawn(first.multiaddrs)));
    const all: Peer[] = [];
    for (const [i, p] of [first, ...rest].entries()) all.push({ process: p, url: p.url, user: await registerWith((...args) => call(p, ...args), `user${i}`) });
    const startedMs = performance.now() - t0;
    const roomId: string = (await call(all[0]!, 'POST', '/_matrix/client/v3/createRoom', all[0]!.user.token, { preset: 'public_chat' })).room_id;
    for (const peer of all.slice(1)) await call(peer, 'POST', `/_matrix/client/v3/join/${enc(roomId)}?via=${first.serverName}`, peer.user.token, {});
    // Every peer knows every member before the sends start, so each send goes to all the others (woken by its /sync).
    await Promise.all(all.map(async (peer) => {
      let since = '';
      for (;;) {
        const members = await call(peer, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/joined_members`, peer.user.token);
        if (Object.keys(members.joined).length === peers) return;
        since = (await call(peer, 'GET', `/_matrix/client/v3/sync?timeout=10000${since ? `&since=${since}` : ''}&filter=${SYNC_FILTER}`, peer.user.token)).next_batch;
      }
    }));
    const setUpMs = performance.now() - t0;

    const connected = async () => Promise.all(all.map(async (p) => ((await call(p, 'GET', '/_hearth/status')).peers as unknown[]).length));
    const connectedBefore = await connected();
    const tokens = await Promise.all(all.map(async (peer) => (await call(peer, 'GET', `/_matrix/client/v3/sync?filter=${SYNC_FILTER}`, peer.user.token)).next_batch as string));
    const sendStart = performance.now();
    const elapsed = () => performance.now() - sendStart;
    const progress = { at: sendStart, stop: false };
    // Not a deadline: the phase ends early only if nothing arrives anywhere for STALL_MS.
    const watchdog = setInterval(() => (progress.stop ||= performance.now() - progress.at > STALL_MS), 1000);
    const syncing = all.map((peer, i) => syncAll(peer, roomId, tokens[i]!, total, progress));
    // Settled below; a peer that died fails the run there, not as an unhandled rejection meanwhile.
    for (const s of syncing) s.catch(() => undefined);
    const acknowledgedAt: number[] = [];
    const sendErrors = all.map(() => 0);
    await Promise.all(all.map(async (peer, p) => {
      for (let m = 0; m < messages; m++) {
        for (;;) {
          try {
            await call(peer, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/t${m}`, peer.user.token, { msgtype: 'm.text', body: `p${p} m${m}` });
            break;
          } catch (error) {
            // Sent again with the same transaction ID, as a client does when the connection fails; counted.
            if (!(error instanceof TypeError) || peer.process.child.exitCode !== null) throw error;
            sendErrors[p]!++;
          }
        }
      }
      acknowledgedAt.push(elapsed());
    }));
    const seen = await Promise.all(syncing);
    clearInterval(watchdog);
    const sendMs = Math.max(...seen.map((s) => s.allAt ?? elapsed())) - sendStart;
    const peaks = await Promise.all(all.map((p) => peakRssKiB(p.process.child.pid!)));
    const connectedAfter = await connected();

    // The checks, peer by peer.
    const expected = new Set(Array.from({ length: peers }, (_, p) => Array.from({ length: messages }, (_, m) => `p${p} m${m}`)).flat());
    // Each message's event ID as the first peer that has it saw it: every other peer that has it must hold the same event.
    const reference = new Map<string, string>();
    for (const s of seen) for (const [body, id] of s.ids) if (!reference.has(body)) reference.set(body, id);
    const problems: string[] = [];
    const histories: string[][] = [];
    const syncAgainstDag: number[] = [];
    // Every peer's events as servers exchange them (one event ID is one event everywhere): prev_events for the checks.
    const prev = new Map(seen.flatMap((s) => [...s.prev].filter(([, p]) => p.length > 0)));
    for (const [i, s] of seen.entries()) {
      const missing = [...expected].filter((b) => !s.ids.has(b)).length;
      const differentId = [...s.ids].filter(([body, id]) => reference.get(body) !== id).length;
      syncAgainstDag.push(againstPrevEvents(s.order.map((b) => s.ids.get(b)!), prev));
      const read = () => history(all[i]!, roomId).catch((error: Error) => (problems.push(`peer ${i}: /messages failed: ${error.message.slice(0, 200)}`), [] as [string, string][]));
      const h = await read();
      const again = await read();
      const ids = h.map(([id]) => id);
      const bodies = h.map(([, body]) => body);
      const historyMissing = [...expected].filter((b) => !bodies.includes(b)).length;
      const historyTwice = bodies.length - new Set(bodies).size;
      const historyAgainstDag = againstPrevEvents(ids, prev);
      histories.push(ids);
      const say = (what: string, n: number) => n > 0 && problems.push(`peer ${i}: ${n} ${what}`);
      say('messages missing from /sync', missing);
      say('messages twice in /sync', s.duplicates);
      say('messages with another event ID than on another peer', differentId);
      say('messages missing from /messages', historyMissing);
      say('messages twice in /messages', historyTwice);
      say(`/messages errors while filling a gap (${s.messagesErrors[0]})`, s.messagesErrors.length);
      say('events before one of their prev_events in /messages', historyAgainstDag);
      say('/messages orders that changed when read again', sameOrder(ids, again.map(([id]) => id)) ? 0 : 1);
    }
    const identical = histories.filter((h) => sameOrder(h, histories[0]!)).length;
    // Whose messages are missing where: a sender no other peer could reach shows here.
    const missingFrom = all.map((_, p) => seen.filter((s) => [...Array(messages).keys()].some((m) => !s.ids.has(`p${p} m${m}`))).length);
    const retries = all.map((p) => (p.process.output().match(/failed; retrying/g) ?? []).length);
    // The federation deadline's own words (src/p2p/http.ts) in the peers' logs: sends, served requests and gap fetches alike.
    const timeouts = all.map((p) => (p.process.output().match(/no answer within \d+ ms/g) ?? []).length);
    return { peers, messages, total, startedMs, setUpMs, sendMs, lastAckMs: Math.max(...acknowledgedAt), peaks, problems, identical, syncAgainstDag, retries, timeouts, complete: seen.filter((s) => s.allAt !== undefined).length, limited: seen.map((s) => s.limited), syncErrors: seen.map((s) => s.syncErrors), sendErrors, connectedBefore, connectedAfter, missingFrom };
  } finally {
    if (LOGS) for (const [i, p] of running.entries()) await writeFile(join(LOGS, `${peers}-peer${i}.log`), p.output());
    await Promise.all(running.map((p) => p.stop()));
    await Promise.all(folders.map((f) => rm(f, { recursive: true, force: true })));
  }
}

export async function run(): Promise<void> {
  const only = process.env.HEARTH_BENCH_LOAD?.split(',');
  if (only && !only.includes('peers')) return;
  await mkdir(join(PROJECT_ROOT, 'build'), { recursive: true });
  const buildDir = await mkdtemp(join(PROJECT_ROOT, 'build', 'bench-node-'));
  try {
    const entry = await buildNodeHost(buildDir);
    const base = await scenario(entry, 2, MESSAGES);
    const load = await scenario(entry, PEERS, MESSAGES);
    const rate = (r: typeof load) => (r.total / r.sendMs) * 1000;
    const kib = (xs: number[]) => [...xs].sort((x, y) => x - y);
    const peaks = kib(load.peaks);
    const rows: Row[] = [
      [`${load.peers} peers × ${load.messages}: first send → every peer's /sync has all ${load.total}`, load.sendMs, 'ms', `${rate(load).toFixed(0)} messages/s; every client's last send acknowledged at ${load.lastAckMs.toFixed(0)} ms; ${load.complete}/${load.peers} peers complete`],
      [`baseline: 2 peers × ${base.messages}, the same`, base.sendMs, 'ms', `${rate(base).toFixed(0)} messages/s; last acknowledged at ${base.lastAckMs.toFixed(0)} ms`],
      [`${load.peers} peers / 2 peers, time`, load.sendMs / base.sendMs, '×', `${(load.total / base.total).toFixed(1)}× the messages, each to ${load.peers - 1} servers rather than 1; load average ${loadavg()[0]!.toFixed(1)} on ${availableParallelism()} cores`],
      [`set-up: ${load.peers} processes up and registered / and all joined`, load.setUpMs, 'ms', `processes up in ${load.startedMs.toFixed(0)} ms`],
      ['peak RSS per peer (VmHWM): median', MiB(peaks[Math.floor(peaks.length / 2)]!), 'MiB', `min ${MiB(peaks[0]!).toFixed(0)}, max ${MiB(peaks.at(-1)!).toFixed(0)}, sum ${MiB(peaks.reduce((x, y) => x + y, 0)).toFixed(0)} MiB; baseline peers ${base.peaks.map((k) => MiB(k).toFixed(0)).join(', ')} MiB`],
      ...load.peaks.map((k, i): Row => [`  peer ${i} peak RSS`, MiB(k), 'MiB']),
      ["peers whose /messages order is identical to peer 0's", load.identical, `of ${load.peers}`, 'shown, not asserted: concurrent events of one depth are ordered by arrival on each server'],
      ['events /sync gave before one of their prev_events, all peers', load.syncAgainstDag.reduce((x, y) => x + y, 0), '', `shown, not asserted: /sync is in arrival order, and an event may be accepted before a missing prev_event is fetched; by peer ${load.syncAgainstDag.join(' ')}`],
      ['libp2p peers connected to each peer at the first send / at the end: fewest', Math.min(...load.connectedBefore), `of ${load.peers - 1}`, `at the end fewest ${Math.min(...load.connectedAfter)}; by peer ${load.connectedBefore.join(' ')} / ${load.connectedAfter.join(' ')}`],
      ['peers missing some of a sender\'s messages, worst sender', Math.max(...load.missingFrom), `of ${load.peers}`, `by sender ${load.missingFrom.join(' ')}`],
      ['limited /sync answers (a gap: prev_events missing), filled from /messages, all peers', load.limited.reduce((x, y) => x + y, 0), '', `by peer ${load.limited.join(' ')}`],
      ['failed /sync polls, polled again / failed sends, sent again, all peers', load.syncErrors.reduce((x, y) => x + y, 0), '', `sends ${load.sendErrors.reduce((x, y) => x + y, 0)}; polls by peer ${load.syncErrors.join(' ')}`],
      ['federation sends that failed and were retried, all peers', load.retries.reduce((x, y) => x + y, 0), '', `by peer ${load.retries.join(' ')}`],
      [`federation log entries naming the deadline (${FEDERATION_TIMEOUT_MS ?? 30_000} ms: sends, served requests, gap fetches), all peers`, load.timeouts.reduce((x, y) => x + y, 0), '', `by peer ${load.timeouts.join(' ')}; baseline ${base.timeouts.reduce((x, y) => x + y, 0)}`],
    ];
    report(`load: ${load.peers} Node peers in one room, each sending ${load.messages} while all sync`, `each the compiled host in its own process, own data folder, libp2p TCP on 127.0.0.1, native SQLite; one client per peer sending one at a time and long-polling /sync`, rows);
    const problems = [...base.problems.map((p) => `baseline ${p}`), ...load.problems];
    console.log(`  asserted on every peer: every message in /sync (gaps filled from /messages) exactly once; the same event ID for each message on every peer (the same DAG); /messages order consistent with prev_events; /messages holds each message once and reads the same twice`);
    console.log(`  verdict: ${problems.length === 0 ? 'PASS' : `FAIL: ${problems.slice(0, 20).join('; ')}`}`);
  } finally {
    await rm(buildDir, { recursive: true, force: true });
  }
}
