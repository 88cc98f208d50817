/**
 * Server ACLs (`m.room.server_acl`): which servers may take part in a room, applied to
 * the servers that make requests (client-server §Server Access Control Lists). Hand-written:
 * the rule is a few lines of the spec, and glob matching is the appendix's two wildcards.
 */

import type { Rooms } from '../rooms/rooms.ts';

export interface ServerAcl {
  allow?: unknown;
  deny?: unknown;
  allow_ip_literals?: unknown;
}

/** The appendix's glob-style matching: `*` any run of characters, `?` exactly one; case-insensitive, the whole name. */
function globToRegExp(glob: string): RegExp {
  const body = [...glob].map((ch) => (ch === '*' ? '.*' : ch === '?' ? '.' : ch.replace(/[.+^${}()|[\]\\/-]/g, '\\$&'))).join('');
  return new RegExp(`^${body}$`, 'is');
}

/** The server name without its port: ACLs never consider ports. */
function hostOf(serverName: string): string {
  if (serverName.startsWith('[')) return serverName.slice(0, serverName.indexOf(']') + 1);
  const colon = serverName.lastIndexOf(':');
  return colon === -1 ? serverName : serverName.slice(0, colon);
}

const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;
const isIpLiteral = (host: string) => IPV4.test(host) || host.startsWith('[');

const patterns = (value: unknown): string[] => (Array.isArray(value) ? value.filter((p): p is string => typeof p === 'string') : []);

/** Whether the ACL's content lets a server take part; no ACL event at all allows everyone. */
export function serverAllowedByAcl(acl: ServerAcl | undefined, serverName: string): boolean {
  if (!acl) return true;
  const host = hostOf(serverName);
  // `allow_ip_literals` defaults to true when missing or not a boolean.
  if (acl.allow_ip_literals === false && isIpLiteral(host)) return false;
  if (patterns(acl.deny).some((glob) => globToRegExp(glob).test(host))) return false;
  return patterns(acl.allow).some((glob) => globToRegExp(glob).test(host));
}

/** Whether a server may take part in a room now, by the room's current `m.room.server_acl`. */
export async function serverAllowedInRoom(rooms: Pick<Rooms, 'currentStateEvent'>, roomId: string, serverName: string): Promise<boolean> {
  const acl = await rooms.currentStateEvent(roomId, 'm.room.server_acl', '');
  return serverAllowedByAcl(acl?.event.content as ServerAcl | undefined, serverName);
}
