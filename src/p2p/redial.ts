/**
 * Redialling the peers a node knew before it stopped (issue 24, peers 2 and 3): the
 * start-up pass over the peer store, and how a failed dial is logged.
 */
import type { Libp2p, PeerId } from '@libp2p/interface';
import type { Multiaddr } from '@multiformats/multiaddr';

/** Our redials in flight at once: libp2p's dial queue (100 in Node, 50 in browsers) must keep room for new peers. */
export const REDIAL_CONCURRENCY = 4;

/**
 * An address we can dial again later: not through a relay (`/p2p-circuit`, a reservation
 * that goes with the relay or its restart) and not WebRTC (`/webrtc`, signalled over such a
 * reservation). Pages have only those; they come back through discovery, with fresh ones.
 */
export function isDialableAddress(address: Multiaddr | string): boolean {
  const text = address.toString();
  return !text.split('/').some((part) => part === 'p2p-circuit' || part === 'webrtc');
}

/**
 * A peer's `/webrtc` addresses, each ending in the peer's own `/p2p/<id>`. The peer store keeps addresses without it,
 * and one learnt so (`…/p2p/<relay>/p2p-circuit/webrtc`) names the relay last: libp2p, dialling it, takes the relay
 * for the peer and hands back the connection to the relay, a "dial" that never fails (across-nats' symmetric-NAT
 * case then tried every 5 s and never said a WebRTC dial failed).
 */
export function webrtcDialAddresses(addresses: Multiaddr[], peerId: string): Multiaddr[] {
  const own = addresses
    .filter((address) => address.getComponents().some((c) => c.name === 'webrtc'))
    .map((address) => (address.getComponents().findLast((c) => c.name === 'p2p')?.value === peerId ? address : address.encapsulate(`/p2p/${peerId}`)));
  return [...new Map(own.map((address) => [address.toString(), address])).values()];
}

/** Failures a dial meets every day: the peer is away, moved, or has no address we can use. */
const EXPECTED_DIAL_ERRORS = new Set([
  'AbortError',
  'AggregateError',
  'ConnectionFailedError',
  'DialDeniedError',
  'DialError',
  'EncryptionFailedError',
  'NoValidAddressesError',
  'TimeoutError',
  'TransportUnavailableError',
  'UnexpectedPeerError',
]);

export function isExpectedDialError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (EXPECTED_DIAL_ERRORS.has(error.name)) return true;
  // A socket error from the OS (ECONNREFUSED, EHOSTUNREACH, ETIMEDOUT…).
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && /^E[A-Z]+$/.test(code);
}

/**
 * Logs a failed dial once per peer: an expected condition as one line (its name and
 * message, no stack), anything else with the error. Later failures for that peer say nothing.
 */
export function dialFailureLogger(log: (message: string, error?: unknown) => void): (what: string, peer: PeerId | string, error: unknown) => void {
  const logged = new Set<string>();
  return (what, peer, error) => {
    const key = peer.toString();
    if (logged.has(`${what} ${key}`)) return;
    logged.add(`${what} ${key}`);
    if (!isExpectedDialError(error)) return log(`${what} ${key}`, error);
    const { name, message } = error as Error;
    log(`${what} ${key}: ${name}: ${message.split('\n')[0]}`);
  };
}

/**
 * The start-up pass over the peer store, before the node starts (so nothing learnt since is
 * lost): forgets the peers that have no dialable address (they would only fill the dial
 * queue, a WebRTC dial for up to 20 s each, and never answer), and returns the ones
 * tagged `tag` that are worth redialling.
 */
export async function forgetUndialablePeers(
  libp2p: Libp2p,
  options: { tag: string; log(message: string, error?: unknown): void },
): Promise<{ forgotten: number; toRedial: PeerId[] }> {
  let peers;
  try {
    peers = await libp2p.peerStore.all();
  } catch (error) {
    options.log('could not read the peer store', error);
    return { forgotten: 0, toRedial: [] };
  }
  const others = peers.filter((peer) => !peer.id.equals(libp2p.peerId));
  const dialable = (peer: (typeof peers)[number]) => peer.addresses.some((a) => isDialableAddress(a.multiaddr));
  const results = await Promise.all(
    others
      .filter((peer) => !dialable(peer))
      .map((peer) =>
        libp2p.peerStore.delete(peer.id).then(
          () => 1,
          (error) => (options.log(`could not forget ${peer.id}`, error), 0),
        ),
      ),
  );
  return { forgotten: results.reduce<number>((a, b) => a + b, 0), toRedial: others.filter((peer) => dialable(peer) && peer.tags.has(options.tag)).map((peer) => peer.id) };
}

/**
 * Redials `peers` in the background, at most REDIAL_CONCURRENCY at a time, so a new
 * peer's dial never waits behind them in libp2p's queue. Resolves when all have been tried.
 */
export async function redialInBackground(libp2p: Libp2p, peers: PeerId[], options: { isStopped(): boolean; onDialFailed(peer: PeerId, error: unknown): void }): Promise<void> {
  const queue = [...peers];
  const worker = async () => {
    for (let peer = queue.shift(); peer !== undefined; peer = queue.shift()) {
      if (options.isStopped()) return;
      if (libp2p.getConnections(peer).length > 0) continue;
      await libp2p.dial(peer).catch((error: unknown) => {
        if (!options.isStopped()) options.onDialFailed(peer, error);
      });
    }
  };
  await Promise.all(Array.from({ length: REDIAL_CONCURRENCY }, worker));
}
