/**
 * Room settings (name, topic, avatar, as the power levels allow), this user's profile, and search, on
 * matrix-js-sdk. Search asks the homeserver (`POST /search`) about rooms it can read; in encrypted rooms
 * the homeserver stores only ciphertext, so those are searched here, in the messages the SDK holds decrypted.
 */
import { EventType, KnownMembership, RelationType, type MatrixClient, type Room } from 'matrix-js-sdk';
import type { Profile, RoomSettings, SearchHit, SearchResults } from '../chat.ts';
import { chatCall } from './convert.ts';
import { roomName } from './rooms.ts';

const AVATAR_SIZE = 96;

/** An mxc: URI as a thumbnail URL an <img> can load (the unauthenticated media path: an <img> sends no token). */
export function avatarUrl(client: MatrixClient, mxc: unknown): string | undefined {
  if (typeof mxc !== 'string' || !mxc.startsWith('mxc://')) return undefined;
  return client.mxcUrlToHttp(mxc, AVATAR_SIZE, AVATAR_SIZE, 'crop', false, true, false) ?? undefined;
}

/** Undefined when this user may send the state event, else why not, in words. */
function denied(client: MatrixClient, room: Room, type: string, what: string): string | undefined {
  const me = client.getSafeUserId();
  if (room.getMyMembership() !== KnownMembership.Join) return 'You are not in this room.';
  if (room.currentState.maySendStateEvent(type, me)) return undefined;
  const levels = (room.currentState.getStateEvents(EventType.RoomPowerLevels, '')?.getContent() ?? {}) as { events?: Record<string, number>; state_default?: number };
  const needed = levels.events?.[type] ?? levels.state_default ?? 50;
  const mine = room.getMember(me)?.powerLevel ?? 0;
  return `Only members with power level ${needed} may change the ${what}; yours is ${mine}.`;
}

export function roomSettings(client: MatrixClient, room: Room): RoomSettings {
  const state = (type: string) => room.currentState.getStateEvents(type, '')?.getContent() ?? {};
  const topic = state(EventType.RoomTopic)['topic'];
  const deniedName = denied(client, room, EventType.RoomName, 'name');
  const deniedTopic = denied(client, room, EventType.RoomTopic, 'topic');
  const deniedAvatar = denied(client, room, EventType.RoomAvatar, 'avatar');
  return {
    name: roomName(client, room),
    topic: typeof topic === 'string' ? topic : '',
    avatarUrl: avatarUrl(client, state(EventType.RoomAvatar)['url']),
    denied: { ...(deniedName ? { name: deniedName } : {}), ...(deniedTopic ? { topic: deniedTopic } : {}), ...(deniedAvatar ? { avatar: deniedAvatar } : {}) },
  };
}

/** Uploads an image to the content repository; its mxc: URI. */
export async function uploadImage(client: MatrixClient, image: File): Promise<string> {
  if (!image.type.startsWith('image/')) throw new TypeError(`${image.name} is not an image`);
  return (await chatCall(() => client.uploadContent(image, { type: image.type, name: image.name }))).content_uri;
}

export async function profile(client: MatrixClient): Promise<Profile> {
  const info = await chatCall(() => client.getProfileInfo(client.getSafeUserId()));
  return { displayName: info.displayname, avatarUrl: avatarUrl(client, info.avatar_url) };
}

interface ServerHit {
  rank?: number;
  result: { event_id: string; room_id: string; sender: string; origin_server_ts?: number; content?: { body?: unknown } };
}

export async function search(client: MatrixClient, term: string, roomId?: string): Promise<SearchResults> {
  const joined = client.getRooms().filter((r) => r.getMyMembership() === KnownMembership.Join);
  const rooms = roomId ? joined.filter((r) => r.roomId === roomId) : joined;
  const encrypted = rooms.filter((r) => r.hasEncryptionStateEvent());
  const readable = rooms.filter((r) => !r.hasEncryptionStateEvent());
  const hits: SearchHit[] = [];
  if (readable.length > 0) {
    const body = { search_categories: { room_events: { search_term: term, keys: ['content.body'], filter: { rooms: readable.map((r) => r.roomId) }, order_by: 'recent' } } };
    const response = await chatCall(() => client.search({ body } as never));
    for (const hit of ((response.search_categories.room_events?.results ?? []) as unknown as ServerHit[])) {
      const event = hit.result;
      hits.push({ roomId: event.room_id, eventId: event.event_id, sender: event.sender, body: String(event.content?.body ?? ''), ts: event.origin_server_ts, local: false });
    }
  }
  // Hand-written: the SDK has no local search; a substring of the loaded, decrypted messages (their newest edit).
  const needle = term.trim().toLocaleLowerCase();
  for (const room of encrypted) {
    for (const event of room.getLiveTimeline().getEvents()) {
      if (event.getType() !== EventType.RoomMessage || event.isRedacted() || event.isRelation(RelationType.Replace)) continue;
      const text = event.getContent()['body'];
      const id = event.getId();
      if (!id || typeof text !== 'string' || !text.toLocaleLowerCase().includes(needle)) continue;
      hits.push({ roomId: room.roomId, eventId: id, sender: event.getSender() ?? '', body: text, ts: event.getTs(), local: true });
    }
  }
  hits.sort((a, b) => (b.ts ?? 0) - (a.ts ?? 0));
  return { hits, encryptedRooms: encrypted.length };
}
