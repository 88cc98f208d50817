import type { JsonObject } from '../crypto/canonical-json.ts';
import type { RandomBytes } from '../crypto/random.ts';
import { stateKey } from '../events/event.ts';
import { isValidUserId } from '../events/identifiers.ts';
import { AuthError, CREATOR_POWER_LEVEL, isJsonObject, powerLevelsOf, RoomPowerLevels } from '../events/power-levels.ts';
import { requireRoomVersion } from '../events/room-versions.ts';
import { newRoomId } from './create-room.ts';
import { RoomError, roomNotFound } from './errors.ts';
import type { EventTemplate, Rooms } from './rooms.ts';

/** State the new room takes over from the old one (client-server §Room upgrades), in the order it is sent. */
const CARRIED_STATE = [
  'm.room.join_rules', 'm.room.history_visibility', 'm.room.guest_access', 'm.room.name', 'm.room.topic',
  'm.room.avatar', 'm.room.encryption', 'm.room.server_acl', 'm.room.pinned_events', 'm.room.canonical_alias',
];

export interface UpgradeRequest {
  roomId: string;
  userId: string;
  newVersion: string;
  /** From v12: the users besides the upgrader to be the new room's creators (none are carried over). */
  additionalCreators?: string[];
}

/** What an upgrade reads and writes of the accounts component: the upgrader's profile, and local members' settings for the room. */
export interface UpgradeAccounts {
  isLocal(userId: string): boolean;
  getProfile(userId: string): Promise<{ displayname?: string; avatar_url?: string } | undefined>;
  pushRules: { copyForRoom(userId: string, fromRoomId: string, toRoomId: string): Promise<void> };
  /** The user's tags for the old room, and the new room beside the old one in their m.direct. */
  accountData: { copyTagsAndDirect(userId: string, fromRoomId: string, toRoomId: string): Promise<void> };
}

/**
 * Replaces a room with a new one of another version, as Synapse does: the new room
 * starts with the old one's power levels and the state above, names its predecessor, and
 * takes over the local aliases and the directory listing; the old room gets a tombstone
 * and its power levels raised so that ordinary members can no longer speak or invite.
 * Its bans are made again in the new room, by the upgrader. Each local member keeps their
 * notification settings, tags and m.direct entry for the room (muted stays muted).
 * Only a user who may send the tombstone may upgrade.
 *
 * Before v12 the tombstone comes first and the new room names it as its predecessor's
 * event_id. A v12 room's ID is its create event's hash, and the tombstone must name that ID,
 * so the new room comes first and its predecessor names the old room only (client-server
 * §Room upgrades allows it). The upgrader and `additionalCreators` are its creators, so they
 * leave the power levels' users.
 */
export async function upgradeRoom(rooms: Rooms, accounts: UpgradeAccounts, random: RandomBytes, request: UpgradeRequest): Promise<{ replacementRoom: string }> {
  const { roomId, userId } = request;
  const version = requireRoomVersion(request.newVersion);
  const oldVersion = await rooms.roomVersion(roomId);
  if (!oldVersion) throw roomNotFound(roomId);
  if ((await rooms.membership(roomId, userId)) !== 'join') throw new RoomError('forbidden', `${userId} is not in room ${roomId}`);
  const additionalCreators = version.privilegedCreators ? [...new Set(request.additionalCreators ?? [])].filter((u) => u !== userId) : [];
  if (!additionalCreators.every(isValidUserId)) throw new RoomError('bad_event', 'additional_creators must be user IDs');
  const state = await rooms.currentState(roomId);
  const stateEvent = (type: string) => state.get(stateKey(type, ''))?.event;
  const levels = powerLevelsOf(oldVersion, (type, key) => state.get(stateKey(type, key))?.event);
  if (levels.user(userId) < levels.required('m.room.tombstone', true)) throw new RoomError('forbidden', 'You may not upgrade this room: it needs the power to send m.room.tombstone');

  const sender = userId;
  const stateTemplate = (type: string, content: JsonObject, key = ''): EventTemplate => ({ type, sender, state_key: key, content });
  const tombstoneFor = (replacement: string) => stateTemplate('m.room.tombstone', { body: 'This room has been replaced', replacement_room: replacement });
  const oldCreate = stateEvent('m.room.create')?.content ?? {};
  const create: JsonObject = { room_version: version.id, predecessor: { room_id: roomId } };
  for (const key of ['type', 'm.federate'] as const) if (oldCreate[key] !== undefined) create[key] = oldCreate[key];
  if (version.creatorInContent) create['creator'] = sender;
  if (additionalCreators.length > 0) create['additional_creators'] = additionalCreators;
  const member: JsonObject = { membership: 'join', ...((await accounts.getProfile(userId)) ?? {}) };

  // The upgrader must be able to send the carried state: raise them for the room's first
  // moments if need be, then restore the old room's levels as they were. A creator of a v12+
  // room needs no raise, and no creator may be listed there; a v12 creator moving to an older
  // version is listed at the level the room's state needs (at least 100) instead.
  const oldPowerLevels = stateEvent('m.room.power_levels')?.content as JsonObject | undefined;
  const bans = [...state.values()].filter((stored) => stored.event.type === 'm.room.member' && stored.event.content['membership'] === 'ban').map((stored) => stored.event);
  const neededForState = Math.max(
    ...CARRIED_STATE.map((type) => safeLevel(() => levels.required(type, true))),
    safeLevel(() => levels.required('m.room.power_levels', true)),
    bans.length > 0 ? safeLevel(() => levels.named('ban')) : 0,
  );
  let powerLevels: JsonObject = oldPowerLevels ?? (version.privilegedCreators ? {} : { users: { [sender]: 100 } });
  const oldUsers = isJsonObject(powerLevels['users']) ? powerLevels['users'] : {};
  if (version.privilegedCreators) {
    const users = { ...oldUsers };
    for (const creator of [sender, ...additionalCreators]) delete users[creator];
    powerLevels = { ...powerLevels, users };
  } else if (levels.user(sender) === CREATOR_POWER_LEVEL) {
    powerLevels = { ...powerLevels, users: { ...oldUsers, [sender]: Math.max(100, neededForState) } };
  }
  const ownLevel = safeLevel(() => new RoomPowerLevels(version, powerLevels, version.privilegedCreators ? [sender] : []).user(sender));
  const needed = Math.max(ownLevel, neededForState);
  const raised = needed > ownLevel;
  const users = { ...((powerLevels['users'] ?? {}) as JsonObject) };
  const templates: EventTemplate[] = [
    stateTemplate('m.room.create', create),
    stateTemplate('m.room.member', member, sender),
    stateTemplate('m.room.power_levels', raised ? { ...powerLevels, users: { ...users, [sender]: needed } } : powerLevels),
  ];
  for (const type of CARRIED_STATE) {
    const content = stateEvent(type)?.content;
    if (content && Object.keys(content).length > 0) templates.push(stateTemplate(type, content as JsonObject));
  }
  // The bans, while the upgrader's level may be raised; not of a user ranked at least as high, whom no ban may touch.
  const newLevels = new RoomPowerLevels(version, powerLevels, version.privilegedCreators ? [sender, ...additionalCreators] : []);
  for (const ban of bans) {
    if (ban.state_key !== sender && safeLevel(() => newLevels.user(ban.state_key!)) < needed) templates.push(stateTemplate('m.room.member', ban.content, ban.state_key));
  }
  if (raised) templates.push(stateTemplate('m.room.power_levels', powerLevels));

  let replacementRoom: string;
  if (version.roomIdFromCreateEvent) {
    const [first] = await rooms.createRoom(undefined, version.id, templates);
    replacementRoom = first!.event.room_id;
    await rooms.sendEvents(roomId, [tombstoneFor(replacementRoom)]);
  } else {
    replacementRoom = newRoomId(random, rooms.serverName);
    // The tombstone comes first, so the new room can name it, the old room's last event, as its
    // predecessor's event_id (as Synapse does). The tombstone is allowed: the levels said so above.
    const [tombstone] = await rooms.sendEvents(roomId, [tombstoneFor(replacementRoom)]);
    create['predecessor'] = { room_id: roomId, event_id: tombstone!.event.event_id };
    await rooms.createRoom(replacementRoom, version.id, templates);
  }

  // Local aliases and the directory listing now name the new room.
  await rooms.moveAliases(roomId, replacementRoom);
  if (stateEvent('m.room.canonical_alias')) {
    await rooms.sendEvents(roomId, [stateTemplate('m.room.canonical_alias', {})]).catch(() => undefined);
  }
  if (await rooms.isPublished(roomId)) {
    await rooms.setPublished(roomId, false);
    await rooms.setPublished(replacementRoom, true);
  }

  // Members of the old room may no longer talk or invite there (when the upgrader may say so).
  const oldLevels = oldPowerLevels ?? (oldVersion.privilegedCreators ? {} : { users: { [sender]: 100 } });
  const restricted = Math.max(50, Number(oldLevels['users_default'] ?? 0) + 1);
  if (levels.user(userId) >= levels.required('m.room.power_levels', true)) {
    await rooms.sendEvents(roomId, [stateTemplate('m.room.power_levels', { ...oldLevels, events_default: restricted, invite: restricted })]).catch(() => undefined);
  }
  for (const memberId of await rooms.members(roomId)) {
    if (!accounts.isLocal(memberId)) continue;
    await accounts.pushRules.copyForRoom(memberId, roomId, replacementRoom);
    await accounts.accountData.copyTagsAndDirect(memberId, roomId, replacementRoom);
  }
  return { replacementRoom };
}

/** A level read from power levels, a malformed one counting as 0 (the auth rules then decide). */
function safeLevel(read: () => number): number {
  try {
    return read();
  } catch (e) {
    if (e instanceof AuthError) return 0;
    throw e;
  }
}
