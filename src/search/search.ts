import { stateKey } from '../events/event.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import { positionAfter, positionBefore, TIMELINE_END, TIMELINE_START } from '../rooms/timeline.ts';
import { eventMatches, type RoomEventFilter } from '../sync/filter.ts';
import type { ClientEvent, EventFormatter, Viewer } from '../sync/format.ts';
import { formatTopologicalToken, TokenError } from '../sync/token.ts';
import type { Visibility } from '../sync/visibility.ts';
import { parseSearchTerm, type SearchKey } from './query.ts';
import { bm25 } from './rank.ts';
import type { SearchIndex, SearchScope } from './search-index.ts';

/** `search_categories.room_events` of a request (client-server POST /search). */
export interface RoomEventsCriteria {
  search_term: string;
  keys?: SearchKey[];
  filter?: RoomEventFilter;
  order_by?: 'rank' | 'recent';
  event_context?: { before_limit?: number; after_limit?: number; include_profile?: boolean };
  include_state?: boolean;
}

export interface SearchResultItem {
  rank: number;
  result: ClientEvent;
  context?: {
    start: string;
    end: string;
    events_before: ClientEvent[];
    events_after: ClientEvent[];
    profile_info?: Record<string, { displayname?: string; avatar_url?: string }>;
  };
}

export interface RoomEventsResults {
  count: number;
  highlights: string[];
  results: SearchResultItem[];
  state?: Record<string, ClientEvent[]>;
  next_batch?: string;
}

export const DEFAULT_SEARCH_LIMIT = 10;
export const MAX_SEARCH_LIMIT = 100;
const DEFAULT_CONTEXT = 5;
const MAX_CONTEXT = 50;
/**
 * `count` is "approximate" (the spec's word). Up to this many candidates (the first in the
 * order asked) are checked against history visibility for it; past that, the share visible
 * among those checked stands for the rest, so a query that matches half the server costs the
 * same visibility checks as one that matches two hundred events.
 */
const COUNT_CHECKED = 200;
/** Memberships from which a user may see some of a room's history (Visibility.canSee decides which). */
const SEARCHED_MEMBERSHIPS = ['join', 'invite', 'leave', 'ban'];

/** Where a page ended, in the order it was asked in: `next_batch`. */
interface Cursor {
  order: 'rank' | 'recent';
  rank: number;
  stream: number;
}

function formatCursor(c: Cursor): string {
  return c.order === 'recent' ? `r${c.stream}` : `k${c.rank}_${c.stream}`;
}

function parseCursor(text: string, order: 'rank' | 'recent'): Cursor {
  const recent = /^r(-?\d{1,16})$/.exec(text);
  const ranked = /^k(\d+(?:\.\d+)?(?:e[+-]?\d+)?)_(-?\d{1,16})$/.exec(text);
  if (order === 'recent' && recent) return { order, rank: 0, stream: Number(recent[1]) };
  if (order === 'rank' && ranked) return { order, rank: Number(ranked[1]), stream: Number(ranked[2]) };
  throw new TokenError(`invalid next_batch ${JSON.stringify(text)} for order_by ${order}`);
}

/**
 * Server-side search of room events (client-server §Server Side Search): the words
 * through the FTS4 index, then per event the history visibility rules, so a user finds
 * what they could read in the room and nothing else.
 */
export class Search {
  constructor(
    private readonly rooms: Rooms,
    private readonly index: SearchIndex,
    private readonly visibility: Visibility,
    private readonly formatter: EventFormatter,
  ) {}

  async roomEvents(viewer: Viewer, criteria: RoomEventsCriteria, nextBatch?: string): Promise<RoomEventsResults> {
    const order = criteria.order_by ?? 'rank';
    const after = nextBatch === undefined ? undefined : parseCursor(nextBatch, order);
    const filter = criteria.filter;
    const limit = Math.min(filter?.limit ?? DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT);
    const query = parseSearchTerm(criteria.search_term, criteria.keys);
    const empty: RoomEventsResults = { count: 0, highlights: [], results: [] };
    if (query.match === undefined || limit === 0) return empty;

    let roomIds = await this.rooms.roomsOf(viewer.userId, SEARCHED_MEMBERSHIPS);
    if (filter?.rooms) roomIds = roomIds.filter((r) => filter.rooms!.includes(r));
    if (filter?.not_rooms) roomIds = roomIds.filter((r) => !filter.not_rooms!.includes(r));

    const scope: SearchScope = { roomIds, senders: filter?.senders, notSenders: filter?.not_senders };
    const metaMatches = (c: { type: string; sender: string; roomId: string }) => eventMatches(filter, { type: c.type, sender: c.sender, room_id: c.roomId });

    const memberships = new Map<string, string | undefined>();
    const seen = new Map<number, StoredEvent | null>();
    /** The event if the user may see it and it passes the filter (contains_url needs the content), else null. */
    const visible = async (c: { nid: number; roomId: string }): Promise<StoredEvent | null> => {
      const known = seen.get(c.nid);
      if (known !== undefined) return known;
      if (!memberships.has(c.roomId)) memberships.set(c.roomId, await this.rooms.membership(c.roomId, viewer.userId));
      const stored = await this.rooms.getEventByNid(c.nid);
      const ok = stored && eventMatches(filter, stored.event) && !this.formatter.hasSelfDestructed(stored.event) && (await this.visibility.canSee(viewer.userId, stored, memberships.get(c.roomId))) ? stored : null;
      seen.set(c.nid, ok);
      return ok;
    };

    // The page: past the cursor, in order, as many visible events as asked, and one more to know whether more exist.
    const page: { stored: StoredEvent; rank: number }[] = [];
    let more = false;
    /** The first candidates in order (from the start, not the cursor), for `count`. */
    let sample: { nid: number; roomId: string }[];
    let total: number;
    if (order === 'rank') {
      // Every candidate must be scored to know the best: matchinfo for all of them, BM25 here.
      const ranked = (await this.index.candidates(query.match, scope)).filter(metaMatches).map((c) => ({ ...c, rank: bm25(c.matchinfo) }));
      ranked.sort((a, b) => b.rank - a.rank || b.stream - a.stream);
      for (const r of ranked) {
        if (after && !(r.rank < after.rank || (r.rank === after.rank && r.stream < after.stream))) continue;
        const stored = await visible(r);
        if (!stored) continue;
        if (page.length === limit) {
          more = true;
          break;
        }
        page.push({ stored, rank: r.rank });
      }
      sample = ranked.slice(0, COUNT_CHECKED);
      total = ranked.length;
    } else {
      // Newest first, a batch at a time: SQLite keeps the top of the order; only the page is scored.
      let below = after?.stream ?? Number.MAX_SAFE_INTEGER;
      const batch = Math.max(2 * (limit + 1), 20);
      walk: for (;;) {
        const rows = await this.index.newest(query.match, scope, below, batch);
        for (const r of rows) {
          below = r.stream;
          if (!metaMatches(r)) continue;
          const stored = await visible(r);
          if (!stored) continue;
          if (page.length === limit) {
            more = true;
            break walk;
          }
          page.push({ stored, rank: 0 });
        }
        if (rows.length < batch) break;
      }
      const scores = await this.index.matchinfo(query.match, page.map((p) => p.stored.nid));
      for (const p of page) p.rank = bm25(scores.get(p.stored.nid) ?? new Uint8Array(12));
      total = await this.index.count(query.match, scope);
      sample = total <= COUNT_CHECKED && !after && !more ? page.map((p) => ({ nid: p.stored.nid, roomId: p.stored.event.room_id })) : (await this.index.newest(query.match, scope, Number.MAX_SAFE_INTEGER, COUNT_CHECKED)).filter(metaMatches);
    }

    // count: exact up to COUNT_CHECKED candidates, then scaled from the share of those visible.
    let shown = 0;
    for (const c of sample) if (await visible(c)) shown++;
    const count = total <= COUNT_CHECKED ? shown : Math.round((shown / Math.max(1, sample.length)) * total);

    const results: SearchResultItem[] = [];
    for (const { stored, rank } of page) {
      const item: SearchResultItem = { rank, result: await this.formatter.format(stored, viewer) };
      if (criteria.event_context) item.context = await this.context(stored, viewer, criteria.event_context, memberships.get(stored.event.room_id));
      results.push(item);
    }
    const matched = await this.index.matchedWords(query.match, page.map((p) => p.stored.nid));
    const out: RoomEventsResults = { count, highlights: [...new Set([...query.words, ...matched])], results };
    if (criteria.include_state) {
      const state: Record<string, ClientEvent[]> = {};
      for (const roomId of new Set(page.map((p) => p.stored.event.room_id))) {
        const readable = await this.visibility.readableState(roomId, viewer.userId);
        if (readable) state[roomId] = await this.formatter.formatAll([...readable.values()], viewer);
      }
      out.state = state;
    }
    const last = page.at(-1);
    if (more && last) out.next_batch = formatCursor({ order, rank: last.rank, stream: last.stored.streamOrdering! });
    return out;
  }

  /** The events around a result that the user may see, with the senders' profiles as they were at the result. */
  private async context(
    target: StoredEvent,
    viewer: Viewer,
    options: NonNullable<RoomEventsCriteria['event_context']>,
    membership: string | undefined,
  ): Promise<NonNullable<SearchResultItem['context']>> {
    const roomId = target.event.room_id;
    const beforeLimit = Math.min(options.before_limit ?? DEFAULT_CONTEXT, MAX_CONTEXT);
    const afterLimit = Math.min(options.after_limit ?? DEFAULT_CONTEXT, MAX_CONTEXT);
    const around = async (dir: 'b' | 'f', wanted: number) => {
      const picked: StoredEvent[] = [];
      let next = dir === 'b' ? positionBefore(target) : positionAfter(target);
      if (wanted === 0) return { picked, next };
      // Bounded: a room where the user sees nothing around the result is not read to its end.
      let read = 0;
      const from = next;
      for await (const stored of this.rooms.timeline.paginate(roomId, from, dir, dir === 'b' ? TIMELINE_START : TIMELINE_END, wanted + 1)) {
        if (picked.length === wanted || read++ > wanted * 4 + 20) break;
        next = dir === 'b' ? positionBefore(stored) : positionAfter(stored);
        if (await this.visibility.canSee(viewer.userId, stored, membership)) picked.push(stored);
      }
      return { picked, next };
    };
    const before = await around('b', beforeLimit);
    const afterwards = await around('f', afterLimit);
    const context: NonNullable<SearchResultItem['context']> = {
      start: formatTopologicalToken(before.next),
      end: formatTopologicalToken(afterwards.next),
      events_before: await this.formatter.formatAll(before.picked, viewer),
      events_after: await this.formatter.formatAll(afterwards.picked, viewer),
    };
    if (options.include_profile) {
      const profiles: Record<string, { displayname?: string; avatar_url?: string }> = {};
      const state = await this.rooms.stateAtEvent(target.event.event_id, 'after');
      for (const sender of new Set([target, ...before.picked, ...afterwards.picked].map((e) => e.event.sender))) {
        const nid = state?.get(stateKey('m.room.member', sender));
        const content = nid === undefined ? undefined : (await this.rooms.getEventByNid(nid))?.event.content;
        const profile: { displayname?: string; avatar_url?: string } = {};
        if (typeof content?.['displayname'] === 'string') profile.displayname = content['displayname'];
        if (typeof content?.['avatar_url'] === 'string') profile.avatar_url = content['avatar_url'];
        profiles[sender] = profile;
      }
      context.profile_info = profiles;
    }
    return context;
  }
}
