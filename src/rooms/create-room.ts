import type { JsonObject } from '../crypto/canonical-json.ts';
import { randomString, type RandomBytes } from '../crypto/random.ts';
import { isValidRoomAlias, isValidUserId, serverNameOf } from '../events/identifiers.ts';
import { isJsonObject } from '../events/power-levels.ts';
import { DEFAULT_ROOM_VERSION, getRoomVersion, requireRoomVersion } from '../events/room-versions.ts';
import { RoomError } from './errors.ts';
import type { EventTemplate, Rooms, StoredEvent } from './rooms.ts';

export type RoomPreset = 'private_chat' | 'public_chat' | 'trusted_private_chat';

/** A validated /createRoom request (client-server §Creation). */
export interface CreateRoomRequest {
  creator: string;
  creatorProfile: { displayname?: string; avatar_url?: string };
  visibility?: 'public' | 'private';
  preset?: RoomPreset;
  room_version?: string;
  creation_content?: JsonObject;
  initial_state?: { type: string; state_key?: string; content: JsonObject }[];
  name?: string;
  topic?: string;
  invite?: string[];
  is_direct?: boolean;
  power_level_content_override?: JsonObject;
  /** Full alias (#local:server), already reserved by the caller. */
  canonicalAlias?: string;
}

/** A public room gets no m.room.guest_access (forbidden is the default), as Synapse creates it: clients compare state lists. */
const PRESET_STATE: Record<RoomPreset, { join_rule: string; history_visibility: string; guest_access?: string }> = {
  private_chat: { join_rule: 'invite', history_visibility: 'shared', guest_access: 'can_join' },
  trusted_private_chat: { join_rule: 'invite', history_visibility: 'shared', guest_access: 'can_join' },
  public_chat: { join_rule: 'public', history_visibility: 'shared' },
};

export function newRoomId(random: RandomBytes, serverName: string): string {
  return `!${randomString(random, 18, 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ')}:${serverName}`;
}

/**
 * The events that make a new room, in the order the spec gives. From v12 the creator, and
 * with `trusted_private_chat` the invitees too (as additional_creators, client-server
 * §Creation), have infinite power and are left out of the power levels' users; changing
 * the room's version (m.room.tombstone) needs 150, above every other default.
 */
export function creationEvents(request: CreateRoomRequest): EventTemplate[] {
  const version = requireRoomVersion(request.room_version ?? DEFAULT_ROOM_VERSION);
  const sender = request.creator;
  const preset: RoomPreset = request.preset ?? (request.visibility === 'public' ? 'public_chat' : 'private_chat');
  const state = (type: string, content: JsonObject, key = ''): EventTemplate => ({ type, sender, state_key: key, content });

  const createContent: JsonObject = { ...(request.creation_content ?? {}), room_version: version.id };
  if (version.creatorInContent) createContent['creator'] = sender;
  else delete createContent['creator'];
  const creators = [sender];
  if (version.privilegedCreators) {
    const given = createContent['additional_creators'];
    if (given !== undefined && !(Array.isArray(given) && given.every((u) => typeof u === 'string' && isValidUserId(u)))) {
      throw new RoomError('bad_event', 'creation_content.additional_creators must be a list of user IDs');
    }
    const additional = new Set((given as string[] | undefined) ?? []);
    if (preset === 'trusted_private_chat') for (const invitee of request.invite ?? []) additional.add(invitee);
    additional.delete(sender);
    if (given !== undefined || additional.size > 0) createContent['additional_creators'] = [...additional];
    creators.push(...additional);
  }

  const member: JsonObject = { membership: 'join' };
  if (request.creatorProfile.displayname !== undefined) member['displayname'] = request.creatorProfile.displayname;
  if (request.creatorProfile.avatar_url !== undefined) member['avatar_url'] = request.creatorProfile.avatar_url;

  const users: JsonObject = {};
  if (!version.privilegedCreators) {
    users[sender] = 100;
    if (preset === 'trusted_private_chat') for (const invitee of request.invite ?? []) users[invitee] = 100;
  }
  const powerLevels: JsonObject = {
    users,
    users_default: 0,
    events: {
      'm.room.name': 50,
      'm.room.power_levels': 100,
      'm.room.history_visibility': 100,
      'm.room.canonical_alias': 50,
      'm.room.avatar': 50,
      'm.room.tombstone': version.privilegedCreators ? 150 : 100,
      'm.room.server_acl': 100,
      'm.room.encryption': 100,
    },
    events_default: 0,
    state_default: 50,
    ban: 50,
    kick: 50,
    redact: 50,
    invite: 0,
    notifications: { room: 50 },
    ...(request.power_level_content_override ?? {}),
  };
  const overriddenUsers = powerLevels['users'];
  const listedCreator = version.privilegedCreators && isJsonObject(overriddenUsers) ? creators.find((c) => Object.hasOwn(overriddenUsers, c)) : undefined;
  if (listedCreator !== undefined) {
    throw new RoomError('bad_event', `power_level_content_override.users lists ${listedCreator}, a creator of a room ${version.id}, whose level is infinite`);
  }

  const presetState = PRESET_STATE[preset];
  const templates: EventTemplate[] = [
    state('m.room.create', createContent),
    state('m.room.member', member, sender),
    state('m.room.power_levels', powerLevels),
  ];
  if (request.canonicalAlias) templates.push(state('m.room.canonical_alias', { alias: request.canonicalAlias }));
  templates.push(
    state('m.room.join_rules', { join_rule: presetState.join_rule }),
    state('m.room.history_visibility', { history_visibility: presetState.history_visibility }),
  );
  if (presetState.guest_access) templates.push(state('m.room.guest_access', { guest_access: presetState.guest_access }));
  // initial_state may override the preset's events, but not the ones above them.
  for (const event of request.initial_state ?? []) {
    const key = event.state_key ?? '';
    const existing = templates.findIndex((t) => t.type === event.type && t.state_key === key);
    if (existing >= 3) templates.splice(existing, 1);
    templates.push(state(event.type, event.content, key));
  }
  if (request.name !== undefined) templates.push(state('m.room.name', { name: request.name }));
  if (request.topic !== undefined) {
    templates.push(state('m.room.topic', { topic: request.topic, 'm.topic': [{ mimetype: 'text/plain', body: request.topic }] }));
  }
  // Invites of users on other servers need their server's countersignature: the caller sends them once the room exists.
  for (const invitee of (request.invite ?? []).filter((u) => serverNameOf(u) === serverNameOf(sender))) {
    const content: JsonObject = { membership: 'invite' };
    if (request.is_direct) content['is_direct'] = true;
    templates.push(state('m.room.member', content, invitee));
  }
  return templates;
}

/** Creates a room; before v12 its ID is random, from v12 its create event's. */
export async function createRoom(rooms: Rooms, random: RandomBytes, request: CreateRoomRequest): Promise<{ roomId: string; events: StoredEvent[] }> {
  const version = requireRoomVersion(request.room_version ?? DEFAULT_ROOM_VERSION);
  const events = await rooms.createRoom(version.roomIdFromCreateEvent ? undefined : newRoomId(random, rooms.serverName), version.id, creationEvents(request));
  return { roomId: events[0]!.event.room_id, events };
}

/** What /createRoom needs besides the room engine: the creator's profile, and invites to users on other servers. */
export interface RoomCreationParts {
  rooms: Rooms;
  random: RandomBytes;
  profileOf(userId: string): Promise<{ displayname?: string; avatar_url?: string } | undefined>;
  isLocal(userId: string): boolean;
  /** The invite handshake with the invitee's server (local invitees are invited in the creation events). */
  inviteRemote(sender: string, roomId: string, invitee: string, extra: JsonObject): Promise<unknown>;
}

/** A /createRoom request as a client gives it: an alias by its localpart, and the third-party invites Hearth does not make. */
export type CreateRoomAsked = Omit<CreateRoomRequest, 'creatorProfile' | 'canonicalAlias'> & { room_alias_name?: string; invite_3pid?: readonly unknown[] };

/**
 * /createRoom as a whole (client-server §Creation): the version and alias checked before anything is made, the
 * room created with the alias as its canonical one, the alias kept, the room published when public, and the
 * invitees on other servers invited through their servers.
 */
export async function createRoomAsAsked(parts: RoomCreationParts, asked: CreateRoomAsked): Promise<{ roomId: string }> {
  const { rooms } = parts;
  const version = asked.room_version ?? DEFAULT_ROOM_VERSION;
  if (!getRoomVersion(version)) throw new RoomError('unsupported_version', `room version ${version} is not supported`);
  if (asked.invite_3pid && asked.invite_3pid.length > 0) throw new RoomError('unsupported', 'third-party invites are not supported');
  let alias: string | undefined;
  if (asked.room_alias_name !== undefined) {
    if (/[:\s#]/.test(asked.room_alias_name)) throw new RoomError('invalid_param', 'room_alias_name must be a localpart');
    alias = `#${asked.room_alias_name}:${rooms.serverName}`;
    if (!isValidRoomAlias(alias)) throw new RoomError('invalid_param', 'invalid room alias');
    if (await rooms.resolveAlias(alias)) throw new RoomError('room_in_use', 'Room alias already taken');
  }
  const { room_alias_name: _alias, invite_3pid: _thirdParty, ...request } = asked;
  const { roomId } = await createRoom(rooms, parts.random, { ...request, room_version: version, creatorProfile: (await parts.profileOf(asked.creator)) ?? {}, canonicalAlias: alias });
  // Between the check and here another request may have taken the alias.
  if (alias && !(await rooms.createAlias(alias, roomId, asked.creator))) throw new RoomError('room_in_use', 'Room alias already taken');
  if (asked.visibility === 'public') await rooms.setPublished(roomId, true);
  for (const invitee of (asked.invite ?? []).filter((u) => !parts.isLocal(u))) {
    await parts.inviteRemote(asked.creator, roomId, invitee, asked.is_direct ? { is_direct: true } : {});
  }
  return { roomId };
}
