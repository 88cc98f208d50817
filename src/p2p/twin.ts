/**
 * Two copies of one homeserver online at once (the same seed, so the same peer ID and server
 * name, started twice after a copy rather than a move) sign different events as one server and
 * fork its rooms. A peer cannot tell them apart by key, but it can by connection: each node sends,
 * on every connection it has, a hello with a nonce drawn at its start. A peer that holds open
 * connections from one peer ID carrying two nonces has met twins, and says so to each of them;
 * each twin then stops federating (its `onTwin` runs) and asks again every `recheckMs`, resuming
 * once no peer sees the other copy. One instance's several connections (a relayed and a direct
 * one) share its nonce, so they are never taken for twins.
 *
 * Hand-written, small: one JSON message per stream, ended by a newline, one way (hello; the verdict back on a stream of its own), on protocol /hearth/instance/1.
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

type Message = { hello: string } | { twin: false } | { twin: true; address: string };

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

export interface TwinWatch {
  /** The reports that hold now (empty: no twin seen). */
  current(): TwinReport[];
  stop(): Promise<void>;
}

export async function watchForTwins(libp2p: Libp2p, options: { onTwin(report: TwinReport | undefined): void; recheckMs?: number; log?: (message: string, error?: unknown) => void }): Promise<TwinWatch> {
  const nonce = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
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

  /** A connection from `peer`, not yet closed, whose hello carried another nonce than `ours`. */
  const otherCopy = (peer: PeerId, ours: string): { address: string } | undefined =>
    [...announced.values()].find((entry) => entry.peer.equals(peer) && entry.nonce !== ours);

  const changed = () => options.onTwin([...reports.values()].at(-1)?.report);

  /**
   * Says hello on one connection; the witness answers on a stream of its own (a one-way message
   * each way: a reply read back on the asking stream never arrived in a browser over WebSockets).
   */
  async function hello(connection: Connection): Promise<void> {
    if (stopped) return;
    await send(connection, { hello: nonce });
  }

  /** Messages on their way: stop() waits for them, so none writes to the peer store after the node stopped. */
  const inFlight = new Set<Promise<void>>();
  function send(connection: Connection, message: Message): Promise<void> {
    if (stopped) return Promise.resolve();
    const sending = (async () => {
      try {
        await writeMessage(await connection.newStream(INSTANCE_PROTOCOL, { runOnLimitedConnection: true }), message);
      } catch {
        // an older peer without the protocol, or the connection went: nothing to say
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
      // A witness's verdict on us: the answer to our hello, or, unasked, news of another copy just connected.
      if (message && 'twin' in message) return take(connection, message);
      if (!message || !('hello' in message) || typeof message.hello !== 'string') return;
      announced.set(keyOf(connection), { peer: connection.remotePeer, address: connection.remoteAddr.toString(), nonce: message.hello });
      const other = otherCopy(connection.remotePeer, message.hello);
      // Back over the listed connection with that address: the handler's own object may not open streams (see `announced`).
      const listed = (address: string) => libp2p.getConnections(connection.remotePeer).find((c) => c.remoteAddr.toString() === address);
      await send(listed(connection.remoteAddr.toString()) ?? connection, other ? { twin: true, address: other.address } : { twin: false });
      if (other) {
        options.log?.(`two copies of ${connection.remotePeer} are connected, from ${other.address} and ${connection.remoteAddr}: told both`);
        // The other copy hears of it at once, unasked.
        const otherConnection = listed(other.address);
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
      await Promise.allSettled([...inFlight]);
    },
  };
}

/** What a twin is told, and what its federation answers meanwhile. */
export function twinSentence(report: TwinReport): string {
  return `Another copy of this homeserver (the same identity) is online: ${report.witness} sees it connected from ${report.address}. Two copies running at once fork its rooms, so this one does not federate until the other stops. Move, don\u2019t copy: stop or reset the other copy.`;
}
