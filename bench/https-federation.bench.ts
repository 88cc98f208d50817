// Federation over HTTPS between two DNS-named Hearth hosts (`localhost:P1`,
// `localhost:P2`, each with its own ed25519 key and a certificate from a CA of the
// bench's own), beside the same figures over libp2p between two hex-named hosts in
// the same run. As in bench/federation.bench.ts, B of each pair runs in a child
// process, every homeserver is on durable files, and each round starts once the
// notifier says the remote client's long-poll is waiting:
// 1. a send on A → B's /sync answers, warm, HTTPS and libp2p rounds alternating;
// 2. joining a remote room of 100 members and 1,000 events: the join answered, then
//    the first /sync and the first /messages page, over HTTPS and over libp2p, three
//    rooms each, their joins alternating.
import { webRandomBytes } from '../src/crypto/random.ts';
import { httpsFetch } from '../test/support/https-fetch.ts';
import { createTestCa } from '../test/support/test-ca.ts';
import { bigRoom, joinBigRoom, joinRows, ROUNDS, startChildPeer, wakeupRounds, type ChildPeer, type Reachable } from './federation.bench.ts';
import { startBenchPeer, type BenchDns, type BenchPeer } from './federation-peer.ts';
import { percentile, report, type Row } from './harness.ts';

const ms = (x: number) => `${x.toFixed(1)} ms`;
const p50 = (xs: number[]) => percentile(xs, 50);
const p95 = (xs: number[]) => percentile(xs, 95);
const JOINS = 3;
type Join = Awaited<ReturnType<typeof joinBigRoom>>;
/** The join whose `f` is the median of them. */
const median = (js: Join[], f: (j: Join) => number): Join => [...js].sort((x, y) => f(x) - f(y))[Math.floor(js.length / 2)]!;

export async function run(): Promise<void> {
  const ca = createTestCa('Hearth Bench CA');
  const leaf = ca.issue(['localhost', '127.0.0.1']);
  const dns: BenchDns = { ...leaf, ca: ca.cert };
  const clientFetch = httpsFetch(ca.cert);
  const stops: (() => Promise<void>)[] = [];
  try {
    // Over HTTPS: both DNS-named; the bench's clients trust the CA through clientFetch.
    const ha: BenchPeer & Reachable = Object.assign(await startBenchPeer({ seed: webRandomBytes(32), dns }), { clientFetch });
    stops.push(() => ha.close());
    const hb: ChildPeer = Object.assign(await startChildPeer(webRandomBytes(32), [], dns), { clientFetch });
    stops.push(() => hb.stop());
    // Over libp2p: both hex-named, TCP on loopback, as bench/federation.bench.ts runs them.
    const pa = await startBenchPeer({ seed: webRandomBytes(32) });
    stops.push(() => pa.close());
    const pb = await startChildPeer(webRandomBytes(32), pa.p2p.multiaddrs());
    stops.push(() => pb.stop());

    const overHttps = await wakeupRounds(ha, hb);
    const overLibp2p = await wakeupRounds(pa, pb);
    for (let i = 0; i < ROUNDS; i++) {
      await overHttps.round(i);
      await overLibp2p.round(i);
    }
    const h = await overHttps.finish();
    const p = await overLibp2p.finish();

    const breakdown = (w: typeof h, wire: string): Row[] =>
      w.breakdown
        ? [
            [`  A: send answered → its transaction handed to ${wire}, p50`, p50(w.breakdown.aToWire), 'ms', `p95 ${ms(p95(w.breakdown.aToWire))}`],
            [`  ${wire}: A hands it over → B's homeserver has the request, p50`, p50(w.breakdown.wireToB), 'ms', `p95 ${ms(p95(w.breakdown.wireToB))}`],
            ['  B: request in → the client\'s /sync answered, p50', p50(w.breakdown.bToSync), 'ms', `p95 ${ms(p95(w.breakdown.bToSync))}; the PDU durable and the notifier told after ${ms(p50(w.breakdown.bToNotify))}, the /send answered after ${ms(p50(w.breakdown.bDone))} (p50s)`],
          ]
        : [];
    report('federation over HTTPS: send → the remote client\'s /sync', `${h.federated.length} messages each way of carrying them, HTTPS and libp2p rounds alternating; loopback, native SQLite, B in its own process`, [
      ['HTTPS: PUT /send on A → /sync on B answers, p50', p50(h.federated), 'ms', `p95 ${ms(p95(h.federated))}; goal p50 ≤ 10 ms`],
      ['  /send round trip A → B (one PDU), p50', p50(h.roundTrip), 'ms', `of it in B's homeserver ${ms(p50(h.onBServer))}`],
      ...breakdown(h, 'HTTPS'),
      ['  a trivial federation request A → B over HTTPS (GET /version), p50', p50(h.bare), 'ms', `p95 ${ms(p95(h.bare))}; a trivial client request to B over HTTPS from the bench: p50 ${ms(p50(h.plain))}`],
      ['libp2p: PUT /send on A → /sync on B answers, p50', p50(p.federated), 'ms', `p95 ${ms(p95(p.federated))}; same run, alternating with the above`],
      ['  /send round trip A → B (one PDU), p50', p50(p.roundTrip), 'ms', `of it in B's homeserver ${ms(p50(p.onBServer))}`],
      ...breakdown(p, 'libp2p'),
      ['  a trivial federation request A → B over libp2p (GET /version), p50', p50(p.bare), 'ms', `p95 ${ms(p95(p.bare))}; a trivial client request to B over plain HTTP from the bench: p50 ${ms(p50(p.plain))}`],
      ['one server, HTTPS host: PUT /send on A → /sync on A answers, p50', p50(h.oneServer), 'ms', `p95 ${ms(p95(h.oneServer))} (on the libp2p host over HTTP: p50 ${ms(p50(p.oneServer))})`],
      ['HTTPS / libp2p, p50', p50(h.federated) / p50(p.federated), '×', `p95 ${(p95(h.federated) / p95(p.federated)).toFixed(2)}×`],
      ['HTTPS − libp2p, p50', p50(h.federated) - p50(p.federated), 'ms'],
    ]);

    // The big joins: JOINS rooms on each A, then their joins alternating HTTPS and libp2p; medians shown.
    const rooms = { https: [] as string[], libp2p: [] as string[] };
    for (const [peer, list, alice] of [[ha, rooms.https, h.alice], [pa, rooms.libp2p, p.alice]] as const) {
      let members: Awaited<ReturnType<typeof bigRoom>>['members'] | undefined;
      for (let k = 0; k < JOINS; k++) {
        const room = await bigRoom(peer, alice, members);
        members = room.members;
        list.push(room.roomId);
      }
    }
    const joins = { https: [] as Join[], libp2p: [] as Join[] };
    for (let k = 0; k < JOINS; k++) {
      joins.https.push(await joinBigRoom(ha, hb, rooms.https[k]!, `dave${k}`));
      joins.libp2p.push(await joinBigRoom(pa, pb, rooms.libp2p[k]!, `dave${k}`));
    }
    const total = (j: Join) => j.joinMs + j.syncMs + j.pageMs;
    const range = (js: Join[], f: (j: Join) => number) => `${js.map(f).sort((x, y) => x - y).map((x) => x.toFixed(0)).join(' / ')} ms`;
    const jh = median(joins.https, (j) => j.joinMs);
    const jp = median(joins.libp2p, (j) => j.joinMs);
    report('federation over HTTPS: joining a remote room', `100 members and 1,000 messages on A; B's user joins over HTTPS; the median of ${JOINS} joins (of ${JOINS} rooms), alternating with those over libp2p`, [
      ...joinRows(jh, 'HTTPS'),
      ['  all joins: POST /join', jh.joinMs, 'ms', range(joins.https, (j) => j.joinMs)],
      ['  all joins: join + first /sync + first /messages page', total(median(joins.https, total)), 'ms', `${range(joins.https, total)}; messages on each first page, in join order: ${joins.https.map((j) => j.pageMessages).join(', ')}`],
    ]);
    report('  the same over libp2p, same run', 'the baseline', [
      ...joinRows(jp, 'libp2p'),
      ['  all joins: POST /join', jp.joinMs, 'ms', range(joins.libp2p, (j) => j.joinMs)],
      ['  all joins: join + first /sync + first /messages page', total(median(joins.libp2p, total)), 'ms', `${range(joins.libp2p, total)}; messages on each first page, in join order: ${joins.libp2p.map((j) => j.pageMessages).join(', ')}`],
      ['HTTPS / libp2p: the join, medians', jh.joinMs / jp.joinMs, '×'],
      ['HTTPS / libp2p: join + first /sync + first /messages page, medians', total(median(joins.https, total)) / total(median(joins.libp2p, total)), '×'],
    ]);
  } finally {
    for (const stop of stops.reverse()) await stop().catch((error) => console.error(error));
    clientFetch.close();
    ca.dispose();
  }
}
