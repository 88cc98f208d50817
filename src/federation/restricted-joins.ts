/**
 * Joins to a room whose join rule is `restricted` (v8+) or `knock_restricted` (v10+): a user who is
 * neither invited nor joined may join when they are joined to one of the rooms the rule's `allow`
 * names, and a member who may invite vouches for the join (`join_authorised_via_users_server`),
 * their server signing it (client-server §Restricted rooms; server-server §Restricted rooms). This
 * server vouches for joins in rooms it is in: its own users', and, as the resident a joining server
 * asked, other servers' (make_join names one of our users, send_join checks again and countersigns).
 * Whether the joiner is in an allowed room is read from our own copies of those rooms.
 */
import { serverNameOf } from '../events/identifiers.ts';
import { AuthError } from '../events/power-levels.ts';
import { currentPowerLevels } from '../rooms/room-policy.ts';
import type { Rooms } from '../rooms/rooms.ts';
import { CodedError } from '../util/coded-error.ts';

/** A restricted join we refuse, or cannot vouch for, with its status and errcode. */
export class RestrictedJoinError extends CodedError {
  override name = 'RestrictedJoinError';
}

export type RestrictedJoinRooms = Pick<Rooms, 'serverName' | 'roomVersion' | 'currentStateEvent' | 'membership' | 'members' | 'joinedServers'>;

/** The join rule's `allow` rooms when the room's join rule is a restricted one its version knows; undefined when it is not. */
async function allowedRooms(rooms: RestrictedJoinRooms, roomId: string): Promise<string[] | undefined> {
  const version = await rooms.roomVersion(roomId);
  if (!version?.restrictedJoins) return undefined;
  const content = (await rooms.currentStateEvent(roomId, 'm.room.join_rules', ''))?.event.content;
  const rule = content?.['join_rule'];
  if (rule !== 'restricted' && !(version.knockRestricted && rule === 'knock_restricted')) return undefined;
  const allow = Array.isArray(content?.['allow']) ? content['allow'] : [];
  return allow.flatMap((entry) => {
    const condition = entry as { type?: unknown; room_id?: unknown } | null;
    return typeof condition === 'object' && condition !== null && condition.type === 'm.room_membership' && typeof condition.room_id === 'string' ? [condition.room_id] : [];
  });
}

/**
 * Whether `userId` needs vouching for to join, and may be: false when the room is not restricted
 * or they are invited or joined already (the auth rules let them in as they are), true when they
 * are joined to one of the allowed rooms. Throws 403 when they are in none of them, as far as we
 * know; 400 `M_UNABLE_TO_AUTHORISE_JOIN` for another server's user when some allowed room is one
 * we are not in, so that their server may ask another (as Synapse answers).
 */
export async function needsVouching(rooms: RestrictedJoinRooms, roomId: string, userId: string): Promise<boolean> {
  const allowed = await allowedRooms(rooms, roomId);
  if (allowed === undefined) return false;
  const current = await rooms.membership(roomId, userId);
  if (current === 'join' || current === 'invite') return false;
  for (const room of allowed) if ((await rooms.membership(room, userId)) === 'join') return true;
  if (serverNameOf(userId) !== rooms.serverName) {
    for (const room of allowed) {
      if (!(await rooms.joinedServers(room)).includes(rooms.serverName)) {
        throw new RestrictedJoinError(400, 'M_UNABLE_TO_AUTHORISE_JOIN', `${rooms.serverName} cannot tell whether ${userId} is in ${room}`);
      }
    }
  }
  throw new RestrictedJoinError(403, 'M_FORBIDDEN', `${userId} is in none of the rooms that let members join ${roomId}`);
}

/**
 * The user of ours who vouches for a join: a local member of the room whose level reaches the
 * invite level, the highest first (then by ID, so the choice is stable). Throws 400
 * `M_UNABLE_TO_GRANT_JOIN` when we have none.
 */
export async function localAuthoriser(rooms: RestrictedJoinRooms, roomId: string): Promise<string> {
  const levels = await currentPowerLevels(rooms, roomId);
  const level = (userId: string) => {
    try {
      return levels.user(userId);
    } catch (error) {
      if (error instanceof AuthError) return -Infinity; // a malformed level counts as none
      throw error;
    }
  };
  let needed: number;
  try {
    needed = levels.named('invite');
  } catch (error) {
    if (!(error instanceof AuthError)) throw error;
    needed = Infinity;
  }
  const candidates = (await rooms.members(roomId, 'join'))
    .filter((userId) => serverNameOf(userId) === rooms.serverName && level(userId) >= needed)
    .sort((a, b) => level(b) - level(a) || (a < b ? -1 : 1));
  if (candidates.length === 0) throw new RestrictedJoinError(400, 'M_UNABLE_TO_GRANT_JOIN', `no user of ${rooms.serverName} may invite to ${roomId}`);
  return candidates[0]!;
}

/** The authoriser a join of `userId` must name, or undefined when it needs none; throws when the join is not allowed or we cannot vouch. */
export async function joinAuthoriser(rooms: RestrictedJoinRooms, roomId: string, userId: string): Promise<string | undefined> {
  return (await needsVouching(rooms, roomId, userId)) ? localAuthoriser(rooms, roomId) : undefined;
}
