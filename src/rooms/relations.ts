import type { RoomEvent } from '../events/event.ts';
import type { Database, WriteTransaction } from '../storage/database.ts';
import { RoomError } from './errors.ts';
import type { TopologicalPosition } from './timeline.ts';
import type { StoredEvent } from './types.ts';

// The relations index (client-server §Forming relationships between events): one row per
// timeline event whose content has an `m.relates_to` with a `rel_type` and an `event_id`.
// The room engine fills it inside the write that stores an event (local or remote,
// live or backfilled, or an outlier promoted into the timeline); rejected and soft-failed
// events never reach it, and a redacted child is removed in the redaction's write.

/** A relation an event declares: its parent, the relation's type and, for annotations, the key. */
export interface Relation {
  parentId: string;
  relType: string;
  key: string | null;
}

/** The relation an event's content declares, if any. State events take part in none. */
export function relationOf(event: RoomEvent): Relation | undefined {
  if (event.state_key !== undefined) return undefined;
  const relatesTo = event.content['m.relates_to'];
  if (typeof relatesTo !== 'object' || relatesTo === null || Array.isArray(relatesTo)) return undefined;
  const relType = (relatesTo as Record<string, unknown>)['rel_type'];
  const parentId = (relatesTo as Record<string, unknown>)['event_id'];
  if (typeof relType !== 'string' || relType === '' || typeof parentId !== 'string' || !parentId.startsWith('$') || parentId === event.event_id) return undefined;
  const key = (relatesTo as Record<string, unknown>)['key'];
  return { parentId, relType, key: relType === 'm.annotation' && typeof key === 'string' ? key : null };
}

/** Adds a timeline event to the index (inside the write that stores it). */
export function indexRelation(tx: WriteTransaction, stored: StoredEvent): void {
  if (stored.streamOrdering === null || stored.rejected || stored.softFailed || stored.redactedBy) return;
  const relation = relationOf(stored.event);
  if (!relation) return;
  const e = stored.event;
  tx.run(
    `INSERT OR IGNORE INTO event_relations (event_nid, event_id, room_id, parent_id, rel_type, type, sender, aggregation_key, depth, stream_ordering, origin_server_ts)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [stored.nid, e.event_id, e.room_id, relation.parentId, relation.relType, e.type, e.sender, relation.key, e.depth, stored.streamOrdering, e.origin_server_ts],
  );
}

/** A redacted event loses its relation (its `m.relates_to` is gone from the redacted content). */
export function unindexRelation(tx: WriteTransaction, eventId: string): void {
  tx.run('DELETE FROM event_relations WHERE event_id = ?', [eventId]);
}

/**
 * A local user may annotate an event with one key once (Synapse's rule): a second reaction
 * with the same sender, parent, event type and key is refused, checked inside the write so
 * two sends at once cannot both pass.
 */
export function refuseDuplicateAnnotation(tx: WriteTransaction, event: RoomEvent): void {
  const relation = relationOf(event);
  if (relation?.relType !== 'm.annotation' || relation.key === null) return;
  const found = tx.get(
    "SELECT 1 FROM event_relations WHERE parent_id = ? AND sender = ? AND aggregation_key = ? AND rel_type = 'm.annotation' AND type = ?",
    [relation.parentId, event.sender, relation.key, event.type],
  );
  if (found) throw new RoomError('duplicate_annotation', `${event.sender} already annotated ${relation.parentId} with this key`);
}

/** Which relation types a parent has children of, how many, and how many the user sent. */
export type RelationSummary = Map<string, { count: number; mine: number }>;

export interface ChildQuery {
  relType?: string;
  eventType?: string;
  /** Read from here (exclusive going forward, inclusive going back, as /messages does). */
  from: TopologicalPosition;
  bound: TopologicalPosition;
  dir: 'b' | 'f';
  /** Follow relations of relations, up to this many levels (1: direct children only). */
  depth: number;
}

/** How many parents one batched summary query names at most. */
const BATCH = 500;
/** How many events a recursive walk collects as parents at most. */
const MAX_RECURSE_PARENTS = 1000;

/** Reads of the relations index; only the room engine writes it. */
export class RoomRelations {
  constructor(
    private readonly db: Database,
    private readonly loadByNid: (nid: number) => Promise<StoredEvent | undefined>,
  ) {}

  /**
   * For each parent, the relation types it has children of, with counts: one indexed
   * query for many parents. Most events have no children and cost nothing more.
   */
  async summaries(parentIds: readonly string[], userId: string): Promise<Map<string, RelationSummary>> {
    const out = new Map<string, RelationSummary>();
    for (let i = 0; i < parentIds.length; i += BATCH) {
      const ids = parentIds.slice(i, i + BATCH);
      const rows = await this.db.all<{ parent_id: string; rel_type: string; n: number; mine: number }>(
        `SELECT parent_id, rel_type, COUNT(*) AS n, SUM(sender = ?) AS mine FROM event_relations
         WHERE parent_id IN (${ids.map(() => '?').join(',')}) GROUP BY parent_id, rel_type`,
        [userId, ...ids],
      );
      for (const row of rows) {
        const summary = out.get(row.parent_id) ?? new Map();
        summary.set(row.rel_type, { count: row.n, mine: row.mine });
        out.set(row.parent_id, summary);
      }
    }
    return out;
  }

  /**
   * The edit that applies to an event (client-server §Applying m.new_content): the newest
   * `m.replace` by the original's sender, of the original's type, in its room, newest by
   * origin_server_ts and then by event ID.
   */
  async latestEdit(original: RoomEvent): Promise<StoredEvent | undefined> {
    const row = await this.db.get<{ event_nid: number }>(
      `SELECT event_nid FROM event_relations WHERE parent_id = ? AND rel_type = 'm.replace' AND sender = ? AND type = ? AND room_id = ?
       ORDER BY origin_server_ts DESC, event_id DESC LIMIT 1`,
      [original.event_id, original.sender, original.type, original.room_id],
    );
    return row ? this.loadByNid(row.event_nid) : undefined;
  }

  /** A thread's newest event (topologically). */
  async latestInThread(root: RoomEvent): Promise<StoredEvent | undefined> {
    const row = await this.db.get<{ event_nid: number }>(
      `SELECT event_nid FROM event_relations WHERE parent_id = ? AND rel_type = 'm.thread' AND room_id = ?
       ORDER BY depth DESC, stream_ordering DESC LIMIT 1`,
      [root.event_id, root.room_id],
    );
    return row ? this.loadByNid(row.event_nid) : undefined;
  }

  /** IDs of the events that reference an event (`m.reference`), oldest first. */
  async references(parent: RoomEvent): Promise<string[]> {
    const rows = await this.db.all<{ event_id: string }>(
      "SELECT event_id FROM event_relations WHERE parent_id = ? AND rel_type = 'm.reference' AND room_id = ? ORDER BY depth, stream_ordering LIMIT 1000",
      [parent.event_id, parent.room_id],
    );
    return rows.map((r) => r.event_id);
  }

  /** The thread an event belongs to (the root's ID), for each of the given event nids that is in one. */
  async threadsOf(nids: readonly number[]): Promise<Map<number, string>> {
    const out = new Map<number, string>();
    for (let i = 0; i < nids.length; i += BATCH) {
      const part = nids.slice(i, i + BATCH);
      const rows = await this.db.all<{ event_nid: number; parent_id: string }>(
        `SELECT event_nid, parent_id FROM event_relations WHERE rel_type = 'm.thread' AND event_nid IN (${part.map(() => '?').join(',')})`,
        [...part],
      );
      for (const row of rows) out.set(row.event_nid, row.parent_id);
    }
    return out;
  }

  /** Whether an event is the root of a thread. */
  async isThreadRoot(eventId: string): Promise<boolean> {
    return (await this.db.get("SELECT 1 FROM event_relations WHERE parent_id = ? AND rel_type = 'm.thread' LIMIT 1", [eventId])) !== undefined;
  }

  /**
   * Children of an event in topological order, `pageSize` rows at a time: going back,
   * those at or before `from` and after `bound`, newest first; going forward, those after
   * `from` and at or before `bound`, oldest first. With `depth` > 1, children of children too.
   */
  async *children(roomId: string, parentId: string, query: ChildQuery, pageSize: number): AsyncGenerator<StoredEvent> {
    const parents = query.depth > 1 ? await this.descendants(roomId, parentId, query.depth) : [parentId];
    const filters: string[] = [];
    const filterParams: (string | number)[] = [];
    if (query.relType !== undefined) {
      filters.push('rel_type = ?');
      filterParams.push(query.relType);
    }
    if (query.eventType !== undefined) {
      filters.push('type = ?');
      filterParams.push(query.eventType);
    }
    const [low, high, order] = query.dir === 'b' ? ['>', '<=', 'DESC'] : ['<=', '>', 'ASC'];
    let cursor = query.from;
    pageSize = Math.max(1, pageSize);
    for (;;) {
      const rows = await this.db.all<{ event_nid: number; depth: number; stream_ordering: number }>(
        `SELECT event_nid, depth, stream_ordering FROM event_relations
         WHERE parent_id IN (${parents.map(() => '?').join(',')}) AND room_id = ? ${filters.map((f) => 'AND ' + f).join(' ')}
           AND (depth, stream_ordering) ${high} (?, ?) AND (depth, stream_ordering) ${low} (?, ?)
         ORDER BY depth ${order}, stream_ordering ${order} LIMIT ?`,
        [...parents, roomId, ...filterParams, cursor.depth, cursor.stream, query.bound.depth, query.bound.stream, pageSize],
      );
      for (const row of rows) {
        const stored = await this.loadByNid(row.event_nid);
        if (stored) yield stored;
      }
      if (rows.length < pageSize) return;
      const last = rows.at(-1)!;
      cursor = { depth: last.depth, stream: query.dir === 'b' ? last.stream_ordering - 1 : last.stream_ordering };
    }
  }

  /** An event and those relating to it, directly or through up to `depth` - 1 others. */
  private async descendants(roomId: string, parentId: string, depth: number): Promise<string[]> {
    const all = new Set([parentId]);
    let level = [parentId];
    for (let i = 1; i < depth && level.length > 0 && all.size < MAX_RECURSE_PARENTS; i++) {
      const rows = await this.db.all<{ event_id: string }>(
        `SELECT event_id FROM event_relations WHERE room_id = ? AND parent_id IN (${level.map(() => '?').join(',')}) LIMIT ?`,
        [roomId, ...level, MAX_RECURSE_PARENTS],
      );
      level = rows.map((r) => r.event_id).filter((id) => !all.has(id));
      for (const id of level) all.add(id);
    }
    return [...all].slice(0, MAX_RECURSE_PARENTS);
  }

  /**
   * Thread roots of a room by their latest activity, newest first: threads whose newest
   * event lies before stream position `before`; with `participant`, only threads that
   * user started or replied in. Returns each root's ID with its thread's newest position.
   */
  async threads(roomId: string, options: { before: number; limit: number; participant?: string }): Promise<{ rootId: string; latest: number }[]> {
    const participated = options.participant === undefined ? '' : 'AND (SUM(r.sender = ?) > 0 OR EXISTS (SELECT 1 FROM events e WHERE e.event_id = r.parent_id AND e.sender = ?))';
    const rows = await this.db.all<{ parent_id: string; latest: number }>(
      `SELECT r.parent_id, MAX(r.stream_ordering) AS latest FROM event_relations r WHERE r.room_id = ? AND r.rel_type = 'm.thread'
       GROUP BY r.parent_id HAVING latest < ? ${participated} ORDER BY latest DESC LIMIT ?`,
      [roomId, options.before, ...(options.participant === undefined ? [] : [options.participant, options.participant]), options.limit],
    );
    return rows.map((r) => ({ rootId: r.parent_id, latest: r.latest }));
  }
}
