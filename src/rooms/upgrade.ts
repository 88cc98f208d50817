import type { JsonObject } from '../crypto/canonical-json.ts';
import type { RandomBytes } from '../crypto/random.ts';
import { stateKey } from '../events/event.ts';
import { powerLevelsOf } from '../events/power-levels.ts';
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
}

/** What an upgrade reads and writes of the accounts component: the upgrader's profile, and local members' push rules. */
export interface UpgradeAccounts {
  isLocal(userId: string): boolean;
  getProfile(userId: string): Promise<{ displayname?: string; avatar_url?: string } | undefined>;
  copyRoomPushRules(userId: string, fromRoomId: string, toRoomId: string): Promise<void>;
}

/**
 * Replaces a room with a new one of another version, as Synapse does: the new room
 * starts with the old one's power levels and the state above, names its predecessor, and
 * takes over the local aliases and the directory listing; the old room gets a tombstone
 * and its power levels raised so that ordinary members can no longer speak or invite.
 * Each local member keeps their notification settings for the room (muted stays muted).
 * Only a user who may send the tombstone may upgrade.
 */
export async function upgradeRoom(rooms: Rooms, accounts: UpgradeAccounts, random: RandomBytes, request: UpgradeRequest): Promise<{ replacementRoom: string }> {
  const { roomId, userId } = request;
  const version = requireRoomVersion(request.newVersion);
  const oldVersion = await rooms.roomVersion(roomId);
  if (!oldVersion) throw roomNotFound(roomId);
  if ((await rooms.membership(roomId, userId)) !== 'join') throw new RoomError('forbidden', `${userId} is not in room ${roomId}`);
  const state = await rooms.currentState(roomId);
  const stateEvent = (type: string) => state.get(stateKey(type, ''))?.event;
  const levels = powerLevelsOf(oldVersion, (type, key) => state.get(stateKey(type, key))?.event);
  if (levels.user(userId) < levels.required('m.room.tombstone', true)) throw new RoomError('forbidden', 'You may not upgrade this room: it needs the power to send m.room.tombstone');

  const replacementRoom = newRoomId(random, rooms.serverName);
  const sender = userId;
  const stateTemplate = (type: string, content: JsonObject, key = ''): EventTemplate => ({ type, sender, state_key: key, content });
  // The tombstone comes first, so the new room can name it, the old room's last event, as its
  // predecessor's event_id (as Synapse does). The tombstone is allowed: the levels said so above.
  const [tombstone] = await rooms.sendEvents(roomId, [stateTemplate('m.room.tombstone', { body: 'This room has been replaced', replacement_room: replacementRoom })]);
  const oldCreate = stateEvent('m.room.create')?.content ?? {};
  const create: JsonObject = { room_version: version.id, predecessor: { room_id: roomId, event_id: tombstone!.event.event_id } };
  for (const key of ['type', 'm.federate'] as const) if (oldCreate[key] !== undefined) create[key] = oldCreate[key];
  if (version.creatorInContent) create['creator'] = sender;
  const member: JsonObject = { membership: 'join', ...((await accounts.getProfile(userId)) ?? {}) };

  // The upgrader must be able to send the carried state: raise them for the room's first
  // moments if need be, then restore the old room's levels as they were.
  const powerLevels = (stateEvent('m.room.power_levels')?.content ?? { users: { [sender]: 100 } }) as JsonObject;
  const needed = Math.max(levels.user(userId), ...CARRIED_STATE.map((type) => levels.required(type, true)), levels.required('m.room.power_levels', true));
  const users = { ...((powerLevels['users'] ?? {}) as JsonObject) };
  const raised = needed > levels.user(userId);
  const templates: EventTemplate[] = [
    stateTemplate('m.room.create', create),
    stateTemplate('m.room.member', member, sender),
    stateTemplate('m.room.power_levels', raised ? { ...powerLevels, users: { ...users, [sender]: needed } } : powerLevels),
  ];
  for (const type of CARRIED_STATE) {
    const content = stateEvent(type)?.content;
    if (content && Object.keys(content).length > 0) templates.push(stateTemplate(type, content as JsonObject));
  }
  if (raised) templates.push(stateTemplate('m.room.power_levels', powerLevels));
  await rooms.createRoom(replacementRoom, version.id, templates);

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
  const restricted = Math.max(50, Number(powerLevels['users_default'] ?? 0) + 1);
  if (levels.user(userId) >= levels.required('m.room.power_levels', true)) {
    await rooms.sendEvents(roomId, [stateTemplate('m.room.power_levels', { ...powerLevels, events_default: restricted, invite: restricted })]).catch(() => undefined);
  }
  for (const memberId of await rooms.members(roomId)) {
    if (accounts.isLocal(memberId)) await accounts.copyRoomPushRules(memberId, roomId, replacementRoom);
  }
  return { replacementRoom };
}
