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
