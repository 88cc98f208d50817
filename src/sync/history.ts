import { stateKey } from '../events/event.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import type { NidState } from '../rooms/state-store.ts';
import { comparePositions, positionAfter, positionBefore, TIMELINE_END, TIMELINE_START, type TopologicalPosition } from '../rooms/timeline.ts';
import { eventMatches, type RoomEventFilter } from './filter.ts';
import type { EventFormatter, Viewer } from './format.ts';
import { formatToken, formatTopologicalToken, parsePaginationToken, type SyncToken } from './token.ts';
import { NotVisibleError, type Visibility } from './visibility.ts';

/** Fetches a room's history from other servers when local history runs out (federation implements it). */
export interface Backfiller {
  /**
   * Stores, as backfilled history, up to `limit` events that precede (and include)
   * `fromEventIds`, the prev events we lack; returns how many events it added.
   */
  backfill(roomId: string, fromEventIds: string[], limit: number): Promise<number>;
}

export interface MessagesPage {
  chunk: Record<string, unknown>[];
  start: string;
  end?: string;
  state: Record<string, unknown>[];
}

/** What one pass over a room's timeline found, and where the next one starts. */
interface TimelinePage {
  events: StoredEvent[];
  next: TopologicalPosition;
  /** Whether more events may exist in that direction (locally, or by backfill going back). */
  more: boolean;
  /** Whether any event matching the filter was read, seen by the user or not. */
  readMatching: boolean;
}

/**
 * A room's history in topological order: /messages (backfilling from other servers
 * when it runs out going back), /context, and the state at a pagination token.
 */
export class RoomHistory {
  private readonly rooms: Rooms;
  private readonly visibility: Visibility;
  private readonly formatter: EventFormatter;
  private readonly currentToken: () => Promise<SyncToken>;
  private readonly backfiller: Backfiller;

  constructor(options: {
    rooms: Rooms;
    visibility: Visibility;
    formatter: EventFormatter;
    /** The sync token now: where /messages going back starts by default. */
    currentToken: () => Promise<SyncToken>;
    /** Where history going back comes from when this server lacks it: federation's /backfill. */
    backfiller: Backfiller;
  }) {
    ({ rooms: this.rooms, visibility: this.visibility, formatter: this.formatter, currentToken: this.currentToken, backfiller: this.backfiller } = options);
  }

  /**
   * GET /rooms/{roomId}/initialSync (deprecated, still in the spec and served by Synapse): the room's
   * state and newest events as the user may see them, and `messages.end`, a sync token that GET
   * /events?room_id= continues from. How a user not in a world_readable room (a guest too) peeks into it.
   */
  async roomInitialSync(roomId: string, viewer: Viewer, limit: number): Promise<Record<string, unknown>> {
    const state = await this.visibility.readableState(roomId, viewer.userId);
    if (!state) throw new NotVisibleError(`${viewer.userId} may not read room ${roomId}`);
    const end = formatToken(await this.currentToken());
    const page = await this.messages(roomId, viewer, { dir: 'b', limit });
    const membership = await this.rooms.membership(roomId, viewer.userId);
    return {
      room_id: roomId,
      ...(membership ? { membership } : {}),
      messages: { chunk: [...page.chunk].reverse(), start: page.end ?? page.start, end },
      state: await this.formatter.formatAll([...state.values()], viewer),
      presence: [],
      receipts: [],
      account_data: [],
    };
  }

  /**
   * Paginates a room's timeline in topological order (client-server GET
   * /rooms/{roomId}/messages), backfilling from other servers when history runs
   * out going back.
   */
  async messages(
    roomId: string,
    viewer: Viewer,
    options: { from?: string; to?: string; dir: 'b' | 'f'; limit: number; filter?: RoomEventFilter },
  ): Promise<MessagesPage> {
    const { dir, limit, filter } = options;
    let from = options.from ? await this.positionOf(roomId, options.from) : dir === 'b' ? TIMELINE_END : TIMELINE_START;
    let bound = options.to ? await this.positionOf(roomId, options.to) : dir === 'b' ? TIMELINE_START : TIMELINE_END;
    const membership = await this.rooms.membership(roomId, viewer.userId);
    const ceiling = await this.historyCeiling(roomId, viewer.userId, membership);
    if (ceiling && dir === 'b') from = earlier(from, ceiling);
    if (ceiling && dir === 'f') bound = earlier(bound, ceiling);
    // A client that gives `to` holds what lies beyond it: no backfill.
    const page = await this.page(roomId, viewer.userId, membership, { from, bound, dir, limit, filter, backfill: !options.to });

    // lazy_load_members: each sender's member event as it was at their last event in the chunk (in the order
    // of paging, so going back the earliest), which is where the client's view of them continues from.
    const state: Record<string, unknown>[] = [];
    if (filter?.lazy_load_members) {
      const lastBySender = new Map<string, StoredEvent>();
      for (const stored of page.events) lastBySender.set(stored.event.sender, stored);
      for (const [sender, stored] of lastBySender) {
        const nid = (await this.rooms.stateAtEvent(stored.event.event_id, 'after'))?.get(stateKey('m.room.member', sender));
        const member = nid === undefined ? undefined : await this.rooms.getEventByNid(nid);
        if (member) state.push((await this.formatter.format(member, viewer)) as unknown as Record<string, unknown>);
      }
    }
    const result: MessagesPage = {
      chunk: (await this.formatter.formatAll(page.events, viewer)) as unknown as Record<string, unknown>[],
      start: options.from ?? (dir === 'b' ? formatToken(await this.currentToken()) : formatTopologicalToken(TIMELINE_START)),
      state,
    };
    // No `end` only when this page read nothing and nothing more can come: the spec would allow leaving it
    // out of a last page with events too, but Synapse gives it there, and clients page on until a page lacks it.
    if (page.more || page.readMatching) result.end = formatTopologicalToken(page.next);
    return result;
  }

  /**
   * Events around one event, in the same order as /messages (client-server GET /rooms/{roomId}/context/{eventId});
   * undefined for an event we do not hold in the room, NotVisibleError for one the viewer may not see.
   */
  async context(roomId: string, eventId: string, viewer: Viewer, limit: number, filter?: RoomEventFilter) {
    const target = await this.rooms.getEvent(eventId);
    if (!target || target.event.room_id !== roomId || target.streamOrdering === null) return undefined;
    const membership = await this.rooms.membership(roomId, viewer.userId);
    if (!(await this.visibility.canSee(viewer.userId, target, membership))) throw new NotVisibleError(`${viewer.userId} may not see ${eventId}`);
    const ceiling = await this.historyCeiling(roomId, viewer.userId, membership);
    const half = Math.floor(limit / 2);
    const common = { filter, backfill: false };
    const before = await this.page(roomId, viewer.userId, membership, { ...common, from: positionBefore(target), bound: TIMELINE_START, dir: 'b', limit: half });
    const after = await this.page(roomId, viewer.userId, membership, { ...common, from: positionAfter(target), bound: ceiling ?? TIMELINE_END, dir: 'f', limit: limit - half });
    const senders = new Set([target, ...before.events, ...after.events].map((e) => e.event.sender));
    const state: StoredEvent[] = [];
    for (const nid of ((await this.rooms.stateAtEvent(eventId, 'after')) ?? new Map()).values()) {
      const stored = await this.rooms.getEventByNid(nid);
      if (!stored) continue;
      if (filter?.lazy_load_members && stored.event.type === 'm.room.member' && !senders.has(stored.event.state_key!)) continue;
      state.push(stored);
    }
    return {
      event: await this.formatter.format(target, viewer),
      events_before: await this.formatter.formatAll(before.events, viewer),
      events_after: await this.formatter.formatAll(after.events, viewer),
      start: formatTopologicalToken(before.next),
      end: formatTopologicalToken(after.next),
      state: await this.formatter.formatAll(state, viewer),
    };
  }

  /** The room's state at a sync or pagination token (GET /members?at=). */
  async stateAtToken(roomId: string, text: string): Promise<NidState> {
    const token = parsePaginationToken(text);
    if ('sync' in token) return this.rooms.timeline.stateAtStream(roomId, token.sync.stream);
    return this.rooms.timeline.stateAtPosition(roomId, token.topological);
  }

  /** Where a /messages token lies in the room's topological order. */
  private async positionOf(roomId: string, text: string): Promise<TopologicalPosition> {
    const token = parsePaginationToken(text);
    return 'topological' in token ? token.topological : this.rooms.timeline.positionAtStream(roomId, token.sync.stream);
  }

  /** A user who left sees history only up to their leave; one never in the room, what its visibility allows. */
  private async historyCeiling(roomId: string, userId: string, membership: string | undefined): Promise<TopologicalPosition | undefined> {
    if (membership === 'join') return undefined;
    const latest = await this.rooms.localMembership(userId, roomId);
    const event = latest && (await this.rooms.getEvent(latest.eventId));
    if (!event) return undefined;
    return event.streamOrdering === null ? TIMELINE_START : positionAfter(event);
  }

  /**
   * Up to `limit` visible events from `from` towards `bound`. Going back, when local
   * history runs out short of `limit` at an event whose prev events we lack, asks the
   * backfiller for them once and reads on from where it was.
   */
  private async page(
    roomId: string,
    userId: string,
    membership: string | undefined,
    request: { from: TopologicalPosition; bound: TopologicalPosition; dir: 'b' | 'f'; limit: number; filter: RoomEventFilter | undefined; backfill: boolean },
  ): Promise<TimelinePage> {
    const { dir, limit, filter } = request;
    const picked: StoredEvent[] = [];
    let next = request.from;
    let lastRead: StoredEvent | undefined;
    let readMatching = false;
    let backfilled = false;
    for (;;) {
      let exhausted = true;
      for await (const stored of this.rooms.timeline.paginate(roomId, next, dir, request.bound, limit * 2)) {
        // One event past a full page tells whether more exist.
        if (picked.length === limit) {
          exhausted = false;
          break;
        }
        lastRead = stored;
        next = dir === 'b' ? positionBefore(stored) : positionAfter(stored);
        if (!eventMatches(filter, stored.event)) continue;
        readMatching = true;
        if (await this.visibility.canSee(userId, stored, membership)) picked.push(stored);
      }
      if (!exhausted || dir === 'f') return { events: picked, next, more: !exhausted, readMatching };
      // Local history has run out going back: other servers may hold what precedes it.
      const gap = request.backfill ? await this.gapBefore(roomId, next, lastRead) : [];
      if (gap.length === 0) return { events: picked, next, more: false, readMatching };
      if (backfilled || picked.length === limit) return { events: picked, next, more: true, readMatching };
      backfilled = true;
      if ((await this.backfiller.backfill(roomId, gap, limit)) === 0) return { events: picked, next, more: false, readMatching };
    }
  }

  /** The prev events we lack of the oldest timeline event after `position` (the last one read, if any). */
  private async gapBefore(roomId: string, position: TopologicalPosition, lastRead: StoredEvent | undefined): Promise<string[]> {
    let oldest = lastRead;
    if (!oldest) {
      for await (const stored of this.rooms.timeline.paginate(roomId, position, 'f', TIMELINE_END, 1)) {
        oldest = stored;
        break;
      }
    }
    return oldest ? this.rooms.timeline.missingPrevEvents(oldest) : [];
  }
}

function earlier(a: TopologicalPosition, b: TopologicalPosition): TopologicalPosition {
  return comparePositions(a, b) <= 0 ? a : b;
}
