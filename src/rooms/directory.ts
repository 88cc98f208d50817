import { stateKey, type StateKey } from '../events/event.ts';
import type { Rooms, StoredEvent } from './rooms.ts';

/** One room of the public room directory (client-server §Listing rooms, `PublishedRoomsChunk`). */
export type PublicRoom = Record<string, unknown> & { room_id: string; num_joined_members: number };

export interface PublicRoomsPage {
  chunk: PublicRoom[];
  total_room_count_estimate: number;
  next_batch?: string;
  prev_batch?: string;
}

export interface PublicRoomsQuery {
  limit?: number;
  /** A `next_batch` or `prev_batch` of an earlier page; null or absent for the first. */
  since?: string | null;
  /** `filter.generic_search_term`: matched case-insensitively in the name, topic and canonical alias. */
  term?: string;
}

/**
 * What a room shows of itself to those deciding whether to join (`PublishedRoomsChunk`, which the
 * space hierarchy's chunk extends), from its current state.
 */
export async function publicRoomChunk(rooms: Rooms, roomId: string, state: ReadonlyMap<StateKey, StoredEvent>): Promise<PublicRoom> {
  const content = (type: string) => state.get(stateKey(type, ''))?.event.content ?? {};
  const joinRule = content('m.room.join_rules')['join_rule'];
  const entry: PublicRoom = {
    room_id: roomId,
    num_joined_members: (await rooms.members(roomId)).length,
    world_readable: content('m.room.history_visibility')['history_visibility'] === 'world_readable',
    guest_can_join: content('m.room.guest_access')['guest_access'] === 'can_join',
    join_rule: typeof joinRule === 'string' ? joinRule : 'invite',
  };
  for (const [field, type, key] of [['name', 'm.room.name', 'name'], ['topic', 'm.room.topic', 'topic'], ['canonical_alias', 'm.room.canonical_alias', 'alias'], ['avatar_url', 'm.room.avatar', 'url']] as const) {
    const value = content(type)[key];
    if (typeof value === 'string' && value !== '') entry[field] = value;
  }
  const roomType = content('m.room.create')['type'];
  if (typeof roomType === 'string') entry['room_type'] = roomType;
  return entry;
}

/**
 * The rooms published to this server's directory, largest first, as one page. Served the
 * same to local clients and to other servers (server-server §Public room directory).
 */
export async function publicRoomsPage(rooms: Rooms, query: PublicRoomsQuery): Promise<PublicRoomsPage> {
  const chunk: PublicRoom[] = [];
  const term = query.term?.toLowerCase();
  for (const roomId of await rooms.publishedRooms()) {
    const entry = await publicRoomChunk(rooms, roomId, await rooms.currentState(roomId));
    if (term && ![entry['name'], entry['topic'], entry['canonical_alias']].some((v) => typeof v === 'string' && v.toLowerCase().includes(term))) continue;
    chunk.push(entry);
  }
  chunk.sort((a, b) => b.num_joined_members - a.num_joined_members || a.room_id.localeCompare(b.room_id));
  const offset = query.since ? Number(query.since.replace(/^o/, '')) || 0 : 0;
  const limit = query.limit ?? chunk.length;
  const page: PublicRoomsPage = { chunk: chunk.slice(offset, offset + limit), total_room_count_estimate: chunk.length };
  if (offset + limit < chunk.length) page.next_batch = `o${offset + limit}`;
  if (offset > 0) page.prev_batch = `o${Math.max(0, offset - limit)}`;
  return page;
}
