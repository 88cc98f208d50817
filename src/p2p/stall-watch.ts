/**
 * When the network comes back (issue 40). A network that drops for a while tells no one: the TCP
 * connection stays "open", a federation request on it waits for its answer (up to its 30 s deadline),
 * and once the network is back TCP resends on its own schedule, which after a long silence is many
 * seconds apart. The queue behind the request waits for all of that. Measured between two hosts in
 * network namespaces (bench/reconnect.bench.ts): whole 1.2–5.8 s after the link healed, the request
 * in flight at the cut holding up everything after it.
 *
 * So a connection with a request outstanding for longer than `stallMs` is asked whether it still
 * carries anything: a stream of a protocol of ours is opened on it (`negotiateFully`: open once the
 * other side has answered the protocol's name, whichever answer it gives; no echo, which browsers over
 * WebSockets did not carry back, see twin.ts). No answer within `probeMs`: the connection is stalled;
 * it is closed (its requests fail, and their queues know to retry) and the peer is dialled afresh every
 * `redialMs` until a dial succeeds, for at most `redialForMs`. That new connection is what wakes the
 * peer's queues (node.ts: every `connection:open`), so they flush within a redial of the heal.
 */
import type { Connection, PeerId } from '@libp2p/interface';
import type { Libp2p } from 'libp2p';

export const ALIVE_PROTOCOL = '/hearth/alive/1';

export interface StallWatchOptions {
  /** A request outstanding this long on a connection gets the connection probed (default 3 s). */
  stallMs?: number;
  /** How long the probe waits for the other side to answer (default 2 s). */
  probeMs?: number;
  /** How often a peer whose connection stalled is dialled again (default 0.5 s: a dial that fails costs one packet, or none without a route). */
  redialMs?: number;
  /** For how long (default 10 min; then the peer's queue and libp2p's own redials carry on). */
  redialForMs?: number;
  log?(message: string, error?: unknown): void;
}

export interface StallWatch {
  /** A request starts on `connection`; call the result when it has its answer (or failed). */
  track(connection: Connection): () => void;
  stop(): void;
}

export async function watchForStalls(libp2p: Libp2p, options: StallWatchOptions = {}): Promise<StallWatch> {
  const stallMs = options.stallMs ?? 3_000;
  const probeMs = options.probeMs ?? 2_000;
  const redialMs = options.redialMs ?? 500;
  const redialForMs = options.redialForMs ?? 10 * 60_000;
  const log = options.log ?? (() => {});
  let stopped = false;
  // The answer is the protocol's acceptance itself: nothing is read or written.
  await libp2p.handle(ALIVE_PROTOCOL, (stream) => void stream.close().catch(() => stream.abort(new Error('closing'))), { runOnLimitedConnection: true });

  /** The requests outstanding on each connection, by when each started. */
  const outstanding = new Map<Connection, Set<{ start: number }>>();
  const probing = new Set<Connection>();
  const redialing = new Set<string>();
  const timers = new Set<ReturnType<typeof setTimeout>>();

  async function isAlive(connection: Connection): Promise<boolean> {
    try {
      const stream = await connection.newStream(ALIVE_PROTOCOL, { signal: AbortSignal.timeout(probeMs), runOnLimitedConnection: true, negotiateFully: true });
      stream.abort(new Error('probe done'));
      return true;
    } catch (error) {
      // Any answer is life (an older peer without the protocol says so); only silence, or a connection gone, is not.
      const name = (error as Error).name;
      return !(name === 'TimeoutError' || name === 'AbortError' || connection.status !== 'open');
    }
  }

  function redial(peer: PeerId): void {
    const key = peer.toString();
    if (redialing.has(key)) return;
    redialing.add(key);
    const until = Date.now() + redialForMs;
    const attempt = async () => {
      const started = Date.now();
      if (stopped || Date.now() > until || libp2p.getConnections(peer).some((c) => c.status === 'open')) return void redialing.delete(key);
      try {
        await libp2p.dial(peer, { signal: AbortSignal.timeout(Math.max(redialMs, 2_000)) });
        redialing.delete(key);
      } catch {
        const timer = setTimeout(() => {
          timers.delete(timer);
          void attempt();
        }, Math.max(0, redialMs - (Date.now() - started)));
        timers.add(timer);
      }
    };
    void attempt();
  }

  async function probe(connection: Connection): Promise<void> {
    probing.add(connection);
    try {
      if (await isAlive(connection)) return;
      if (stopped || connection.status !== 'open') return;
      log(`no answer from ${connection.remotePeer} over ${connection.remoteAddr} for ${stallMs + probeMs} ms: closing that connection and dialling again`);
      connection.abort(new Error('the connection carried nothing for a while: the network dropped'));
      redial(connection.remotePeer);
    } finally {
      probing.delete(connection);
    }
  }

  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [connection, starts] of outstanding) {
      if (connection.status !== 'open') {
        outstanding.delete(connection);
        continue;
      }
      if (probing.has(connection) || starts.size === 0) continue;
      if ([...starts].some(({ start }) => now - start >= stallMs)) void probe(connection);
    }
  }, Math.min(stallMs, 1_000));

  return {
    track(connection) {
      const request = { start: Date.now() };
      const starts = outstanding.get(connection) ?? new Set<{ start: number }>();
      starts.add(request);
      outstanding.set(connection, starts);
      return () => {
        starts.delete(request);
        if (starts.size === 0 && outstanding.get(connection) === starts) outstanding.delete(connection);
      };
    },
    stop() {
      stopped = true;
      clearInterval(sweep);
      for (const timer of timers) clearTimeout(timer);
      void libp2p.unhandle(ALIVE_PROTOCOL).catch(() => {});
    },
  };
}
