import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import type { ClientEvent, EventFormatter, Viewer } from './format.ts';
import type { Notifier } from './notifier.ts';
import { formatToken, parseToken, type SyncToken } from './token.ts';
import { NotVisibleError, type Visibility } from './visibility.ts';

/** The newest events of one room that one answer holds; a room busier than that between two polls loses its oldest. */
const MAX_EVENTS_PER_ROOM = 1000;

export interface EventStreamPage {
  start: string;
  end: string;
  chunk: ClientEvent[];
}

/**
 * The deprecated event stream (client-server GET /events), still in the spec and served by
 * Synapse for clients that poll it: the room events after a sync token that the user may
 * see, in stream order, in the rooms they are joined to, have left since, or are invited to
 * (the invite itself), or with `room_id` in that one room, which a user not in it may read when its
 * history is world_readable (the spec's peeking). It long-polls as /sync does. Typing, receipts
 * and presence are not in it.
 */
export class EventStream {
  constructor(
    private readonly rooms: Rooms,
    private readonly visibility: Visibility,
    private readonly formatter: EventFormatter,
    private readonly notifier: Notifier,
    private readonly currentToken: () => Promise<SyncToken>,
    private readonly now: () => number,
  ) {}

  /** From `from` (a /sync or /events token; now when absent), at once when there is news, else when news comes or `timeoutMs` passes. */
  async events(viewer: Viewer, options: { from?: string; timeoutMs: number; roomId?: string }): Promise<EventStreamPage> {
    const start = options.from === undefined ? await this.currentToken() : parseToken(options.from);
    const deadline = this.now() + options.timeoutMs;
    const { roomId } = options;
    // One room (the spec's peeking, `room_id`): one the user is in, or a world_readable one.
    if (roomId !== undefined && !(await this.visibility.mayRead(roomId, viewer.userId))) throw new NotVisibleError(`${viewer.userId} may not read room ${roomId}`);
    for (;;) {
      const rooms = new Set(roomId !== undefined ? [roomId] : await this.rooms.roomsOf(viewer.userId, ['join', 'invite', 'knock']));
      const listener = this.notifier.listen(viewer.userId, rooms, Math.max(0, deadline - this.now()));
      try {
        const upTo = await this.currentToken();
        const events = roomId !== undefined ? await this.inRoom(viewer.userId, roomId, start.stream, upTo.stream) : await this.between(viewer.userId, start.stream, upTo.stream);
        if (events.length > 0 || deadline <= this.now() || !(await listener.changed)) {
          return { start: formatToken(start), end: formatToken({ ...upTo, ephemeral: start.ephemeral }), chunk: await this.formatter.formatAll(events, viewer) };
        }
      } finally {
        listener.cancel();
      }
    }
  }

  /** One room's events in (after, upTo] the user may see, oldest first: a peek into a room they may not be in. */
  private async inRoom(userId: string, roomId: string, after: number, upTo: number): Promise<StoredEvent[]> {
    const picked: StoredEvent[] = [];
    if (upTo <= after) return picked;
    for await (const stored of this.rooms.timeline.streamRange(roomId, after, upTo, 100)) {
      if (await this.visibility.canSee(userId, stored)) picked.push(stored);
      if (picked.length === MAX_EVENTS_PER_ROOM) break;
    }
    return picked.reverse();
  }

  /** The events in (after, upTo] the user may see, oldest first. */
  private async between(userId: string, after: number, upTo: number): Promise<StoredEvent[]> {
    if (upTo <= after) return [];
    const withEvents = new Set(await this.rooms.timeline.roomsWithEvents(after, upTo));
    // Each event with its place in the stream: an invite from another server, an outlier, has none
    // of its own and goes where the membership changed.
    const picked = new Map<string, { stored: StoredEvent; position: number }>();
    for (const m of await this.rooms.timeline.membershipsOf(userId, upTo)) {
      const changed = m.streamOrdering > after;
      if (m.membership === 'invite' && changed) {
        const invite = await this.rooms.getEvent(m.eventId);
        if (invite) picked.set(invite.event.event_id, { stored: invite, position: invite.streamOrdering ?? m.streamOrdering });
      }
      // A room left since `after`: what came up to the leave.
      const until = m.membership === 'join' ? upTo : (m.membership === 'leave' || m.membership === 'ban') && changed ? m.streamOrdering : undefined;
      if (until === undefined || !withEvents.has(m.roomId)) continue;
      let count = 0;
      for await (const stored of this.rooms.timeline.streamRange(m.roomId, after, until, 100)) {
        if (!(await this.visibility.canSee(userId, stored, m.membership))) continue;
        picked.set(stored.event.event_id, { stored, position: stored.streamOrdering! });
        if (++count === MAX_EVENTS_PER_ROOM) break;
      }
    }
    return [...picked.values()].sort((a, b) => a.position - b.position).map((p) => p.stored);
  }
}
