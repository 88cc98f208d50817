/** Matrix IDs and server names as the page shows them, and the invite links that carry them. */

/** How a server name (64 hex digits) is shown: its start and end, the full name on hover and copy. */
export function shortServerName(name: string): string {
  return name.length > 16 ? `${name.slice(0, 8)}\u2026${name.slice(-4)}` : name;
}

/** `@name:` and the shortened server name: long IDs stay readable in messages. */
export function shortUserId(userId: string): string {
  const colon = userId.indexOf(':');
  return colon < 0 ? userId : `${userId.slice(0, colon + 1)}${shortServerName(userId.slice(colon + 1))}`;
}

export function serverOf(userId: string): string {
  return userId.slice(userId.indexOf(':') + 1);
}

/**
 * Whether `text` is a Matrix user ID by the spec's grammar (appendix §User identifiers, §Server name): `@`, a
 * localpart of printable ASCII without `:` (the historical set, which other servers' users may still have), `:`,
 * and a server name (a DNS name, an IPv4 address or a bracketed IPv6 one, with an optional port); 255 characters
 * at most. Checked before anything is created for it.
 */
export function isMatrixUserId(text: string): boolean {
  if (text.length > 255) return false;
  const match = /^@([\x21-\x39\x3B-\x7E]+):(.+)$/.exec(text);
  return !!match && isServerName(match[2]!);
}

function isServerName(name: string): boolean {
  const match = /^(\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9.-]{1,255})(?::(\d{1,5}))?$/.exec(name);
  if (!match) return false;
  const host = match[1]!;
  if (!host.startsWith('[') && (host.startsWith('.') || host.endsWith('-') || host.startsWith('-') || host.includes('..'))) return false;
  return match[2] === undefined || Number(match[2]) <= 65535;
}

/** A link that opens this page ready to invite `userId` (`#invite=@user:server`); `page` is the page's URL (any path prefix kept). */
export function inviteLink(userId: string, page = location.href): string {
  const url = new URL(page);
  return `${url.origin}${url.pathname}#invite=${userId}`;
}

/** The Matrix ID an invite link carries, if the fragment is one. */
export function invitedUserFromHash(hash: string): string | undefined {
  const match = /^#invite=(.+)$/.exec(hash);
  if (!match) return undefined;
  let userId: string;
  try {
    userId = decodeURIComponent(match[1]!);
  } catch {
    return undefined;
  }
  return /^@[^:\s]+:\S+$/.test(userId) ? userId : undefined;
}

/** What a connection runs over, in words, from its multiaddr (the Peers panel says how each peer is reached). */
export function linkKind(address: string): string {
  if (address.includes('/webrtc-direct')) return 'WebRTC-Direct';
  // The dialler's address reads …/p2p-circuit/webrtc/…, the listener's /webrtc/… alone: the relay only signalled.
  if (address.includes('/webrtc')) return 'WebRTC';
  if (address.includes('/p2p-circuit')) return 'relay';
  if (/\/(wss|tls\/ws)(\/|$)/.test(address)) return 'secure WebSockets';
  if (/\/ws(\/|$)/.test(address)) return 'WebSockets';
  if (address.includes('/tcp/')) return 'TCP';
  return 'libp2p';
}

/** A bootstrap address as a person reads it: its host and port (`peer.example.org:443`), or the address itself. */
export function addressHost(address: string): string {
  const match = /^\/(?:ip4|ip6|dns|dns4|dns6)\/([^/]+)\/(?:tcp|udp)\/(\d+)/.exec(address);
  return match ? `${match[1]}:${match[2]}` : address;
}

/** The peer ID an address ends with (`…/p2p/12D3KooW…`), if it names one. */
export function addressPeerId(address: string): string | undefined {
  return /\/p2p\/([^/]+)$/.exec(address)?.[1];
}
