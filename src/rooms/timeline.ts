import { referenceIds } from '../events/pdu.ts';
import type { Database } from '../storage/database.ts';
import type { NidState } from './state-store.ts';
import type { EventLookup, StoredEvent } from './types.ts';

/**
 * A place between two events in a room's topological order, (depth, stream
 * ordering): the events at or before it come before it. Stream ordering breaks
 * ties in arrival order; backfilled history has negative stream orderings, so
 * it sorts before live events of the same depth.
 */
export interface TopologicalPosition {
  depth: number;
  stream: number;
}

/** Before every event (depths are never negative). */
export const TIMELINE_START: TopologicalPosition = { depth: -1, stream: 0 };
/** After every event. */
export const TIMELINE_END: TopologicalPosition = { depth: Number.MAX_SAFE_INTEGER, stream: Number.MAX_SAFE_INTEGER };

/** The position just after a timeline event. */
export const positionAfter = (stored: StoredEvent): TopologicalPosition => ({ depth: stored.event.depth, stream: stored.streamOrdering! });
/** The position just before a timeline event (stream orderings are distinct integers). */
export const positionBefore = (stored: StoredEvent): TopologicalPosition => ({ depth: stored.event.depth, stream: stored.streamOrdering! - 1 });

export function comparePositions(a: TopologicalPosition, b: TopologicalPosition): number {
  return a.depth - b.depth || a.stream - b.stream;
}

/** Live events are those in the stream; backfilled history sits below 0 and never reaches /sync. */
const LIVE = 'stream_ordering > 0';
/** Timeline events: accepted events with a place in the room (outliers, rejected and soft-failed ones have none). */
const TIMELINE = 'stream_ordering IS NOT NULL';

/**
 * Every read of a room's timeline that /sync, /messages and /context make: by
 * stream position for /sync (live events only), by topological order for
 * pagination, so history backfilled later takes its place by the DAG.
 */
export class RoomTimeline {
  constructor(
    private readonly db: Database,
    private readonly rooms: EventLookup,
  ) {}

  /** Live events with stream positions in (after, upTo], newest first, read `pageSize` rows at a time. */
  async *streamRange(roomId: string, after: number, upTo: number, pageSize: number): AsyncGenerator<StoredEvent> {
    pageSize = Math.max(1, pageSize);
    let cursor = upTo;
    for (;;) {
      const rows = await this.db.all<{ event_nid: number; stream_ordering: number }>(
        'SELECT event_nid, stream_ordering FROM events WHERE room_id = ? AND stream_ordering > ? AND stream_ordering <= ? ORDER BY stream_ordering DESC LIMIT ?',
        [roomId, Math.max(after, 0), cursor, pageSize],
      );
      yield* this.load(rows);
      if (rows.length < pageSize) return;
      cursor = rows.at(-1)!.stream_ordering - 1;
    }
  }

  /**
   * Timeline events in topological order, read `pageSize` rows at a time: going
   * back ('b'), those at or before `from` and after `bound`, newest first; going
   * forward ('f'), those after `from` and at or before `bound`, oldest first.
   */
  async *paginate(roomId: string, from: TopologicalPosition, dir: 'b' | 'f', bound: TopologicalPosition, pageSize: number): AsyncGenerator<StoredEvent> {
    pageSize = Math.max(1, pageSize);
    let cursor = from;
    const [low, high, order] = dir === 'b' ? ['>', '<=', 'DESC'] : ['<=', '>', 'ASC'];
    for (;;) {
      // Row values keep the range on the (room_id, depth, stream_ordering) index.
      const rows = await this.db.all<{ event_nid: number; depth: number; stream_ordering: number }>(
        `SELECT event_nid, depth, stream_ordering FROM events
         WHERE room_id = ? AND ${TIMELINE} AND (depth, stream_ordering) ${high} (?, ?) AND (depth, stream_ordering) ${low} (?, ?)
         ORDER BY depth ${order}, stream_ordering ${order} LIMIT ?`,
        [roomId, cursor.depth, cursor.stream, bound.depth, bound.stream, pageSize],
      );
      yield* this.load(rows);
      if (rows.length < pageSize) return;
      const last = rows.at(-1)!;
      cursor = { depth: last.depth, stream: dir === 'b' ? last.stream_ordering - 1 : last.stream_ordering };
    }
  }

  /** Backfilled history (below the live stream, which /sync never reads) at or before `from`, newest first. */
  async *backfilledBefore(roomId: string, from: TopologicalPosition, pageSize: number): AsyncGenerator<StoredEvent> {
    pageSize = Math.max(1, pageSize);
    let cursor = from;
    for (;;) {
      const rows = await this.db.all<{ event_nid: number; depth: number; stream_ordering: number }>(
        `SELECT event_nid, depth, stream_ordering FROM events
         WHERE room_id = ? AND stream_ordering < 0 AND (depth, stream_ordering) <= (?, ?)
         ORDER BY depth DESC, stream_ordering DESC LIMIT ?`,
        [roomId, cursor.depth, cursor.stream, pageSize],
      );
      yield* this.load(rows);
      if (rows.length < pageSize) return;
      const last = rows.at(-1)!;
      cursor = { depth: last.depth, stream: last.stream_ordering - 1 };
    }
  }

  private async *load(rows: { event_nid: number }[]): AsyncGenerator<StoredEvent> {
    for (const row of rows) {
      const stored = await this.rooms.getEventByNid(row.event_nid);
      if (stored) yield stored;
    }
  }

  /**
   * Where a stream position (a /sync token) falls in topological order: after the
   * latest live event at or before it (latest by the DAG, so no event the client
   * saw before that position falls after it), or, when there is none, just before
   * the room's first live event, so backfilled history still lies behind it.
   */
  async positionAtStream(roomId: string, stream: number): Promise<TopologicalPosition> {
    const latest = await this.db.get<{ depth: number; stream_ordering: number }>(
      `SELECT depth, stream_ordering FROM events WHERE room_id = ? AND ${LIVE} AND stream_ordering <= ?
       ORDER BY depth DESC, stream_ordering DESC LIMIT 1`,
      [roomId, stream],
    );
    if (latest) return { depth: latest.depth, stream: latest.stream_ordering };
    const first = await this.db.get<{ depth: number; stream_ordering: number }>(
      `SELECT depth, stream_ordering FROM events WHERE room_id = ? AND ${LIVE} ORDER BY stream_ordering LIMIT 1`, [roomId],
    );
    return first ? { depth: first.depth, stream: first.stream_ordering - 1 } : TIMELINE_START;
  }

  /** The room's state after its latest live event at or before a stream position. */
  async stateAtStream(roomId: string, stream: number): Promise<NidState> {
    const row = await this.db.get<{ event_id: string }>(
      `SELECT event_id FROM events WHERE room_id = ? AND ${LIVE} AND stream_ordering <= ? ORDER BY stream_ordering DESC LIMIT 1`,
      [roomId, stream],
    );
    return (row && (await this.rooms.stateAtEvent(row.event_id, 'after'))) ?? new Map();
  }

  /** The room's state after its latest timeline event at or before a topological position. */
  async stateAtPosition(roomId: string, position: TopologicalPosition): Promise<NidState> {
    for await (const stored of this.paginate(roomId, position, 'b', TIMELINE_START, 1)) {
      return (await this.rooms.stateAtEvent(stored.event.event_id, 'after')) ?? new Map();
    }
    return new Map();
  }

  /** Rooms with live events in the stream range (after, upTo]. */
  async roomsWithEvents(after: number, upTo: number): Promise<string[]> {
    const rows = await this.db.all<{ room_id: string }>(
      'SELECT DISTINCT room_id FROM events WHERE stream_ordering > ? AND stream_ordering <= ?', [Math.max(after, 0), upTo],
    );
    return rows.map((r) => r.room_id);
  }

  /**
   * The stream position of each room's latest live event of one of `types` at or before its bound
   * (sliding sync's bump stamp), one index probe per room and type (events_by_room_type_stream);
   * rooms with none are left out.
   */
  async latestOfTypes(rooms: { roomId: string; upTo: number }[], types: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    if (rooms.length === 0 || types.length === 0) return out;
    const probes = types.map((_, i) => `(SELECT MAX(stream_ordering) FROM events WHERE room_id = r.room_id AND type = ? AND stream_ordering > 0 AND stream_ordering <= r.up_to) AS s${i}`);
    const latest = types.length === 1 ? 's0' : `MAX(${types.map((_, i) => `COALESCE(s${i}, 0)`).join(', ')})`;
    // Rooms go in as a VALUES list, a few hundred at a time (within SQLite's bound on parameters).
    for (let start = 0; start < rooms.length; start += 400) {
      const chunk = rooms.slice(start, start + 400);
      const rows = await this.db.all<{ room_id: string; stamp: number | null }>(
        `WITH r(room_id, up_to) AS (VALUES ${chunk.map(() => '(?, ?)').join(', ')})
         SELECT room_id, ${latest} AS stamp FROM (SELECT r.room_id, ${probes.join(', ')} FROM r)`,
        [...chunk.flatMap((r) => [r.roomId, r.upTo]), ...types],
      );
      for (const row of rows) if (row.stamp) out.set(row.room_id, row.stamp);
    }
    return out;
  }

  /** A local user's latest membership in each room, with the stream position it changed at, up to `upTo`. */
  async membershipsOf(userId: string, upTo: number): Promise<LocalMembership[]> {
    const rows = await this.db.all<{ room_id: string; membership: string; event_id: string; stream_ordering: number; forgotten: number }>(
      'SELECT room_id, membership, event_id, stream_ordering, forgotten FROM local_memberships WHERE user_id = ? AND stream_ordering <= ?',
      [userId, upTo],
    );
    return rows.map((r) => ({ roomId: r.room_id, membership: r.membership, eventId: r.event_id, streamOrdering: r.stream_ordering, forgotten: r.forgotten === 1 }));
  }

  /**
   * The prev events of a timeline event that we do not hold as timeline events
   * (unknown, or held only as outliers): where backfill should start. None for
   * m.room.create, where history begins.
   */
  async missingPrevEvents(stored: StoredEvent): Promise<string[]> {
    if (stored.event.type === 'm.room.create') return [];
    const missing: string[] = [];
    for (const id of referenceIds(stored.event.prev_events)) {
      const prev = await this.rooms.getEvent(id);
      if (!prev || prev.outlier) missing.push(id);
    }
    return missing;
  }
}

export interface LocalMembership {
  roomId: string;
  membership: string;
  eventId: string;
  streamOrdering: number;
  forgotten: boolean;
}
