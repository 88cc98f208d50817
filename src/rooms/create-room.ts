import type { JsonObject } from '../crypto/canonical-json.ts';
import { randomString, type RandomBytes } from '../crypto/random.ts';
import { serverNameOf } from '../events/identifiers.ts';
import { DEFAULT_ROOM_VERSION, requireRoomVersion } from '../events/room-versions.ts';
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

const PRESET_STATE: Record<RoomPreset, { join_rule: string; history_visibility: string; guest_access: string }> = {
  private_chat: { join_rule: 'invite', history_visibility: 'shared', guest_access: 'can_join' },
  trusted_private_chat: { join_rule: 'invite', history_visibility: 'shared', guest_access: 'can_join' },
  public_chat: { join_rule: 'public', history_visibility: 'shared', guest_access: 'forbidden' },
};

export function newRoomId(random: RandomBytes, serverName: string): string {
  return `!${randomString(random, 18, 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ')}:${serverName}`;
}

/** The events that make a new room, in the order the spec gives. */
export function creationEvents(request: CreateRoomRequest): EventTemplate[] {
  const version = requireRoomVersion(request.room_version ?? DEFAULT_ROOM_VERSION);
  const sender = request.creator;
  const preset: RoomPreset = request.preset ?? (request.visibility === 'public' ? 'public_chat' : 'private_chat');
  const state = (type: string, content: JsonObject, key = ''): EventTemplate => ({ type, sender, state_key: key, content });

  const createContent: JsonObject = { ...(request.creation_content ?? {}), room_version: version.id };
  if (version.creatorInContent) createContent['creator'] = sender;
  else delete createContent['creator'];

  const member: JsonObject = { membership: 'join' };
  if (request.creatorProfile.displayname !== undefined) member['displayname'] = request.creatorProfile.displayname;
  if (request.creatorProfile.avatar_url !== undefined) member['avatar_url'] = request.creatorProfile.avatar_url;

  const users: JsonObject = { [sender]: 100 };
  if (preset === 'trusted_private_chat') for (const invitee of request.invite ?? []) users[invitee] = 100;
  const powerLevels: JsonObject = {
    users,
    users_default: 0,
    events: {
      'm.room.name': 50,
      'm.room.power_levels': 100,
      'm.room.history_visibility': 100,
      'm.room.canonical_alias': 50,
      'm.room.avatar': 50,
      'm.room.tombstone': 100,
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
    state('m.room.guest_access', { guest_access: presetState.guest_access }),
  );
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

export async function createRoom(rooms: Rooms, random: RandomBytes, request: CreateRoomRequest): Promise<{ roomId: string; events: StoredEvent[] }> {
  const roomId = newRoomId(random, rooms.serverName);
  const version = request.room_version ?? DEFAULT_ROOM_VERSION;
  const events = await rooms.createRoom(roomId, version, creationEvents(request));
  return { roomId, events };
}
