// When the network comes back (issue 40): two Node hosts, each the compiled host as `npm run serve` runs
// it, each in a network namespace of its own, joined by one veth link with 15 % packet loss each way
// (iptables' `statistic` match on each host's way out; this kernel has no netem). A's client sends a burst into a room B has joined; halfway through, the link is cut
// (100 % loss: packets vanish, as when a network drops, no connection is told) for CUT_S seconds while
// the sends go on, then heals to 15 % loss. The figure: heal → whole, the time from the heal until B's
// client has every message of the burst, each once and in A's order. Goal ≤ 2 s every round.
// The clients reach each host's client API over a link of their own from this namespace, which is never cut.
// Needs root (ip netns, iptables): `npm run bench reconnect`. HEARTH_BENCH_RECONNECT_ROUNDS (default 3),
// HEARTH_BENCH_RECONNECT_CUT_S (default 20), HEARTH_BENCH_RECONNECT_MESSAGES (default 40),
// HEARTH_BENCH_RECONNECT_LOGS=DIR keeps both hosts' output.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../scripts/build.ts';
import { buildNodeHost } from '../scripts/build-node.ts';
import { spawnHearth, type HearthProcess } from '../test/support/hearth-process.ts';
import { assertNetworkNamespaces, createLab, type Namespace } from '../test/support/netns.ts';
import { call, register } from './federation.bench.ts';
import { report, type Row } from './harness.ts';

const ROUNDS = Number(process.env.HEARTH_BENCH_RECONNECT_ROUNDS ?? 3);
const CUT_MS = Number(process.env.HEARTH_BENCH_RECONNECT_CUT_S ?? 20) * 1000;
const MESSAGES = Number(process.env.HEARTH_BENCH_RECONNECT_MESSAGES ?? 40);
const LOSS = 0.15;
/**
 * How the link is cut: `drop` (default) drops every packet, as a network that goes silent does; `down` takes
 * both ends of the link down, as a cable pulled or Wi-Fi lost does: the hosts' own sends then fail at once
 * (no route), so a queue's retries fail fast and its backoff grows while the link is out.
 */
const CUT_MODE = process.env.HEARTH_BENCH_RECONNECT_CUT === 'down' ? 'down' : 'drop';
const LOGS = process.env.HEARTH_BENCH_RECONNECT_LOGS;
const enc = encodeURIComponent;

/**
 * The shared link's state, at both ends: every packet a host sends on it passes the chain
 * `hearth-link`, which drops a random share of them (`loss`) or all of them (`cut`).
 */
function setLink(ends: [Namespace, string][], state: 'loss' | 'cut', first = false): void {
  for (const [ns, dev] of ends) {
    if (CUT_MODE === 'down' && !first) {
      ns.run('ip', ['link', 'set', 'dev', dev, state === 'cut' ? 'down' : 'up']);
      continue;
    }
    if (first) {
      ns.run('iptables', ['-N', 'hearth-link']);
      ns.run('iptables', ['-A', 'OUTPUT', '-o', dev, '-j', 'hearth-link']);
    }
    ns.run('iptables', ['-F', 'hearth-link']);
    ns.run('iptables', ['-A', 'hearth-link', ...(state === 'loss' ? ['-m', 'statistic', '--mode', 'random', '--probability', String(LOSS)] : []), '-j', 'DROP']);
  }
}

/** Long-polls B's /sync until every body of `bodies` is in the room's timeline; returns the order it saw them in. */
async function waitForAll(b: { url: string }, token: string, roomId: string, since: string, bodies: Set<string>): Promise<{ seen: string[]; next: string }> {
  const seen: string[] = [];
  let next = since;
  const filter = enc(JSON.stringify({ room: { rooms: [roomId], timeline: { limit: 200 } }, presence: { types: [] } }));
  while (![...bodies].every((body) => seen.includes(body))) {
    const r = await call(b, 'GET', `/_matrix/client/v3/sync?timeout=30000&since=${next}&filter=${filter}`, token);
    next = r.next_batch;
    const timeline = r.rooms?.join?.[roomId]?.timeline;
    if (timeline?.limited) throw new Error('the timeline came limited: raise the limit');
    for (const event of timeline?.events ?? []) if (event.type === 'm.room.message' && bodies.has(event.content?.body)) seen.push(event.content.body);
  }
  return { seen, next };
}

export async function run(): Promise<void> {
  assertNetworkNamespaces('The reconnect bench');
  await mkdir(join(PROJECT_ROOT, 'build'), { recursive: true });
  const buildDir = await mkdtemp(join(PROJECT_ROOT, 'build', 'bench-node-'));
  const lab = createLab();
  const running: HearthProcess[] = [];
  const dirs: string[] = [];
  try {
    const entry = await buildNodeHost(buildDir);
    const nsA = lab.namespace('a');
    const nsB = lab.namespace('b');
    const [devA, devB] = lab.link(nsA, '10.240.0.1/24', nsB, '10.240.0.2/24');
    // The clients' own links (this namespace ↔ each host), never cut.
    lab.link('host', '10.241.1.1/30', nsA, '10.241.1.2/30');
    lab.link('host', '10.241.2.1/30', nsB, '10.241.2.2/30');
    const start = async (ns: Namespace, host: string, listen: string, bootstrap: string[]) => {
      const dataDir = await mkdtemp(join(tmpdir(), 'hearth-bench-reconnect-'));
      dirs.push(dataDir);
      const p = await spawnHearth({ entry, dataDir, netns: ns, listen: [listen], bootstrap, args: ['--host', host] });
      running.push(p);
      return p;
    };
    const a = await start(nsA, '10.241.1.2', '/ip4/10.240.0.1/tcp/4001', []);
    const b = await start(nsB, '10.241.2.2', '/ip4/10.240.0.2/tcp/4001', a.multiaddrs);
    const alice = await register((...args) => call(a, ...args), 'alice');
    const bob = await register((...args) => call(b, ...args), 'bob');
    const roomId: string = (await call(a, 'POST', '/_matrix/client/v3/createRoom', alice.token, { preset: 'public_chat' })).room_id;
    await call(b, 'POST', `/_matrix/client/v3/join/${enc(roomId)}?via=${a.serverName}`, bob.token, {});
    let since: string = (await call(b, 'GET', '/_matrix/client/v3/sync?timeout=0', bob.token)).next_batch;
    setLink([[nsA, devA], [nsB, devB]], 'loss', true);

    const rows: Row[] = [];
    const figures: number[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const bodies = Array.from({ length: MESSAGES }, (_, i) => `round ${round} message ${i}`);
      let healedAt = 0;
      let cutAt = 0;
      let markHealed!: () => void;
      const healed = new Promise<void>((resolve) => (markHealed = resolve));
      const sending = (async () => {
        for (const [i, body] of bodies.entries()) {
          if (i === MESSAGES / 2) {
            setLink([[nsA, devA], [nsB, devB]], 'cut');
            cutAt = performance.now();
            // The cut lasts CUT_MS from here while the second half is sent; the heal is timed below.
            setTimeout(() => {
              setLink([[nsA, devA], [nsB, devB]], 'loss');
              healedAt = performance.now();
              markHealed();
            }, CUT_MS);
          }
          await call(a, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/r${round}m${i}`, alice.token, { msgtype: 'm.text', body });
        }
      })();
      const arrived = await waitForAll(b, bob.token, roomId, since, new Set(bodies));
      const wholeAt = performance.now();
      await sending;
      since = arrived.next;
      if (arrived.seen.length !== bodies.length || arrived.seen.some((body, i) => body !== bodies[i])) {
        throw new Error(`round ${round}: B's timeline is not A's burst once each in order: ${JSON.stringify(arrived.seen)}`);
      }
      // Whole before the heal can happen with loss alone (the second half all sent before the cut bit); it counts as 0.
      const afterHeal = healedAt === 0 ? 0 : Math.max(0, wholeAt - healedAt);
      figures.push(afterHeal);
      rows.push([`round ${round}: heal → whole`, afterHeal, 'ms', `cut ${((healedAt || wholeAt) - cutAt).toFixed(0)} ms, ${MESSAGES} messages, each once, in order`]);
      // The next round starts with the link healed.
      await healed;
    }
    rows.push(['heal → whole, worst round', Math.max(...figures), 'ms', `goal ≤ 2000 ms every round`]);
    report('reconnect: the network comes back', `two Node hosts in network namespaces, ${LOSS * 100} % loss each way, cut (${CUT_MODE}) ${CUT_MS / 1000} s mid-burst`, rows);
  } finally {
    if (LOGS) {
      await mkdir(LOGS, { recursive: true });
      for (const [i, p] of running.entries()) await writeFile(join(LOGS, `host-${'ab'[i]}.log`), p.output());
    }
    for (const p of running) await p.stop().catch(() => {});
    lab.close();
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
    await rm(buildDir, { recursive: true, force: true });
  }
}
