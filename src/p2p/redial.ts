/**
 * Redialling the peers a node knew before it stopped (issue 24, peers 2 and 3): the
 * start-up pass over the peer store, and how a failed dial is logged.
 */
import type { PeerId } from '@libp2p/interface';
import type { Multiaddr } from '@multiformats/multiaddr';

/**
 * An address we can dial again later: not through a relay (`/p2p-circuit`, a reservation
 * that goes with the relay or its restart) and not WebRTC (`/webrtc`, signalled over such a
 * reservation). Pages have only those; they come back through discovery, with fresh ones.
 */
export function isDialableAddress(address: Multiaddr | string): boolean {
  const text = address.toString();
  return !text.split('/').some((part) => part === 'p2p-circuit' || part === 'webrtc');
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
