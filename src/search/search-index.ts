import type { Database, WriteTransaction } from '../storage/database.ts';
import type { EventIndexHook, StoredEvent } from '../rooms/rooms.ts';

/** How many events the first index takes per write. */
const FIRST_INDEX_BATCH = 500;

/** What the first index needs of the room engine: its timeline, handed over a batch per write (`Rooms.replayTimeline`). */
export interface TimelineReplay {
  replayTimeline(afterNid: number, limit: number, index: (tx: WriteTransaction, events: StoredEvent[]) => void): Promise<number>;
}

/** The fields of an event's content the index holds, in column order. */
function searchable(content: Record<string, unknown>): [string | null, string | null, string | null] | undefined {
  const text = (key: string) => (typeof content[key] === 'string' && content[key] !== '' ? (content[key] as string) : null);
  const fields: [string | null, string | null, string | null] = [text('body'), text('name'), text('topic')];
  return fields.some((f) => f !== null) ? fields : undefined;
}

/** What clients may be shown: accepted timeline events, not redacted. */
function indexable(stored: StoredEvent): boolean {
  return !stored.rejected && !stored.outlier && !stored.softFailed && stored.streamOrdering !== null && stored.redactedBy === null;
}

/** Where a query looks: rooms, and senders in or out (types, which may hold `*`, are matched after). */
export interface SearchScope {
  roomIds: readonly string[];
  senders?: readonly string[];
  notSenders?: readonly string[];
}

function scopeSql(scope: SearchScope): { sql: string; params: string[] } | undefined {
  if (scope.roomIds.length === 0 || scope.senders?.length === 0) return undefined;
  const list = (values: readonly string[]) => values.map(() => '?').join(',');
  let sql = `m.room_id IN (${list(scope.roomIds)})`;
  const params = [...scope.roomIds];
  if (scope.senders) {
    sql += ` AND m.sender IN (${list(scope.senders)})`;
    params.push(...scope.senders);
  }
  if (scope.notSenders && scope.notSenders.length > 0) {
    sql += ` AND m.sender NOT IN (${list(scope.notSenders)})`;
    params.push(...scope.notSenders);
  }
  return { sql, params };
}

/** One event matching a query, before visibility: what ordering and filtering need. */
export interface Candidate {
  nid: number;
  roomId: string;
  sender: string;
  type: string;
  stream: number;
  /** matchinfo(…, 'pcnalx'), for bm25(). */
  matchinfo: Uint8Array;
}

/**
 * The full-text index of room events. Filled through the room engine's index hook inside
 * the write that stores each event (local and remote alike), so it is exactly as durable
 * as the events; rejected, soft-failed and outlier events stay out, a redaction takes its
 * target out, an outlier promoted to the timeline comes in.
 */
export class SearchIndex implements EventIndexHook {
  constructor(private readonly db: Database) {}

  stored(tx: WriteTransaction, stored: StoredEvent): void {
    const fields = indexable(stored) ? searchable(stored.event.content) : undefined;
    if (!fields) return;
    const event = stored.event;
    tx.run('INSERT INTO search_fts (docid, body, name, topic) VALUES (?, ?, ?, ?)', [stored.nid, ...fields]);
    tx.run('INSERT INTO search_events (event_nid, event_id, room_id, sender, type, stream_ordering) VALUES (?, ?, ?, ?, ?, ?)', [
      stored.nid, event.event_id, event.room_id, event.sender, event.type, stored.streamOrdering,
    ]);
  }

  /**
   * Indexes the events stored before search existed (the schema's version 2 leaves a row saying it
   * is to do), a batch per write, resuming where a stopped run got to. Events the hook indexed
   * meanwhile are left as they are.
   */
  async buildFirstIndex(timeline: TimelineReplay, batch = FIRST_INDEX_BATCH): Promise<void> {
    for (;;) {
      const progress = await this.db.get<{ through_nid: number }>('SELECT through_nid FROM search_first_index');
      if (!progress) return;
      await timeline.replayTimeline(progress.through_nid, batch, (tx, events) => {
        for (const stored of events) if (!tx.get('SELECT 1 FROM search_events WHERE event_nid = ?', [stored.nid])) this.stored(tx, stored);
        if (events.length < batch) tx.run('DELETE FROM search_first_index');
        else tx.run('UPDATE search_first_index SET through_nid = ?', [events[events.length - 1]!.nid]);
      });
    }
  }

  dropped(tx: WriteTransaction, eventId: string): void {
    const row = tx.get<{ event_nid: number }>('SELECT event_nid FROM search_events WHERE event_id = ?', [eventId]);
    if (row) this.remove(tx, row.event_nid);
  }

  private remove(tx: WriteTransaction, nid: number): void {
    tx.run('DELETE FROM search_fts WHERE docid = ?', [nid]);
    tx.run('DELETE FROM search_events WHERE event_nid = ?', [nid]);
  }

  /**
   * Every indexed event in these rooms matching an FTS4 MATCH expression, unordered, with its
   * matchinfo (for rank order, which must score them all). CROSS JOIN keeps the full-text match
   * as the outer loop: left to itself the planner walks the rooms' rows and runs the MATCH once
   * per row, some 500 times slower over 100,000 messages.
   */
  async candidates(match: string, scope: SearchScope): Promise<Candidate[]> {
    const where = scopeSql(scope);
    if (!where) return [];
    const rows = await this.db.all<{ nid: number; room_id: string; sender: string; type: string; stream: number; mi: Uint8Array }>(
      `SELECT m.event_nid AS nid, m.room_id, m.sender, m.type, m.stream_ordering AS stream, matchinfo(search_fts, 'pcnalx') AS mi
       FROM search_fts CROSS JOIN search_events m ON m.event_nid = search_fts.docid
       WHERE search_fts MATCH ? AND ${where.sql}`,
      [match, ...where.params],
    );
    return rows.map((r) => ({ nid: r.nid, roomId: r.room_id, sender: r.sender, type: r.type, stream: r.stream, matchinfo: r.mi }));
  }

  /**
   * Matching events newest first, below a stream position: SQLite keeps only the top `limit`
   * while it matches, and no matchinfo is computed (recent order scores only the page).
   */
  async newest(match: string, scope: SearchScope, belowStream: number, limit: number): Promise<Omit<Candidate, 'matchinfo'>[]> {
    const where = scopeSql(scope);
    if (!where) return [];
    const rows = await this.db.all<{ nid: number; room_id: string; sender: string; type: string; stream: number }>(
      `SELECT m.event_nid AS nid, m.room_id, m.sender, m.type, m.stream_ordering AS stream
       FROM search_fts CROSS JOIN search_events m ON m.event_nid = search_fts.docid
       WHERE search_fts MATCH ? AND ${where.sql} AND m.stream_ordering < ?
       ORDER BY m.stream_ordering DESC LIMIT ?`,
      [match, ...where.params, belowStream, limit],
    );
    return rows.map((r) => ({ nid: r.nid, roomId: r.room_id, sender: r.sender, type: r.type, stream: r.stream }));
  }

  /** How many events in scope match. */
  async count(match: string, scope: SearchScope): Promise<number> {
    const where = scopeSql(scope);
    if (!where) return 0;
    return (await this.db.get<{ n: number }>(
      `SELECT count(*) AS n FROM search_fts CROSS JOIN search_events m ON m.event_nid = search_fts.docid WHERE search_fts MATCH ? AND ${where.sql}`,
      [match, ...where.params],
    ))!.n;
  }

  /** matchinfo of some matching events (a page in recent order), by nid. */
  async matchinfo(match: string, nids: readonly number[]): Promise<Map<number, Uint8Array>> {
    if (nids.length === 0) return new Map();
    const rows = await this.db.all<{ nid: number; mi: Uint8Array }>(
      `SELECT docid AS nid, matchinfo(search_fts, 'pcnalx') AS mi FROM search_fts WHERE search_fts MATCH ? AND docid IN (${nids.map(() => '?').join(',')})`,
      [match, ...nids],
    );
    return new Map(rows.map((r) => [r.nid, r.mi]));
  }

  /**
   * The words of these events that matched, as they are written in them (the tokenizer
   * folds case and diacritics, so "Crème" matches `creme`): for `highlights`.
   */
  async matchedWords(match: string, nids: readonly number[]): Promise<string[]> {
    if (nids.length === 0) return [];
    const rows = await this.db.all<{ offsets: string; body: string | null; name: string | null; topic: string | null }>(
      `SELECT offsets(search_fts) AS offsets, body, name, topic FROM search_fts WHERE search_fts MATCH ? AND docid IN (${nids.map(() => '?').join(',')})`,
      [match, ...nids],
    );
    const encoder = new TextEncoder();
    const decoder = new TextDecoder();
    const found = new Set<string>();
    for (const row of rows) {
      // offsets(): groups of four integers (column, query term, byte offset, byte length) into the UTF-8 text.
      const numbers = row.offsets.split(' ').map(Number);
      const columns = [row.body, row.name, row.topic].map((text) => (text === null ? undefined : encoder.encode(text)));
      for (let i = 0; i + 3 < numbers.length; i += 4) {
        const bytes = columns[numbers[i]!];
        if (bytes) found.add(decoder.decode(bytes.subarray(numbers[i + 2]!, numbers[i + 2]! + numbers[i + 3]!)));
      }
    }
    return [...found];
  }

  /** How many events the index holds. */
  async rows(): Promise<number> {
    return (await this.db.get<{ n: number }>('SELECT count(*) AS n FROM search_events'))!.n;
  }
}
