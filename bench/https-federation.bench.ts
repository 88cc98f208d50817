// Federation over HTTPS between two DNS-named Hearth hosts (`localhost:P1`,
// `localhost:P2`, each with its own ed25519 key and a certificate from a CA of the
// bench's own), beside the same figures over libp2p between two hex-named hosts in
// the same run. As in bench/federation.bench.ts, B of each pair runs in a child
// process, every homeserver is on durable files, and each round starts once the
// notifier says the remote client's long-poll is waiting:
// 1. a send on A → B's /sync answers, warm, HTTPS and libp2p rounds alternating;
// 2. joining a remote room of 100 members and 1,000 events: the join answered, then
//    the first /sync and the first /messages page, over HTTPS and over libp2p.
import { webRandomBytes } from '../src/crypto/random.ts';
import { httpsFetch } from '../test/support/https-fetch.ts';
import { createTestCa } from '../test/support/test-ca.ts';
import { bigJoin, joinRows, ROUNDS, startChildPeer, wakeupRounds, type ChildPeer, type Reachable } from './federation.bench.ts';
import { startBenchPeer, type BenchDns, type BenchPeer } from './federation-peer.ts';
import { percentile, report, type Row } from './harness.ts';

const ms = (x: number) => `${x.toFixed(1)} ms`;
const p50 = (xs: number[]) => percentile(xs, 50);
const p95 = (xs: number[]) => percentile(xs, 95);

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
    report('federation over HTTPS: send → the remote client\'s /sync', `${h.federated.length} messages each way of carrying them, HTTPS and libp2p rounds alternating; loopback, durable files, B in its own process`, [
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

    // The big joins, one after the other (each builds its own room on its A first).
    const joinHttps = await bigJoin(ha, hb, h.alice);
    const joinLibp2p = await bigJoin(pa, pb, p.alice);
    report('federation over HTTPS: joining a remote room', `100 members and 1,000 messages on A; B's user joins over HTTPS`, joinRows(joinHttps, 'HTTPS'));
    report('  the same over libp2p, same run', 'the baseline', [
      ...joinRows(joinLibp2p, 'libp2p'),
      ['HTTPS / libp2p: the join', joinHttps.joinMs / joinLibp2p.joinMs, '×'],
      ['HTTPS / libp2p: join + first /sync + first /messages page', (joinHttps.joinMs + joinHttps.syncMs + joinHttps.pageMs) / (joinLibp2p.joinMs + joinLibp2p.syncMs + joinLibp2p.pageMs), '×', `${ms(joinHttps.joinMs + joinHttps.syncMs + joinHttps.pageMs)} vs ${ms(joinLibp2p.joinMs + joinLibp2p.syncMs + joinLibp2p.pageMs)}`],
    ]);
  } finally {
    for (const stop of stops.reverse()) await stop().catch((error) => console.error(error));
    clientFetch.close();
    ca.dispose();
  }
}
