import { redactsOf, mayApplyRedaction } from '../events/auth.ts';
import { powerLevelsOf } from '../events/power-levels.ts';
import { isStateEvent, splitStateKey, stateKey, type RoomEvent, type StateKey } from '../events/event.ts';
import { serverNameOf } from '../events/identifiers.ts';
import { requireRoomVersion, type RoomVersion } from '../events/room-versions.ts';
import type { Database, WriteTransaction } from '../storage/database.ts';
import { nextStreamId } from '../storage/stream.ts';
import { KeyedLock } from '../util/keyed-lock.ts';
import { LruCache } from './lru.ts';
import { indexRelation, unindexRelation } from './relations.ts';
import { StateStore, type NidState } from './state-store.ts';
import type { EventIndexHook, OutboxHook, RoomsOptions, StoredEvent, UnsharedHook } from './types.ts';

/** A room as writes build on it: its version, current state snapshot and forward extremities. */
export interface RoomHead {
  version: RoomVersion;
  current: { nid: number; state: NidState } | undefined;
  extremities: string[];
}

/** A write to a room: its events once it has run, and when it is durable. */
export interface RoomWrite {
  stored: StoredEvent[];
  durable: Promise<void>;
}

/** What a write's transaction body hands back: the room as it leaves it. */
export interface RoomWriteResult {
  stored: StoredEvent[];
  head: RoomHead;
  snapshots: { nid: number; state: NidState }[];
  redactionTargets: Map<string, string>;
  afterDurable?: () => void;
}

/** What a redaction claims, as received. */
export interface RedactionClaim {
  target: string;
  sender: string;
  /** Its sender held the redact level when it was received. */
  byPower: boolean;
  /** Whether it applies to its target; undefined until the target is known. */
  applies: boolean | undefined;
}

/** Redaction ID → target of the claims that apply, for the write's result. */
export function appliedTargets(claims: Map<string, RedactionClaim>): Map<string, string> {
  return new Map([...claims].filter(([, claim]) => claim.applies).map(([id, claim]) => [id, claim.target]));
}

/** What a write stores about an event besides the event itself. */
export interface EventMeta {
  streamOrdering: number | null;
  stateSnapshot: number | null;
  replacesState: number | null;
  outlier?: boolean;
  rejected?: string | null;
  softFailed?: boolean;
}

/** The fields of an event the events table keeps in columns of their own, beside its JSON. */
export type EventRowFields = Pick<RoomEvent, 'event_id' | 'room_id' | 'type' | 'state_key' | 'sender' | 'depth' | 'origin_server_ts'>;

function insertEventRow(tx: WriteTransaction, event: EventRowFields, json: string, meta: EventMeta): number {
  return tx.get<{ event_nid: number }>(
    `INSERT INTO events (event_id, room_id, type, state_key, sender, depth, origin_server_ts, json, stream_ordering, state_snapshot, replaces_state, outlier, rejected, soft_failed)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING event_nid`,
    [
      event.event_id, event.room_id, event.type, event.state_key ?? null, event.sender, event.depth, event.origin_server_ts,
      json, meta.streamOrdering, meta.stateSnapshot, meta.replacesState, meta.outlier ? 1 : 0, meta.rejected ?? null, meta.softFailed ? 1 : 0,
    ],
  )!.event_nid;
}

type EventRow = {
  event_nid: number;
  json: string;
  stream_ordering: number | null;
  state_snapshot: number | null;
  replaces_state: number | null;
  outlier: number;
  rejected: string | null;
  soft_failed: number;
  redacted_by: string | null;
};
const EVENT_COLUMNS = 'event_nid, json, stream_ordering, state_snapshot, replaces_state, outlier, rejected, soft_failed, redacted_by';

function toStored(row: EventRow): StoredEvent {
  return {
    nid: row.event_nid,
    event: JSON.parse(row.json) as RoomEvent,
    streamOrdering: row.stream_ordering,
    stateSnapshot: row.state_snapshot,
    replacesState: row.replaces_state,
    outlier: row.outlier === 1,
    rejected: row.rejected,
    softFailed: row.soft_failed === 1,
    redactedBy: row.redacted_by,
  };
}

/** Thrown inside a write whose transaction ID (or event) was stored before, to abandon the write. */
export class RepeatedTransaction extends Error {
  constructor(readonly eventId: string) {
    super(`transaction already sent as ${eventId}`);
  }
}

/**
 * What the parts of the room engine share (internal to src/rooms): the events table and its
 * caches, each room's head (durable, and pending while a write becomes durable), the
 * per-room input lock, and the one way a write reaches storage ({@link runRoomWrite}).
 */
export class RoomStore {
  readonly db: Database;
  readonly stateStore: StateStore;
  /** The room's input lock: one write is built and run at a time per room; rooms run in parallel. */
  readonly lock = new KeyedLock();
  readonly outbox: OutboxHook | undefined;
  readonly indexer: EventIndexHook | undefined;
  readonly unshared: UnsharedHook | undefined;
  /** Each room's durable head: what queries see. */
  private readonly heads = new Map<string, RoomHead>();
  /**
   * Heads of writes that have run in memory but are not yet durable. The next
   * write in the room builds on these, so sends in one room pipeline: event N+1
   * is signed while event N is being made durable, and they commit as one group.
   */
  private readonly pendingHeads = new Map<string, RoomHead>();
  /** Events of those writes, so the next write can read them before they are durable. */
  private readonly pendingEvents = new Map<string | number, StoredEvent>();
  private readonly byId = new LruCache<string, StoredEvent>(20_000);
  private readonly byNid = new LruCache<number, StoredEvent>(20_000);

  constructor(readonly options: RoomsOptions) {
    this.db = options.db;
    this.stateStore = new StateStore(options.db);
    this.outbox = options.outbox;
    this.indexer = options.indexer;
    this.unshared = options.unshared;
  }

  /** The room's durable head. */
  async head(roomId: string): Promise<RoomHead | undefined> {
    const cached = this.heads.get(roomId);
    if (cached) return cached;
    const row = await this.db.get<{ room_version: string; current_snapshot: number | null }>(
      'SELECT room_version, current_snapshot FROM rooms WHERE room_id = ?', [roomId],
    );
    if (!row) return undefined;
    const extremities = (await this.db.all<{ event_id: string }>('SELECT event_id FROM forward_extremities WHERE room_id = ?', [roomId])).map((r) => r.event_id);
    const current = row.current_snapshot === null ? undefined : { nid: row.current_snapshot, state: await this.stateStore.load(row.current_snapshot) };
    const head: RoomHead = { version: requireRoomVersion(row.room_version), current, extremities };
    this.heads.set(roomId, head);
    return head;
  }

  /** The head a new write builds on: the newest, durable or not. Call with the room lock held. */
  async writerHead(roomId: string): Promise<RoomHead | undefined> {
    return this.pendingHeads.get(roomId) ?? (await this.head(roomId));
  }

  async getEvent(eventId: string): Promise<StoredEvent | undefined> {
    const cached = this.byId.get(eventId) ?? this.pendingEvents.get(eventId);
    if (cached) return cached;
    const row = await this.db.get<EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE event_id = ?`, [eventId]);
    return row ? this.cache(toStored(row)) : undefined;
  }

  async getEventByNid(nid: number): Promise<StoredEvent | undefined> {
    const cached = this.byNid.get(nid) ?? this.pendingEvents.get(nid);
    if (cached) return cached;
    const row = await this.db.get<EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE event_nid = ?`, [nid]);
    return row ? this.cache(toStored(row)) : undefined;
  }

  /** Many events by nid, in order (undefined where unknown): those not cached are read a chunk per query, not one each. */
  async getEventsByNid(nids: readonly number[]): Promise<(StoredEvent | undefined)[]> {
    const found = new Map<number, StoredEvent>();
    const missing: number[] = [];
    for (const nid of nids) {
      const cached = this.byNid.get(nid) ?? this.pendingEvents.get(nid);
      if (cached) found.set(nid, cached);
      else missing.push(nid);
    }
    for (let from = 0; from < missing.length; from += 500) {
      const chunk = missing.slice(from, from + 500);
      const rows = await this.db.all<EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE event_nid IN (${chunk.map(() => '?').join(',')})`, chunk);
      for (const row of rows) found.set(row.event_nid, this.cache(toStored(row)));
    }
    return nids.map((nid) => found.get(nid));
  }

  /** An event (by ID or nid) of a write that has run but is not durable yet. */
  pendingEvent(idOrNid: string | number): StoredEvent | undefined {
    return this.pendingEvents.get(idOrNid);
  }

  /** An event as stored, read inside a write transaction. */
  storedIn(tx: WriteTransaction, eventId: string): StoredEvent | undefined {
    const row = tx.get<EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE event_id = ?`, [eventId]);
    return row ? toStored(row) : undefined;
  }

  /** Timeline events (no outliers) after a nid, in nid order, read inside a write transaction. */
  timelineAfter(tx: WriteTransaction, afterNid: number, limit: number): StoredEvent[] {
    return tx.all<EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE event_nid > ? AND outlier = 0 ORDER BY event_nid LIMIT ?`, [afterNid, limit]).map(toStored);
  }

  cache(stored: StoredEvent): StoredEvent {
    this.byId.set(stored.event.event_id, stored);
    this.byNid.set(stored.nid, stored);
    return stored;
  }

  /** Stores a new event, and keeps the timeline's indexes (relations, search) in the same write, whichever path stores it. */
  insertEvent(tx: WriteTransaction, event: RoomEvent, meta: EventMeta): StoredEvent {
    const nid = insertEventRow(tx, event, JSON.stringify(event), meta);
    const stored: StoredEvent = {
      nid,
      event,
      streamOrdering: meta.streamOrdering,
      stateSnapshot: meta.stateSnapshot,
      replacesState: meta.replacesState,
      outlier: meta.outlier ?? false,
      rejected: meta.rejected ?? null,
      softFailed: meta.softFailed ?? false,
      redactedBy: null,
    };
    this.indexStored(tx, stored);
    return stored;
  }

  /**
   * Stores an outlier given as the JSON it is kept as, with the fields the events table
   * indexes. No timeline index is told: relations and search take timeline events only.
   */
  insertOutlier(tx: WriteTransaction, fields: EventRowFields, json: string, rejected: string | null): void {
    insertEventRow(tx, fields, json, { streamOrdering: null, stateSnapshot: null, replacesState: null, outlier: true, rejected });
  }

  /** Tells the timeline's indexes that an event joined the timeline. */
  indexStored(tx: WriteTransaction, stored: StoredEvent): void {
    indexRelation(tx, stored);
    this.indexer?.stored(tx, stored);
  }

  /** Tells the timeline's indexes that an event may no longer be shown (redacted, rejected after all). */
  unindex(tx: WriteTransaction, eventId: string): void {
    unindexRelation(tx, eventId);
    this.indexer?.dropped(tx, eventId);
  }

  /**
   * One write to a room, with the room lock held. It resolves when fn has
   * run in memory: the room's writer head and its events are then visible to the
   * next write. `durable` settles once the storage layer has made it durable; then
   * the durable head moves and long-polls wake. If it fails, the in-memory view is
   * dropped and reloaded from what was stored.
   */
  async runRoomWrite(roomId: string, fn: (tx: WriteTransaction) => RoomWriteResult): Promise<RoomWrite> {
    let resolveExecuted!: (value: RoomWriteResult) => void;
    let rejectExecuted!: (error: unknown) => void;
    const executed = new Promise<RoomWriteResult>((resolve, reject) => {
      resolveExecuted = resolve;
      rejectExecuted = reject;
    });
    const committed = this.db.transaction((tx) => {
      try {
        const result = fn(tx);
        resolveExecuted(result);
        return result;
      } catch (e) {
        rejectExecuted(e);
        throw e;
      }
    });
    committed.catch(rejectExecuted); // failures before fn ran
    const ran = executed.then((result) => {
      this.pendingHeads.set(roomId, result.head);
      for (const snapshot of result.snapshots) this.stateStore.holdPending(snapshot);
      for (const s of result.stored) {
        this.pendingEvents.set(s.event.event_id, s);
        this.pendingEvents.set(s.nid, s);
      }
      return result;
    });
    const durable = ran.then(async (result) => {
      const forget = () => {
        for (const s of result.stored) {
          this.pendingEvents.delete(s.event.event_id);
          this.pendingEvents.delete(s.nid);
        }
        if (this.pendingHeads.get(roomId) === result.head) this.pendingHeads.delete(roomId);
      };
      try {
        await committed;
      } catch (e) {
        // Rolled back: forget everything built on it; the next write reloads from storage.
        forget();
        for (const snapshot of result.snapshots) this.stateStore.dropPending(snapshot.nid);
        this.pendingHeads.delete(roomId);
        this.heads.delete(roomId);
        throw e;
      }
      for (const snapshot of result.snapshots) this.stateStore.remember(snapshot);
      this.heads.set(roomId, result.head);
      forget();
      this.afterCommit(roomId, result.stored, result.redactionTargets);
      result.afterDurable?.();
    });
    // When fn itself failed, callers hear it through `executed`; don't also report `durable` as unhandled.
    durable.catch(() => undefined);
    const { stored } = await ran;
    return { stored, durable };
  }

  /** Inside a write: fails it when a write it builds on failed to become durable and rolled back. */
  requirePrevEvents(tx: WriteTransaction, roomId: string, prevIds: readonly string[]): void {
    for (const id of prevIds) {
      if (!tx.get('SELECT 1 FROM events WHERE event_id = ?', [id])) throw new Error(`an earlier write in room ${roomId} failed; try again`);
    }
  }

  /**
   * What each redaction among `events` claims (rooms/fragments/v3-handling-redactions): its
   * target, whether its sender holds the redact level in the room's current state, and, when the
   * target is known, whether it applies: the target is of the same room, and the redacter holds
   * the redact level or is of the target sender's server. A redaction whose target is not known
   * yet is decided when the target arrives ({@link applyWaitingRedactions}).
   */
  async redactionClaims(roomId: string, head: RoomHead, events: RoomEvent[]): Promise<Map<string, RedactionClaim>> {
    const claims = new Map<string, RedactionClaim>(); // redaction event ID → its claim
    const redactions = events.filter((e) => e.type === 'm.room.redaction');
    if (redactions.length === 0) return claims;
    // Power levels need only the create and power levels events, not the whole state.
    const state = new Map<StateKey, RoomEvent>();
    for (const key of [stateKey('m.room.create', ''), stateKey('m.room.power_levels', '')]) {
      const nid = head.current?.state.get(key);
      const stored = nid === undefined ? undefined : await this.getEventByNid(nid);
      if (stored) state.set(key, stored.event);
    }
    const levels = powerLevelsOf(head.version, (type, key) => state.get(stateKey(type, key)));
    for (const event of redactions) {
      const target = redactsOf(head.version, event);
      if (!target) continue;
      const byPower = levels.user(event.sender) >= levels.named('redact');
      const targetEvent = (await this.getEvent(target))?.event ?? events.find((e) => e.event_id === target);
      const applies = targetEvent === undefined ? undefined : targetEvent.room_id === roomId && mayApplyRedaction(event, targetEvent, levels);
      claims.set(event.event_id, { target, sender: event.sender, byPower, applies });
    }
    return claims;
  }

  /**
   * Records a redaction's claim, and redacts its target when it applies. Every redaction the
   * room takes is recorded, so clients are shown only those that applied (Visibility).
   */
  applyRedaction(tx: WriteTransaction, event: RoomEvent, claims: Map<string, RedactionClaim>): void {
    const claim = claims.get(event.event_id);
    if (!claim) return;
    tx.run('INSERT OR IGNORE INTO redactions (redaction_id, target_id, room_id, sender, by_power, applies) VALUES (?, ?, ?, ?, ?, ?)', [
      event.event_id, claim.target, event.room_id, claim.sender, claim.byPower ? 1 : 0, claim.applies === undefined ? null : claim.applies ? 1 : 0,
    ]);
    if (claim.applies) this.redact(tx, claim.target, event.event_id);
  }

  private redact(tx: WriteTransaction, target: string, redactionId: string): void {
    tx.run('UPDATE events SET redacted_by = ? WHERE event_id = ? AND redacted_by IS NULL', [redactionId, target]);
    // Its m.relates_to is redacted away, and its words with it.
    this.unindex(tx, target);
  }

  /**
   * Decides the redactions that were waiting for these events, just stored, and applies those
   * that may (the redacter held the redact level when it was received, or is of the target
   * sender's server). Answers redaction ID → target for those applied.
   */
  applyWaitingRedactions(tx: WriteTransaction, roomId: string, targets: readonly Pick<RoomEvent, 'event_id' | 'sender'>[]): Map<string, string> {
    const applied = new Map<string, string>();
    // Almost always none: one probe per write, not one per event.
    if (!tx.get('SELECT 1 FROM redactions WHERE room_id = ? AND applies IS NULL LIMIT 1', [roomId])) return applied;
    for (const target of targets) {
      const waiting = tx.all<{ redaction_id: string; sender: string; by_power: number }>(
        'SELECT redaction_id, sender, by_power FROM redactions WHERE target_id = ? AND room_id = ? AND applies IS NULL', [target.event_id, roomId],
      );
      for (const row of waiting) {
        const applies = row.by_power === 1 || serverNameOf(row.sender) === serverNameOf(target.sender);
        tx.run('UPDATE redactions SET applies = ? WHERE redaction_id = ?', [applies ? 1 : 0, row.redaction_id]);
        if (!applies) continue;
        this.redact(tx, target.event_id, row.redaction_id);
        applied.set(row.redaction_id, target.event_id);
      }
    }
    return applied;
  }

  /** Brings the current_state and local_memberships tables from `from` to `to`. */
  updateCurrentState(tx: WriteTransaction, roomId: string, from: NidState, to: NidState): void {
    const ours = ':' + this.options.serverName;
    // Users of other servers who may share no room with ours after this write.
    const mayBeUnshared = new Set<string>();
    for (const [key, nid] of to) {
      if (from.get(key) === nid) continue;
      const [type, sk] = splitStateKey(key);
      // Only a membership needs its event's row, and of it only a field (a join's state: 20,000 rows, not parsed).
      const row = type !== 'm.room.member' ? undefined : tx.get<{ event_id: string; membership: string | number | null; stream_ordering: number | null }>(
        "SELECT event_id, json_extract(json, '$.content.membership') AS membership, stream_ordering FROM events WHERE event_nid = ?", [nid])!;
      const membership = row ? String(row.membership ?? '') : null;
      tx.run(
        `INSERT INTO current_state (room_id, type, state_key, event_nid, membership) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (room_id, type, state_key) DO UPDATE SET event_nid = excluded.event_nid, membership = excluded.membership`,
        [roomId, type, sk, nid, membership],
      );
      if (row && membership !== null && sk.endsWith(ours)) {
        upsertLocalMembership(tx, sk, roomId, membership, row.event_id, row.stream_ordering ?? nextStreamId(tx));
      }
      if (membership !== null && membership !== 'join' && this.unshared) {
        if (!sk.endsWith(ours)) mayBeUnshared.add(sk);
        else for (const member of this.joinedMembersIn(tx, roomId)) if (!member.endsWith(ours)) mayBeUnshared.add(member);
      }
    }
    for (const key of from.keys()) {
      if (to.has(key)) continue;
      const [type, sk] = splitStateKey(key);
      tx.run('DELETE FROM current_state WHERE room_id = ? AND type = ? AND state_key = ?', [roomId, type, sk]);
    }
    const unshared = [...mayBeUnshared].filter((userId) => !this.sharesRoom(tx, userId));
    if (unshared.length > 0) this.unshared?.(tx, unshared);
  }

  /** Users joined to the room, as the write leaves it so far. */
  joinedMembersIn(tx: WriteTransaction, roomId: string): string[] {
    return tx.all<{ state_key: string }>("SELECT state_key FROM current_state WHERE room_id = ? AND type = 'm.room.member' AND membership = 'join'", [roomId]).map((r) => r.state_key);
  }

  /** Whether a user is joined to a room a local user is joined to, inside a write. */
  private sharesRoom(tx: WriteTransaction, userId: string): boolean {
    return tx.get(SHARES_ROOM_SQL, [userId]) !== undefined;
  }

  private afterCommit(roomId: string, stored: StoredEvent[], redactions: Map<string, string>): void {
    // Outliers (a join's state and auth chain: 20,000 events in a big room) are cached when read,
    // not when stored: a join would otherwise fill the cache with them, and hold its whole answer.
    for (const s of stored) if (!s.outlier) this.cache(s);
    for (const target of redactions.values()) {
      const cached = this.byId.get(target);
      if (cached) {
        this.byId.delete(target);
        this.byNid.delete(cached.nid);
      }
    }
    const positions = stored.map((s) => s.streamOrdering).filter((p): p is number => p !== null && p > 0);
    if (positions.length === 0) return;
    const members = stored.filter((s) => s.event.type === 'm.room.member').map((s) => s.event.state_key!);
    this.options.notify({ position: Math.max(...positions), roomIds: [roomId], userIds: members });
  }
}

/** A row when the user (`?`) is joined to a room a local user is joined to. */
export const SHARES_ROOM_SQL = `SELECT 1 AS shared FROM current_state cs
  JOIN local_memberships lm ON lm.room_id = cs.room_id AND lm.membership = 'join'
  WHERE cs.state_key = ? AND cs.type = 'm.room.member' AND cs.membership = 'join' LIMIT 1`;

/** Records a local user's membership of a room as we last heard of it (a room we hold or not). */
export function upsertLocalMembership(tx: WriteTransaction, userId: string, roomId: string, membership: string, eventId: string, position: number): void {
  tx.run(
    `INSERT INTO local_memberships (user_id, room_id, membership, event_id, stream_ordering) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (user_id, room_id) DO UPDATE SET membership = excluded.membership, event_id = excluded.event_id,
       stream_ordering = excluded.stream_ordering, forgotten = 0`,
    [userId, roomId, membership, eventId, position],
  );
}

/** event_nid of the state event `event` replaces in `state`, for prev_content. */
export function replaced(state: NidState, event: RoomEvent): number | null {
  if (!isStateEvent(event)) return null;
  const nid = state.get(stateKey(event.type, event.state_key!));
  return nid !== undefined && nid > 0 ? nid : null;
}

export function serversOf(userIds: Iterable<string>): string[] {
  return [...new Set([...userIds].map(serverNameOf))];
}
