/**
 * Two copies of one homeserver online at once (the same seed, so the same peer ID and server
 * name, started twice after a copy rather than a move) sign different events as one server and
 * fork its rooms. A peer cannot tell them apart by key, but it can by connection: each node sends,
 * on every connection it has, a hello with a nonce drawn at its start. A peer that holds open
 * connections from one peer ID carrying two nonces may have met twins. It may also hold a dead
 * node's connection beside its successor's: a reloaded tab's, or a restarted host's, lingers until
 * the transport notices, and that node's nonce with it. So before its verdict the witness asks the
 * other connection for its nonce again (a probe with a token of its own, answered with the token
 * and the nonce): only a node still running answers, and only a live node with another nonce is a
 * twin. Then the witness says so to each of them; each twin stops federating (its `onTwin` runs)
 * and asks again every `recheckMs`, resuming once no peer sees the other copy. One instance's
 * several connections (a relayed and a direct one) share its nonce, so they are never taken for twins.
 *
 * Hand-written, small: one JSON message per stream, ended by a newline, one way (hello, probe and its
 * answer, the verdict: each on a stream of its own), on protocol /hearth/instance/1.
 */
import type { Connection, Libp2p, PeerId, Stream } from '@libp2p/interface';

export const INSTANCE_PROTOCOL = '/hearth/instance/1';
const MAX_MESSAGE = 4096;
const NEWLINE = 0x0a;

/** What a node is told: another connection with our peer ID but another nonce, from `address`. */
export interface TwinReport {
  /** The peer that sees both copies. */
  witness: string;
  /** Where the other copy is connected to it from. */
  address: string;
}

type Message =
  | { hello: string }
  | { twin: false }
  | { twin: true; address: string }
  /** Witness → node: are you still running? */
  | { probe: string }
  /** Node → witness: yes, this is my nonce. */
  | { alive: string; hello: string };

/** How long a witness waits for a probe's answer before taking the connection for a dead node's. */
const PROBE_MS = 5_000;
/** How long opening a stream for one message may take: a dead node's connection may never answer, and stop() waits for what is in flight. */
const SEND_MS = 10_000;

/**
 * One message: JSON and a newline. The reader stops at the newline rather than at the stream's end: a
 * browser's half-close over WebSockets (its FIN) reached a Node peer only when the connection closed, so a
 * read to the end sat there for as long as the connection lived, and the verdict went out too late.
 */
async function readMessage(stream: Stream): Promise<Message | undefined> {
  const parts: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const bytes = chunk.subarray();
    const end = bytes.indexOf(NEWLINE);
    parts.push(end === -1 ? bytes : bytes.subarray(0, end));
    size += parts.at(-1)!.byteLength;
    if (size > MAX_MESSAGE) return undefined;
    if (end !== -1) break;
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const part of parts) all.set(part, (at += part.byteLength) - part.byteLength);
  try {
    return JSON.parse(new TextDecoder().decode(all)) as Message;
  } catch {
    return undefined;
  }
}

async function writeMessage(stream: Stream, message: Message): Promise<void> {
  stream.send(new TextEncoder().encode(`${JSON.stringify(message)}\n`));
  await stream.close();
}

const randomHex = () => Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');

export interface TwinWatch {
  /** The reports that hold now (empty: no twin seen). */
  current(): TwinReport[];
  stop(): Promise<void>;
}

export async function watchForTwins(
  libp2p: Libp2p,
  options: { onTwin(report: TwinReport | undefined): void; recheckMs?: number; probeMs?: number; log?: (message: string, error?: unknown) => void },
): Promise<TwinWatch> {
  const nonce = randomHex();
  const recheckMs = options.recheckMs ?? 30_000;
  /**
   * Witness side: the nonce announced over each connection, keyed by peer and remote address. (Not by
   * connection ID, nor checked by a connection's own status: a stream can arrive before its connection is
   * listed, under another ID than the listed one, and over a browser's WebSockets live connections read 'closed'.)
   */
  const announced = new Map<string, { peer: PeerId; address: string; nonce: string }>();
  const keyOf = (connection: Connection) => `${connection.remotePeer}|${connection.remoteAddr}`;
  /** Our side: which witnesses see a twin of ours, and the timer that asks them again. */
  const reports = new Map<string, { report: TwinReport; timer: ReturnType<typeof setTimeout> }>();
  let stopped = false;

  const probeMs = options.probeMs ?? PROBE_MS;
  /** Probes awaiting their answer, by token: each resolves with the nonce the node answered (undefined: none came). */
  const probes = new Map<string, (nonce: string | undefined) => void>();
  const listed = (peer: PeerId, address: string) => libp2p.getConnections(peer).find((c) => c.remoteAddr.toString() === address);

  /** Whether a node still runs behind this connection, and with which nonce. */
  async function probe(connection: Connection): Promise<string | undefined> {
    const token = randomHex();
    const answered = new Promise<string | undefined>((resolve) => {
      const timer = setTimeout(() => resolve(undefined), probeMs);
      probes.set(token, (nonce) => (clearTimeout(timer), resolve(nonce)));
    });
    // Not sent (the connection is gone, or no one handles the protocol there any more): no answer will come.
    if (!(await send(connection, { probe: token }))) probes.get(token)?.(undefined);
    const nonce = await answered;
    probes.delete(token);
    return nonce;
  }

  /**
   * Another live copy of `peer` than the one whose hello carried `ours`: a connection from that peer
   * announcing another nonce, whose node answers a probe with that other nonce still. A connection that
   * is gone, or whose node does not answer, was a dead node's: forgotten (a live one says hello again).
   */
  async function otherCopy(peer: PeerId, ours: string): Promise<{ address: string } | undefined> {
    for (const [key, entry] of announced) {
      if (!entry.peer.equals(peer) || entry.nonce === ours) continue;
      const connection = listed(peer, entry.address);
      const answer = connection ? await probe(connection) : undefined;
      if (answer !== undefined && answer !== ours) return entry;
      options.log?.(`a connection of ${peer} from ${entry.address} did not answer: a stopped node's, not another copy`);
      if (announced.get(key) === entry) announced.delete(key);
    }
    return undefined;
  }

  const changed = () => options.onTwin([...reports.values()].at(-1)?.report);

  /**
   * Says hello on one connection; the witness answers on a stream of its own (a one-way message
   * each way: a reply read back on the asking stream never arrived in a browser over WebSockets).
   */
  async function hello(connection: Connection): Promise<void> {
    if (stopped) return;
    void (await send(connection, { hello: nonce }));
  }

  /** Messages on their way: stop() waits for them, so none writes to the peer store after the node stopped. */
  const inFlight = new Set<Promise<boolean>>();
  /** Sends one message on a stream of its own; whether it went out. */
  function send(connection: Connection, message: Message): Promise<boolean> {
    if (stopped) return Promise.resolve(false);
    const sending = (async () => {
      try {
        await writeMessage(await connection.newStream(INSTANCE_PROTOCOL, { runOnLimitedConnection: true, signal: AbortSignal.timeout(SEND_MS) }), message);
        return true;
      } catch {
        // an older peer without the protocol, or the connection went: nothing to say
        return false;
      }
    })();
    inFlight.add(sending);
    void sending.finally(() => inFlight.delete(sending));
    return sending;
  }

  /** A witness's word on us: a twin (hold off federating, ask again later), or none (any earlier report is over). */
  function take(connection: Connection, answer: Message | undefined): void {
    if (!answer || !('twin' in answer)) return;
    const witness = connection.remotePeer.toString();
    const held = reports.get(witness);
    if (answer.twin) {
      clearTimeout(held?.timer);
      const timer = setTimeout(() => void hello(libp2p.getConnections(connection.remotePeer).find((c) => c.status === 'open') ?? connection), recheckMs);
      reports.set(witness, { report: { witness, address: answer.address }, timer });
      if (!held) changed();
    } else if (held) {
      clearTimeout(held.timer);
      reports.delete(witness);
      changed();
    }
  }

  await libp2p.handle(
    INSTANCE_PROTOCOL,
    async (stream, connection) => {
      if (stopped) return stream.abort(new Error('stopping'));
      const message = await readMessage(stream).catch(() => undefined);
      // Not awaited: our side is done, and the peer's end of the stream may come late (see readMessage).
      void stream.close().catch(() => undefined);
      if (!message) return;
      // Back over the listed connection with that address: the handler's own object may not open streams (see `announced`).
      const back = () => listed(connection.remotePeer, connection.remoteAddr.toString()) ?? connection;
      // A witness's verdict on us: the answer to our hello, or, unasked, news of another copy just connected.
      if ('twin' in message) return take(connection, message);
      // A witness asks whether we still run: we do.
      if ('probe' in message && typeof message.probe === 'string') return void (await send(back(), { alive: message.probe, hello: nonce }));
      // The answer to one of our probes.
      if ('alive' in message && typeof message.alive === 'string') return probes.get(message.alive)?.(typeof message.hello === 'string' ? message.hello : undefined);
      if (!('hello' in message) || typeof message.hello !== 'string') return;
      announced.set(keyOf(connection), { peer: connection.remotePeer, address: connection.remoteAddr.toString(), nonce: message.hello });
      const other = await otherCopy(connection.remotePeer, message.hello);
      await send(back(), other ? { twin: true, address: other.address } : { twin: false });
      if (other) {
        options.log?.(`two copies of ${connection.remotePeer} are running, connected from ${other.address} and ${connection.remoteAddr}: told both`);
        // The other copy hears of it at once, unasked.
        const otherConnection = listed(connection.remotePeer, other.address);
        if (otherConnection) await send(otherConnection, { twin: true, address: connection.remoteAddr.toString() });
      }
    },
    { runOnLimitedConnection: true },
  );
  const onOpen = ({ detail: connection }: CustomEvent<Connection>) => void hello(connection);
  const onClose = ({ detail: connection }: CustomEvent<Connection>) => void announced.delete(keyOf(connection));
  libp2p.addEventListener('connection:open', onOpen);
  libp2p.addEventListener('connection:close', onClose);
  return {
    current: () => [...reports.values()].map((r) => r.report),
    stop: async () => {
      stopped = true;
      libp2p.removeEventListener('connection:open', onOpen);
      libp2p.removeEventListener('connection:close', onClose);
      for (const { timer } of reports.values()) clearTimeout(timer);
      for (const answer of probes.values()) answer(undefined);
      await Promise.allSettled([...inFlight]);
    },
  };
}

/** What a twin is told, and what its federation answers meanwhile. */
export function twinSentence(report: TwinReport): string {
  return `Another copy of this homeserver (the same identity) is online: ${report.witness} sees it connected from ${report.address}. Two copies running at once fork its rooms, so this one does not federate until the other stops. Move, don\u2019t copy: stop or reset the other copy.`;
}
