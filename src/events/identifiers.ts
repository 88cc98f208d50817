// Matrix identifier grammar (appendices §Identifier Grammar).

const textEncoder = new TextEncoder();
export const MAX_ID_BYTES = 255;

/** Localparts new accounts may use: lower-case letters, digits and `._=-/+`. */
export const LOCALPART_PATTERN = /^[a-z0-9._=\-/+]+$/;
/** Localparts of existing (historical) user IDs: any printable ASCII except ':'. */
const HISTORICAL_LOCALPART = /^[\x21-\x39\x3b-\x7e]+$/;

export function byteLength(text: string): number {
  return textEncoder.encode(text).length;
}

/** Splits `@local:server` (or any sigil) into its parts; undefined when malformed. */
export function parseId(id: string, sigil: string): { localpart: string; serverName: string } | undefined {
  if (!id.startsWith(sigil) || byteLength(id) > MAX_ID_BYTES) return undefined;
  const colon = id.indexOf(':');
  if (colon < 1) return undefined;
  const serverName = id.slice(colon + 1);
  if (!isValidServerName(serverName)) return undefined;
  return { localpart: id.slice(1, colon), serverName };
}

export function isValidUserId(id: string): boolean {
  const parts = parseId(id, '@');
  return !!parts && parts.localpart.length > 0 && HISTORICAL_LOCALPART.test(parts.localpart);
}

/** A v12+ room ID: `!` and the create event's reference hash, URL-safe unpadded base64 (43 characters), no server. */
const HASHED_ROOM_ID = /^![A-Za-z0-9_-]{43}$/;

/** `!opaque:server` (room versions 1–11), or `!hash` from room version 12 (appendices §Room IDs). */
export function isValidRoomId(id: string): boolean {
  if (HASHED_ROOM_ID.test(id)) return true;
  const parts = parseId(id, '!');
  return !!parts && parts.localpart.length > 0;
}

export function isValidRoomAlias(id: string): boolean {
  const parts = parseId(id, '#');
  return !!parts && parts.localpart.length > 0;
}

/** Server name: hostname (DNS name, IPv4 or [IPv6]) with an optional port. */
export function isValidServerName(name: string): boolean {
  const match = /^(\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9.-]{1,255})(?::(\d{1,5}))?$/.exec(name);
  if (!match) return false;
  return match[2] === undefined || Number(match[2]) <= 65535;
}

export const serverNameOf = (id: string): string => id.slice(id.indexOf(':') + 1);
export const localpartOf = (id: string): string => id.slice(1, id.indexOf(':'));
