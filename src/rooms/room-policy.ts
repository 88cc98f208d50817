import { AuthError, powerLevelsOf, type RoomPowerLevels } from '../events/power-levels.ts';
import type { JsonObject } from '../crypto/canonical-json.ts';
import { isValidRoomAlias } from '../events/identifiers.ts';
import { DEFAULT_ROOM_VERSION, getRoomVersion } from '../events/room-versions.ts';
import { relationOf } from './relations.ts';
import { RoomError } from './errors.ts';
import type { Rooms, StoredEvent } from './rooms.ts';

/** What the power-level decisions read of the room engine. */
export type PolicyRooms = Pick<Rooms, 'roomVersion' | 'currentStateEvent'>;

/**
 * The power levels in force in a room's current state, read as the room's version reads them
 * (stringy and floaty levels in the old versions; the creator from the create event's sender
 * from v11, from `content.creator` before; from v12 the creators' level is infinite).
 */
export async function currentPowerLevels(rooms: PolicyRooms, roomId: string): Promise<RoomPowerLevels> {
  const version = (await rooms.roomVersion(roomId)) ?? getRoomVersion(DEFAULT_ROOM_VERSION)!;
  const powerLevels = await rooms.currentStateEvent(roomId, 'm.room.power_levels', '');
  const create = await rooms.currentStateEvent(roomId, 'm.room.create', '');
  return powerLevelsOf(version, (type) => (type === 'm.room.power_levels' ? powerLevels : create)?.event);
}

/**
 * Whether a user's level reaches the one `needed` reads; a level the room's power levels hold
 * malformed counts as not reached (the auth rules would refuse the write it guards anyway).
 */
async function reaches(rooms: PolicyRooms, roomId: string, userId: string, needed: (levels: RoomPowerLevels) => number): Promise<boolean> {
  const levels = await currentPowerLevels(rooms, roomId);
  try {
    return levels.user(userId) >= needed(levels);
  } catch (error) {
    if (error instanceof AuthError) return false;
    throw error;
  }
}

/** Anyone may redact their own events; another user's only with the room's `redact` level. */
export async function requireMayRedact(rooms: PolicyRooms, roomId: string, userId: string, target: StoredEvent): Promise<void> {
  if (target.event.sender === userId) return;
  if (!(await reaches(rooms, roomId, userId, (levels) => levels.named('redact')))) throw new RoomError('forbidden', 'You may not redact other users\' events');
}

/** Deleting an alias someone else made needs the level to send `m.room.canonical_alias`. */
export async function requireMayDeleteAlias(rooms: PolicyRooms & Pick<Rooms, 'aliasCreator'>, alias: string, roomId: string, userId: string): Promise<void> {
  if ((await rooms.aliasCreator(alias)) === userId) return;
  if (!(await reaches(rooms, roomId, userId, (levels) => levels.required('m.room.canonical_alias', true)))) throw new RoomError('forbidden', 'You may not delete this alias');
}

/** Listing a room in (or taking it off) the public directory needs the room's `state_default` level. */
export async function requireMayPublish(rooms: PolicyRooms, roomId: string, userId: string): Promise<void> {
  if (!(await reaches(rooms, roomId, userId, (levels) => levels.stateDefault()))) throw new RoomError('forbidden', 'You may not change the room directory');
}

/**
 * What a membership change by another member needs of its target's current membership: a kick, someone in
 * the room (joined, invited or knocking); an unban, someone banned. A ban needs nothing (one may ban anyone).
 * The auth rules would let a kick of someone who left, or an unban of someone never banned, through as a
 * no-op `leave`; both are refused with 403 instead, as Synapse refuses the unban.
 */
/** Joined, invited or knocking: a membership that a kick can end, and that forbids forgetting the room. */
const inRoom = (membership: string | undefined) => membership === 'join' || membership === 'invite' || membership === 'knock';

export async function requireMembershipToChange(rooms: Pick<Rooms, 'membership'>, roomId: string, target: string, action: 'kick' | 'ban' | 'unban'): Promise<void> {
  if (action === 'ban') return;
  const current = await rooms.membership(roomId, target);
  if (action === 'unban' && current !== 'ban') throw new RoomError('forbidden', `${target} is not banned`);
  if (action === 'kick' && !inRoom(current)) throw new RoomError('forbidden', `${target} is not in the room`);
}

/** A room is forgotten only once left (or never joined): joined, invited or knocking, the user is still in it. */
export async function requireLeftBeforeForget(rooms: Pick<Rooms, 'membership'>, roomId: string, userId: string): Promise<void> {
  const current = await rooms.membership(roomId, userId).catch(() => undefined);
  if (inRoom(current)) throw new RoomError('still_in_room', `${userId} is in room ${roomId}: leave it before forgetting it`);
}

/**
 * A relation a client sends (client-server §Relationships): an annotation needs a key of at most 500 characters,
 * the related event (when this server holds it) must be in the same room, and a thread may not start from an
 * event that itself relates to another.
 */
export async function requireSendableRelation(rooms: Pick<Rooms, 'getEvent'>, roomId: string, type: string, content: JsonObject): Promise<void> {
  const relation = relationOf({ type, content } as never);
  if (!relation) return;
  if (relation.relType === 'm.annotation' && relation.key === null) throw new RoomError('bad_event', 'an annotation needs a string key');
  if (relation.relType === 'm.annotation' && relation.key!.length > 500) throw new RoomError('bad_event', 'the annotation key is too long');
  const parent = await rooms.getEvent(relation.parentId);
  if (!parent) return;
  if (parent.event.room_id !== roomId) throw new RoomError('bad_event', 'relations must be in the same room');
  if (relation.relType === 'm.thread' && relationOf(parent.event)) throw new RoomError('bad_event', 'cannot start a thread from an event with a relation');
}

/** An `m.room.canonical_alias` a client sets names only aliases that point to this room (client-server §Room aliases). */
export async function requireOwnAliases(rooms: Pick<Rooms, 'resolveAlias'>, roomId: string, content: JsonObject): Promise<void> {
  const aliases = [content['alias'], ...(Array.isArray(content['alt_aliases']) ? content['alt_aliases'] : [])].filter((a) => a !== undefined && a !== null);
  for (const alias of aliases) {
    if (typeof alias !== 'string' || !isValidRoomAlias(alias)) throw new RoomError('invalid_param', `invalid alias ${String(alias)}`);
    if ((await rooms.resolveAlias(alias)) !== roomId) throw new RoomError('bad_alias', `alias ${alias} does not point to this room`);
  }
}
