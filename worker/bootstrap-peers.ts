/**
 * Bootstrap peers the person added in the peers panel (issue 12), beyond the origin's
 * `/hearth-config.json` list. Kept in localStorage, so every tab of the origin sees the
 * same list and every later leader tab dials them at start (page-p2p.ts merges them).
 * Small and dependency-free: the panel loads it in every tab, the libp2p chunk only in the leader.
 */

export const BOOTSTRAP_PEERS_KEY = 'hearth-bootstrap-peers';

/** The added addresses; an unreadable entry means none. */
export function loadAddedBootstrap(): string[] {
  try {
    const value: unknown = JSON.parse(localStorage.getItem(BOOTSTRAP_PEERS_KEY) ?? '[]');
    return Array.isArray(value) ? value.filter((a): a is string => typeof a === 'string') : [];
  } catch {
    return [];
  }
}

export function saveAddedBootstrap(addresses: string[]): void {
  localStorage.setItem(BOOTSTRAP_PEERS_KEY, JSON.stringify([...new Set(addresses)]));
}

/**
 * Checks what a person pasted before anything is kept, with an error that says what to fix.
 * libp2p parses it fully when it dials; this catches what people get wrong.
 */
export function checkBootstrapAddress(text: string): string {
  const address = text.trim();
  const example = '/dns4/peer.example.org/tcp/443/wss/p2p/12D3KooW\u2026';
  if (!address) throw new Error(`Paste a peer address, like ${example}.`);
  if (!address.startsWith('/') || /\s/.test(address)) throw new Error(`That is not a peer address: one starts with / and has no spaces, like ${example}.`);
  if (!/\/p2p\/[1-9A-HJ-NP-Za-km-z]{46,}$|\/p2p\/b[a-z2-7]{50,}$/.test(address)) {
    throw new Error('The address must end with /p2p/ and the peer\u2019s ID (12D3KooW\u2026), so this page knows whom it reaches.');
  }
  const body = address.replace(/\/p2p\/[^/]+$/, '');
  if (!/\/(ws|wss|tls\/ws|webrtc|webrtc-direct|p2p-circuit)(\/|$)/.test(body + '/')) {
    throw new Error('A browser reaches peers only over WebSockets (/ws or /wss), WebRTC or a relay (/p2p-circuit): this address has none of them.');
  }
  return address;
}
