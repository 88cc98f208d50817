// A Hearth peer for the federation bench: a homeserver on durable files with its
// client API over HTTP on 127.0.0.1, federating over a real libp2p node (TCP on
// 127.0.0.1 only). `startBenchPeer` runs one in this process; run as a child
// (`federation-peer.ts child`), it runs one there and takes commands over IPC,
// so the two servers of the bench do not share a thread, as two machines do not.
// Given `dns`, the peer is a DNS-named host instead (`localhost:PORT`, its own ed25519
// key), serving both APIs over HTTPS as `serve --server-name` does and reaching
// other servers over HTTPS with a test CA trusted; its libp2p node then idles.
import '../src/node/polyfills.ts';
import { tcp } from '@libp2p/tcp';
import { defaultEd25519Backend } from '../src/crypto/ed25519.ts';
import { webRandomBytes } from '../src/crypto/random.ts';
import { memorySigningKeyStorage, ServerSigningKeys } from '../src/federation/signing-keys.ts';
import type { FederationTransport } from '../src/federation/transport.ts';
import { createHomeserver, homeserverSchemas, type Homeserver } from '../src/homeserver.ts';
import { startHttpServer, type RunningHttpServer } from '../src/node/http-server.ts';
import { createHttpsFederationTransport } from '../src/node/https-federation.ts';
import { routeByApi, startHttpsServer } from '../src/node/https-server.ts';
import { createP2PNode, type P2PNode } from '../src/p2p/node.ts';
import type { Database } from '../src/storage/database.ts';
import { openBenchDatabase } from './bench-database.ts';

/** Time spent per federation request, outbound (round trip) or inbound (in the homeserver), by endpoint. */
export type Timings = Record<string, number[]>;

/** What a DNS-named peer needs: its certificate and key (PEM), and the CA the other's is signed by. */
export interface BenchDns {
  cert: string;
  key: string;
  ca: string;
}

export interface BenchPeer {
  url: string;
  homeserver: Homeserver;
  p2p: P2PNode;
  db: Database;
  /** Outbound federation requests, request handed to libp2p → response read. */
  outbound: Timings;
  /** Inbound federation requests, request in → response out of the homeserver. */
  inbound: Timings;
  /** Bytes of the outbound requests' response bodies, by endpoint. */
  responseBytes: Timings;
  /** When each request started, on the shared clock: outbound as handed to libp2p, inbound as it reached the homeserver. */
  outboundAt: Timings;
  inboundAt: Timings;
  /** When the sync notifier was told of new stream positions (something became durable), on the shared clock. */
  notifiedAt: number[];
  /** Holds every outbound federation request until `release`, so the outgoing queues fill up. */
  hold(): void;
  release(): void;
  close(): Promise<void>;
}

/** A clock both processes share (to a fraction of a millisecond): the wall clock at performance's precision. */
export const sharedClock = () => performance.timeOrigin + performance.now();

/** `/_matrix/federation/v1/send/123-456` → `PUT send`. */
const endpointOf = (request: Request) => `${request.method} ${new URL(request.url).pathname.split('/')[4] ?? '?'}`;

const record = (timings: Timings, key: string, ms: number) => (timings[key] ??= []).push(ms);

export async function startBenchPeer(options: { seed: Uint8Array; bootstrap?: string[]; dns?: BenchDns; dataDir?: string }): Promise<BenchPeer> {
  const { db, close: closeDb } = await openBenchDatabase(homeserverSchemas, options.dataDir);
  const outbound: Timings = {};
  const inbound: Timings = {};
  const responseBytes: Timings = {};
  const outboundAt: Timings = {};
  const inboundAt: Timings = {};
  let held: { promise: Promise<void>; release(): void } | undefined;
  let homeserver: Homeserver | undefined;
  const federationIn = async (request: Request, remote: string | undefined) => {
    const started = performance.now();
    const key = endpointOf(request);
    record(inboundAt, key, sharedClock());
    const response = await homeserver!.federation.fetch(request, remote);
    record(inbound, key, performance.now() - started);
    return response;
  };
  // A DNS-named peer's HTTPS port is taken first: its server name names the port. Requests wait for the homeserver.
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const httpsServer = options.dns
    ? await startHttpsServer(routeByApi({ client: async (request) => (await ready, homeserver!.fetch(request)), federation: async (request, remote) => (await ready, federationIn(request, remote)) }), { cert: options.dns.cert, key: options.dns.key })
    : undefined;
  const https = options.dns ? createHttpsFederationTransport({ extraCa: [options.dns.ca] }) : undefined;
  const p2p = await createP2PNode({
    seed: options.seed,
    transports: [tcp()],
    listen: ['/ip4/127.0.0.1/tcp/0'],
    bootstrap: options.bootstrap,
    handler: federationIn,
    onPeerConnected: (name) => homeserver?.federation.peerConnected(name),
    log: (message, error) => console.error(`[p2p] ${message}`, error ?? ''),
  });
  const transport: FederationTransport = {
    async send(destination, request, sendOptions) {
      while (held) await held.promise;
      const started = performance.now();
      const key = endpointOf(request);
      record(outboundAt, key, sharedClock());
      const response = await (https ?? p2p.transport).send(destination, request, sendOptions);
      record(outbound, key, performance.now() - started);
      // A chunked answer (HTTPS) declares no length: count the send_join answer's bytes, the one the join report shows.
      const length = response.headers.get('content-length') ?? (key === 'PUT send_join' ? (await response.clone().arrayBuffer()).byteLength : NaN);
      record(responseBytes, key, Number(length));
      return response;
    },
  };
  homeserver = await createHomeserver({
    database: db,
    seed: options.seed,
    rateLimits: false,
    passwordIterations: 1000,
    log: (message, error) => console.error(`[homeserver] ${message}`, error ?? ''),
    federation: { transport, backoff: { initialMs: 100, maxMs: 1000, refusedMs: 500 } },
    ...(httpsServer
      ? { dnsIdentity: { serverName: `localhost:${httpsServer.port}`, signingKeys: await ServerSigningKeys.open({ storage: memorySigningKeyStorage(), ed25519: await defaultEd25519Backend(), random: webRandomBytes, now: Date.now }) } }
      : {}),
  });
  // Seen from outside src/: the instance's method, which the core's notify closure calls.
  const notifiedAt: number[] = [];
  const sync = homeserver.services.sync;
  const notify = sync.notify.bind(sync);
  sync.notify = (change) => {
    if (change.position > 0) notifiedAt.push(sharedClock());
    notify(change);
  };
  await homeserver.start();
  markReady();
  const http: RunningHttpServer = httpsServer ?? (await startHttpServer(homeserver.fetch));
  const hs = homeserver;
  return {
    // The certificate is for localhost, the name the other server and the clients use.
    url: httpsServer ? `https://localhost:${httpsServer.port}` : http.url,
    homeserver: hs,
    p2p,
    db,
    outbound,
    inbound,
    responseBytes,
    outboundAt,
    inboundAt,
    notifiedAt,
    hold() {
      if (held) return;
      let release!: () => void;
      const promise = new Promise<void>((resolve) => (release = resolve));
      held = { promise, release };
    },
    release() {
      const h = held;
      held = undefined;
      h?.release();
    },
    close: async () => {
      await http.close();
      https?.close();
      await p2p.stop();
      await hs.close();
      await closeDb();
    },
  };
}

/** Events of a type the room engine accepted (not outliers, rejected or soft-failed). */
export async function acceptedEvents(peer: BenchPeer, roomId: string, type: string): Promise<number> {
  const row = await peer.db.get<{ n: number }>(
    'SELECT COUNT(*) AS n FROM events WHERE room_id = ? AND type = ? AND outlier = 0 AND rejected IS NULL AND soft_failed = 0',
    [roomId, type],
  );
  return row?.n ?? 0;
}

/** Who waits on each peer's news: the sync notifier is wrapped once per peer, so waits can overlap. */
const newsWaiters = new WeakMap<BenchPeer, Set<() => void>>();

/** Resolves once the room holds `count` accepted events of the type: counted again each time the peer's sync notifier is told of news. */
export function untilAccepted(peer: BenchPeer, roomId: string, type: string, count: number): Promise<void> {
  let waiters = newsWaiters.get(peer);
  if (!waiters) {
    const all = new Set<() => void>();
    const sync = peer.homeserver.services.sync;
    const notify = sync.notify.bind(sync);
    sync.notify = (change) => {
      notify(change);
      for (const waiter of all) waiter();
    };
    newsWaiters.set(peer, (waiters = all));
  }
  const registered = waiters;
  return new Promise((resolve, reject) => {
    let checking = false;
    let again = false;
    const check = async (): Promise<void> => {
      if (checking) return void (again = true);
      checking = true;
      try {
        do {
          again = false;
          if ((await acceptedEvents(peer, roomId, type)) >= count) {
            registered.delete(wake);
            return resolve();
          }
        } while (again);
      } catch (error) {
        registered.delete(wake);
        reject(error as Error);
      } finally {
        checking = false;
      }
    };
    const wake = () => void check();
    registered.add(wake);
    wake();
  });
}

/** One reading of a child peer's memory, in bytes (`external` includes ArrayBuffers and WASM memory). */
export interface MemorySample { at: number; rss: number; heapUsed: number; external: number }

/** Commands the bench sends a child peer, and what each answers. */
export type PeerCommand =
  | { cmd: 'start'; seed: number[]; bootstrap: string[]; dns?: BenchDns; dataDir?: string }
  | { cmd: 'count'; roomId: string; type: string }
  /** Answers once the room holds `count` accepted events of the type (checked whenever something becomes durable). */
  | { cmd: 'untilCount'; roomId: string; type: string; count: number }
  /** This process's resident memory now and at its peak, in bytes, and the CPU time it has used (user + system), in ms. */
  | { cmd: 'memory' }
  /** The heap's live size after a full GC, in bytes (0 unless started with HEARTH_BENCH_LIVE_HEAP); a heap snapshot written to `snapshot` if given. */
  | { cmd: 'liveHeap'; snapshot?: string }
  /** Samples memory every 10 ms from `start` until `stop`, which answers the samples (what a peak is made of). */
  | { cmd: 'memoryTrace'; action: 'start' | 'stop' }
  | { cmd: 'timings' }
  /** Answers once `count` /sync long-polls are waiting on this peer. */
  | { cmd: 'untilWaiting'; count: number }
  | { cmd: 'stop' };

if (process.argv[2] === 'child' && process.send) {
  let peer: BenchPeer | undefined;
  let trace: { timer: NodeJS.Timeout; samples: MemorySample[] } | undefined;
  process.on('message', async (message: { id: number } & PeerCommand) => {
    const reply = (result: unknown) => process.send!({ id: message.id, result });
    try {
      switch (message.cmd) {
        case 'start':
          peer = await startBenchPeer({ seed: Uint8Array.from(message.seed), bootstrap: message.bootstrap, ...(message.dns ? { dns: message.dns } : {}), ...(message.dataDir ? { dataDir: message.dataDir } : {}) });
          reply({ url: peer.url, serverName: peer.homeserver.serverName, multiaddrs: peer.p2p.multiaddrs() });
          break;
        case 'count':
          reply(await acceptedEvents(peer!, message.roomId, message.type));
          break;
        case 'untilCount':
          await untilAccepted(peer!, message.roomId, message.type, message.count);
          reply(true);
          break;
        case 'memory': {
          const cpu = process.cpuUsage();
          reply({ rss: process.memoryUsage().rss, peakRss: process.resourceUsage().maxRSS * 1024, cpuMs: (cpu.user + cpu.system) / 1000 });
          break;
        }
        case 'liveHeap': {
          const gc = (globalThis as { gc?: () => void }).gc;
          if (!gc) {
            reply(0);
            break;
          }
          gc();
          if (message.snapshot) (await import('node:v8')).writeHeapSnapshot(message.snapshot);
          reply(process.memoryUsage().heapUsed);
          break;
        }
        case 'memoryTrace':
          if (message.action === 'start') {
            const samples: MemorySample[] = [];
            const sample = () => {
              const m = process.memoryUsage();
              samples.push({ at: Date.now(), rss: m.rss, heapUsed: m.heapUsed, external: m.external });
            };
            sample();
            trace = { timer: setInterval(sample, 10), samples };
            reply(true);
          } else {
            clearInterval(trace?.timer);
            reply(trace?.samples ?? []);
            trace = undefined;
          }
          break;
        case 'untilWaiting':
          await peer!.homeserver.services.sync.notifier.untilWaiting(message.count);
          reply(true);
          break;
        case 'timings': {
          const all = [peer!.inbound, peer!.outbound, peer!.responseBytes, peer!.inboundAt, peer!.outboundAt];
          const [inbound, outbound, responseBytes, inboundAt, outboundAt] = all.map((t) => ({ ...t }));
          for (const t of all) for (const key of Object.keys(t)) t[key] = [];
          const timings = { inbound, outbound, responseBytes, inboundAt, outboundAt, notifiedAt: peer!.notifiedAt.splice(0) };
          reply(timings);
          break;
        }
        case 'stop':
          await peer?.close();
          reply(true);
          process.disconnect();
          break;
      }
    } catch (error) {
      process.send!({ id: message.id, error: error instanceof Error ? error.stack ?? error.message : String(error) });
    }
  });
}
