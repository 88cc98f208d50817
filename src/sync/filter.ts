import { z } from 'zod';
import { isValidRoomId, isValidUserId } from '../events/identifiers.ts';

// Filters (client-server §Filtering): the schema clients send, and matching.

// Senders and rooms must be IDs, as Synapse checks: a filter naming `alice` or `#room:x` would
// match nothing, silently. Room IDs of room version 12 carry no server name.
const userIds = z.array(z.string().refine(isValidUserId, 'not a user ID'));
const roomIds = z.array(z.string().refine(isValidRoomId, 'not a room ID'));

const eventFilterShape = {
  limit: z.number().int().min(0).optional(),
  types: z.array(z.string()).optional(),
  not_types: z.array(z.string()).optional(),
  senders: userIds.optional(),
  not_senders: userIds.optional(),
};
const roomEventFilter = z
  .object({
    ...eventFilterShape,
    rooms: roomIds.optional(),
    not_rooms: roomIds.optional(),
    contains_url: z.boolean().optional(),
    lazy_load_members: z.boolean().optional(),
    include_redundant_members: z.boolean().optional(),
    unread_thread_notifications: z.boolean().optional(),
  })
  .loose();
const eventFilter = z.object(eventFilterShape).loose();

export const filterSchema = z
  .object({
    event_fields: z.array(z.string()).optional(),
    event_format: z.enum(['client', 'federation']).optional(),
    presence: eventFilter.optional(),
    account_data: eventFilter.optional(),
    room: z
      .object({
        rooms: roomIds.optional(),
        not_rooms: roomIds.optional(),
        include_leave: z.boolean().optional(),
        timeline: roomEventFilter.optional(),
        state: roomEventFilter.optional(),
        ephemeral: roomEventFilter.optional(),
        account_data: roomEventFilter.optional(),
      })
      .loose()
      .optional(),
  })
  .loose();

export type Filter = z.infer<typeof filterSchema>;
export type RoomEventFilter = z.infer<typeof roomEventFilter>;
export const roomEventFilterSchema = roomEventFilter;

/** Matches a type pattern, where `*` stands for any run of characters. */
function matchesPattern(value: string, pattern: string): boolean {
  if (!pattern.includes('*')) return value === pattern;
  const regex = new RegExp('^' + pattern.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*') + '$');
  return regex.test(value);
}

export interface FilterableEvent {
  type: string;
  sender?: string;
  room_id?: string;
  content?: Record<string, unknown>;
}

export function eventMatches(filter: RoomEventFilter | undefined, event: FilterableEvent): boolean {
  if (!filter) return true;
  if (filter.types && !filter.types.some((p) => matchesPattern(event.type, p))) return false;
  if (filter.not_types?.some((p) => matchesPattern(event.type, p))) return false;
  if (event.sender !== undefined) {
    if (filter.senders && !filter.senders.includes(event.sender)) return false;
    if (filter.not_senders?.includes(event.sender)) return false;
  }
  if (event.room_id !== undefined) {
    if (filter.rooms && !filter.rooms.includes(event.room_id)) return false;
    if (filter.not_rooms?.includes(event.room_id)) return false;
  }
  if (filter.contains_url !== undefined) {
    const hasUrl = typeof event.content?.['url'] === 'string';
    if (hasUrl !== filter.contains_url) return false;
  }
  return true;
}

export function roomMatches(filter: Filter, roomId: string): boolean {
  if (filter.room?.rooms && !filter.room.rooms.includes(roomId)) return false;
  if (filter.room?.not_rooms?.includes(roomId)) return false;
  return true;
}

/** Keeps only the listed fields (dotted paths, `\.` escapes a dot) of a client event. */
export function pickEventFields(event: Record<string, unknown>, fields: string[] | undefined): Record<string, unknown> {
  if (!fields) return event;
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    const path = field.split(/(?<!\\)\./).map((p) => p.replace(/\\\./g, '.'));
    let source: unknown = event;
    for (const part of path) source = typeof source === 'object' && source !== null ? (source as Record<string, unknown>)[part] : undefined;
    if (source === undefined) continue;
    let target = out;
    for (const part of path.slice(0, -1)) target = (target[part] ??= {}) as Record<string, unknown>;
    target[path.at(-1)!] = source;
  }
  return out;
}
