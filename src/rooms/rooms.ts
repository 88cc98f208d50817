import { canonicalJson, utf8, type JsonObject } from '../crypto/canonical-json.ts';
import type { Ed25519Backend, SigningKey } from '../crypto/ed25519.ts';
import { randomToken, type RandomBytes } from '../crypto/random.ts';
import { authEventSelection, checkEventAgainstAuthEvents, checkEventAuth, mayApplyRedaction, redactsOf, requiredSignatureServers } from '../events/auth.ts';
import { AuthError, powerLevelsOf } from '../events/power-levels.ts';
import { resolveState } from '../events/state-res.ts';
import { isStateEvent, splitStateKey, stateKey, type RoomEvent, type StateKey, type StateMap } from '../events/event.ts';
import { byteLength, MAX_ID_BYTES, serverNameOf } from '../events/identifiers.ts';
import { computeEventId, contentHashMatches, referenceIds, signNewEvent, verifyEventSignature, type PDU } from '../events/pdu.ts';
import { redactEvent } from '../events/redaction.ts';
import { requireRoomVersion, type RoomVersion } from '../events/room-versions.ts';
import type { Database, WriteTransaction } from '../storage/database.ts';
import { nextStreamId, type StreamNotify } from '../storage/stream.ts';
import { RoomError, roomNotFound } from './errors.ts';
import { LruCache } from './lru.ts';
import { StateStore, type NidState } from './state-store.ts';
import { RoomTimeline } from './timeline.ts';
import { indexRelation, refuseDuplicateAnnotation, RoomRelations, unindexRelation } from './relations.ts';

export const MAX_EVENT_BYTES = 65_536;
const MAX_PREV_EVENTS = 10;

/** An event as stored, with what the room engine decided about it. */
export interface StoredEvent {
  nid: number;
  event: RoomEvent;
  streamOrdering: number | null;
  /** State snapshot before the event; null for outliers. */
  stateSnapshot: number | null;
  /** event_nid of the state event this one replaced, for prev_content. */
  replacesState: number | null;
  outlier: boolean;
  rejected: string | null;
  softFailed: boolean;
  redactedBy: string | null;
}

/** What a local user asks to send; the engine fills in the PDU fields. */
export interface EventTemplate {
  type: string;
  sender: string;
  content: JsonObject;
  state_key?: string;
  redacts?: string;
}

/** A write to a room: its events once it has run, and when it is durable. */
interface LocalWrite {
  stored: StoredEvent[];
  durable: Promise<void>;
}

export interface TransactionKey {
  userId: string;
  deviceId: string;
  txnId: string;
}

/**
 * Called inside the write transaction of local events, so what federation must send
 * is made durable together with the events. `servers` are those with members joined
 * to the room after the write, plus the server of a user who was made to leave.
 * The returned function, if any, runs once the write is durable.
 */
export type OutboxHook = (tx: WriteTransaction, write: { roomId: string; version: RoomVersion; events: RoomEvent[]; servers: string[] }) => (() => void) | void;

/**
 * Told, inside the write transaction, of every event stored or whose fate changed (an outlier
 * promoted to the timeline, an event rejected after all) and of every redaction applied, so an
 * index another component owns (search) stays atomic with the events. It must not throw.
 */
export interface EventIndexHook {
  /** An event joins the timeline: stored anew, or an outlier promoted (outliers are never indexed). */
  stored(tx: WriteTransaction, stored: StoredEvent): void;
  /** An event leaves what may be shown: redacted, or rejected after all. */
  dropped(tx: WriteTransaction, eventId: string): void;
}

/** Lets another server countersign an event before it is stored (an invite of a remote user). */
export type Countersign = (event: RoomEvent, version: RoomVersion) => Promise<RoomEvent>;

/** Looks up a server's verify key, for events that come from elsewhere. */
export type VerifyKeyResolver = (serverName: string, keyId: string) => Promise<Uint8Array | undefined>;

export interface RoomsOptions {
  db: Database;
  serverName: string;
  keyId: string;
  signingKey: SigningKey;
  ed25519: Ed25519Backend;
  now: () => number;
  random: RandomBytes;
  notify: StreamNotify;
  resolveVerifyKey: VerifyKeyResolver;
}

interface RoomHead {
  version: RoomVersion;
  current: { nid: number; state: NidState } | undefined;
  extremities: string[];
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

/**
 * The room engine: builds, authorises and stores events, one at a time per room
 * (rooms run in parallel), and keeps each room's state as snapshots.
 */
export class Rooms {
  readonly stateStore: StateStore;
  /** Reads of rooms' timelines, by stream position and by topological order. */
  readonly timeline: RoomTimeline;
  /** Reads of the relations index (edits, reactions, threads, references) the engine keeps as events are stored. */
  readonly relations: RoomRelations;
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
  private readonly roomQueues = new Map<string, Promise<unknown>>();
  private outbox: OutboxHook | undefined;
  private indexer: EventIndexHook | undefined;

  constructor(private readonly options: RoomsOptions) {
    this.stateStore = new StateStore(options.db);
    this.timeline = new RoomTimeline(options.db, this);
    this.relations = new RoomRelations(options.db, (nid) => this.getEventByNid(nid));
  }

  get serverName(): string {
    return this.options.serverName;
  }

  /** Federation's hook for every local write (see {@link OutboxHook}). */
  setOutbox(hook: OutboxHook): void {
    this.outbox = hook;
  }

  /** Search's hook for every event stored (see {@link EventIndexHook}). */
  setIndexer(hook: EventIndexHook): void {
    this.indexer = hook;
  }

  /** Users of other servers (of `server`, if given) joined to a room a local user is joined to. */
  async remoteMembersSharingRooms(server?: string): Promise<string[]> {
    const rows = await this.options.db.all<{ state_key: string }>(
      `SELECT DISTINCT state_key FROM current_state WHERE type = 'm.room.member' AND membership = 'join'
       AND room_id IN (SELECT room_id FROM local_memberships WHERE membership = 'join')`,
    );
    const ours = ':' + this.options.serverName;
    return rows.map((r) => r.state_key).filter((u) => !u.endsWith(ours) && (server === undefined || serverNameOf(u) === server));
  }

  /**
   * What an invitee or knocker sees of a room (client-server §Stripped state): its
   * create, join rules, name, avatar, aliases, encryption and topic, and the member
   * event of `memberOf` (the inviter), each as type, state key, sender and content.
   */
  async strippedState(roomId: string, memberOf?: string): Promise<Record<string, unknown>[]> {
    const keys: [string, string][] = STRIPPED_STATE_TYPES.map((type) => [type, '']);
    if (memberOf) keys.push(['m.room.member', memberOf]);
    const out: Record<string, unknown>[] = [];
    for (const [type, key] of keys) {
      const e = (await this.currentStateEvent(roomId, type, key))?.event;
      if (e) out.push({ type: e.type, state_key: e.state_key ?? '', sender: e.sender, content: e.content });
    }
    return out;
  }

  /** The room's newest events, that new events build on. */
  async forwardExtremities(roomId: string): Promise<string[]> {
    return [...((await this.head(roomId))?.extremities ?? [])];
  }

  /** Servers with a member joined to the room now, ours included. */
  async joinedServers(roomId: string): Promise<string[]> {
    return serversOf(await this.members(roomId, 'join'));
  }

  /** Runs fn with the room's input lock: one event at a time per room. */
  private withRoomLock<T>(roomId: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.roomQueues.get(roomId) ?? Promise.resolve();
    const run = previous.then(fn, fn);
    const tail = run.catch(() => undefined);
    this.roomQueues.set(roomId, tail);
    void tail.then(() => {
      if (this.roomQueues.get(roomId) === tail) this.roomQueues.delete(roomId);
    });
    return run;
  }

  // ---------------------------------------------------------------- queries

  async roomVersion(roomId: string): Promise<RoomVersion | undefined> {
    return (await this.head(roomId))?.version;
  }

  async exists(roomId: string): Promise<boolean> {
    return (await this.head(roomId)) !== undefined;
  }

  /** The head a new write builds on: the newest, durable or not. Call with the room lock held. */
  private async writerHead(roomId: string): Promise<RoomHead | undefined> {
    return this.pendingHeads.get(roomId) ?? (await this.head(roomId));
  }

  private async head(roomId: string): Promise<RoomHead | undefined> {
    const cached = this.heads.get(roomId);
    if (cached) return cached;
    const row = await this.options.db.get<{ room_version: string; current_snapshot: number | null }>(
      'SELECT room_version, current_snapshot FROM rooms WHERE room_id = ?', [roomId],
    );
    if (!row) return undefined;
    const extremities = (await this.options.db.all<{ event_id: string }>('SELECT event_id FROM forward_extremities WHERE room_id = ?', [roomId])).map((r) => r.event_id);
    const current = row.current_snapshot === null ? undefined : { nid: row.current_snapshot, state: await this.stateStore.load(row.current_snapshot) };
    const head: RoomHead = { version: requireRoomVersion(row.room_version), current, extremities };
    this.heads.set(roomId, head);
    return head;
  }

  async getEvent(eventId: string): Promise<StoredEvent | undefined> {
    const cached = this.byId.get(eventId) ?? this.pendingEvents.get(eventId);
    if (cached) return cached;
    const row = await this.options.db.get<EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE event_id = ?`, [eventId]);
    return row ? this.cache(toStored(row)) : undefined;
  }

  async getEventByNid(nid: number): Promise<StoredEvent | undefined> {
    const cached = this.byNid.get(nid) ?? this.pendingEvents.get(nid);
    if (cached) return cached;
    const row = await this.options.db.get<EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE event_nid = ?`, [nid]);
    return row ? this.cache(toStored(row)) : undefined;
  }

  private cache(stored: StoredEvent): StoredEvent {
    this.byId.set(stored.event.event_id, stored);
    this.byNid.set(stored.nid, stored);
    return stored;
  }

  /** The room's current state as events. */
  async currentState(roomId: string): Promise<Map<StateKey, StoredEvent>> {
    const head = await this.head(roomId);
    if (!head) throw roomNotFound(roomId);
    return this.loadStateEvents(head.current?.state ?? new Map());
  }

  async currentStateEvent(roomId: string, type: string, key: string): Promise<StoredEvent | undefined> {
    const head = await this.head(roomId);
    const nid = head?.current?.state.get(stateKey(type, key));
    return nid === undefined ? undefined : this.getEventByNid(nid);
  }

  async loadStateEvents(state: NidState): Promise<Map<StateKey, StoredEvent>> {
    const out = new Map<StateKey, StoredEvent>();
    for (const [key, nid] of state) {
      const stored = await this.getEventByNid(nid);
      if (stored) out.set(key, stored);
    }
    return out;
  }

  /** State before (or after) an event we hold with state; undefined for outliers. */
  async stateAtEvent(eventId: string, which: 'before' | 'after'): Promise<NidState | undefined> {
    const stored = await this.getEvent(eventId);
    if (!stored || stored.stateSnapshot === null) return undefined;
    const before = await this.stateStore.load(stored.stateSnapshot);
    if (which === 'before' || !isStateEvent(stored.event) || stored.rejected) return before;
    const after = new Map(before);
    after.set(stateKey(stored.event.type, stored.event.state_key!), stored.nid);
    return after;
  }

  async membership(roomId: string, userId: string): Promise<string | undefined> {
    const event = await this.currentStateEvent(roomId, 'm.room.member', userId);
    return event?.event.content['membership'] as string | undefined;
  }

  /** Members of a room with a given membership in its current state. */
  async members(roomId: string, membership = 'join'): Promise<string[]> {
    const rows = await this.options.db.all<{ state_key: string }>(
      "SELECT state_key FROM current_state WHERE room_id = ? AND type = 'm.room.member' AND membership = ?", [roomId, membership],
    );
    return rows.map((r) => r.state_key);
  }

  /** Rooms whose current join rule is `public` (anyone may join, published or not). */
  async publicJoinRooms(): Promise<string[]> {
    const rows = await this.options.db.all<{ room_id: string; event_nid: number }>(
      "SELECT room_id, event_nid FROM current_state WHERE type = 'm.room.join_rules' AND state_key = ''",
    );
    const open: string[] = [];
    for (const row of rows) if ((await this.getEventByNid(row.event_nid))?.event.content['join_rule'] === 'public') open.push(row.room_id);
    return open;
  }

  /** Rooms where a user's current membership is one of `memberships`. */
  async roomsOf(userId: string, memberships: string[] = ['join']): Promise<string[]> {
    const rows = await this.options.db.all<{ room_id: string }>(
      `SELECT room_id FROM current_state WHERE state_key = ? AND type = 'm.room.member' AND membership IN (${memberships.map(() => '?').join(',')})`,
      [userId, ...memberships],
    );
    return rows.map((r) => r.room_id);
  }

  /**
   * Membership events in the stream range (from, to], oldest first, in the rooms where a
   * local user is joined now or whose own membership changed in that range (for device lists).
   */
  async memberChanges(userId: string, from: number, to: number): Promise<{ roomId: string; userId: string; membership: string }[]> {
    const rows = await this.options.db.all<{ room_id: string; state_key: string; json: string }>(
      `SELECT room_id, state_key, json FROM events
       WHERE type = 'm.room.member' AND stream_ordering > ? AND stream_ordering <= ? AND room_id IN (
         SELECT room_id FROM local_memberships WHERE user_id = ? AND (membership = 'join' OR stream_ordering > ?))
       ORDER BY stream_ordering`,
      [from, to, userId, from],
    );
    return rows.map((r) => ({
      roomId: r.room_id,
      userId: r.state_key,
      membership: String((JSON.parse(r.json) as RoomEvent).content['membership'] ?? ''),
    }));
  }

  /** The txnId a device used to send an event, for unsigned.transaction_id. */
  async transactionIdOf(eventId: string, userId: string, deviceId: string): Promise<string | undefined> {
    const row = await this.options.db.get<{ txn_id: string }>(
      'SELECT txn_id FROM transaction_ids WHERE event_id = ? AND user_id = ? AND device_id = ?', [eventId, userId, deviceId],
    );
    return row?.txn_id;
  }

  // --------------------------------------------------- aliases, directory

  async resolveAlias(alias: string): Promise<string | undefined> {
    return (await this.options.db.get<{ room_id: string }>('SELECT room_id FROM room_aliases WHERE alias = ?', [alias]))?.room_id;
  }

  /** Creates an alias; false when it is taken. */
  async createAlias(alias: string, roomId: string, creator: string): Promise<boolean> {
    return this.options.db.transaction((tx) => {
      if (tx.get('SELECT 1 FROM room_aliases WHERE alias = ?', [alias])) return false;
      tx.run('INSERT INTO room_aliases (alias, room_id, creator) VALUES (?, ?, ?)', [alias, roomId, creator]);
      return true;
    });
  }

  async aliasCreator(alias: string): Promise<string | undefined> {
    return (await this.options.db.get<{ creator: string }>('SELECT creator FROM room_aliases WHERE alias = ?', [alias]))?.creator;
  }

  async deleteAlias(alias: string): Promise<void> {
    await this.options.db.transaction((tx) => tx.run('DELETE FROM room_aliases WHERE alias = ?', [alias]));
  }

  /** Points every alias of one room at another, at once (a room upgrade). */
  async moveAliases(fromRoomId: string, toRoomId: string): Promise<void> {
    await this.options.db.transaction((tx) => tx.run('UPDATE room_aliases SET room_id = ? WHERE room_id = ?', [toRoomId, fromRoomId]));
  }

  async aliasesOf(roomId: string): Promise<string[]> {
    return (await this.options.db.all<{ alias: string }>('SELECT alias FROM room_aliases WHERE room_id = ? ORDER BY alias', [roomId])).map((r) => r.alias);
  }

  async setPublished(roomId: string, published: boolean): Promise<void> {
    await this.options.db.transaction((tx) => tx.run('UPDATE rooms SET published = ? WHERE room_id = ?', [published ? 1 : 0, roomId]));
  }

  async isPublished(roomId: string): Promise<boolean> {
    return (await this.options.db.get<{ published: number }>('SELECT published FROM rooms WHERE room_id = ?', [roomId]))?.published === 1;
  }

  async publishedRooms(): Promise<string[]> {
    return (await this.options.db.all<{ room_id: string }>('SELECT room_id FROM rooms WHERE published = 1 ORDER BY created_ts')).map((r) => r.room_id);
  }

  /** Hides a room the user has left from their /sync (client-server POST /forget). */
  async forget(userId: string, roomId: string): Promise<boolean> {
    return this.options.db.transaction(
      (tx) => tx.run("UPDATE local_memberships SET forgotten = 1 WHERE user_id = ? AND room_id = ? AND membership IN ('leave', 'ban')", [userId, roomId]).changes > 0,
    );
  }

  // ---------------------------------------------------------- local events

  /**
   * Creates a room: stores its version, then builds and stores the given events
   * (the first must be m.room.create) in one atomic transaction.
   */
  async createRoom(roomId: string, versionId: string, templates: EventTemplate[]): Promise<StoredEvent[]> {
    const version = requireRoomVersion(versionId);
    const write = await this.withRoomLock(roomId, async () => {
      if (await this.writerHead(roomId)) throw new RoomError('bad_event', `room ${roomId} already exists`);
      const head: RoomHead = { version, current: undefined, extremities: [] };
      return this.buildAndStore(roomId, head, templates, undefined, (tx) => {
        tx.run('INSERT INTO rooms (room_id, room_version, created_ts) VALUES (?, ?, ?)', [roomId, version.id, this.options.now()]);
      });
    });
    await write.durable;
    return write.stored;
  }

  /**
   * Starts tracking a room that lives on other servers (before its events arrive,
   * for instance while joining it over federation).
   */
  async trackRemoteRoom(roomId: string, versionId: string): Promise<void> {
    const version = requireRoomVersion(versionId);
    await this.options.db.transaction((tx) => {
      tx.run('INSERT OR IGNORE INTO rooms (room_id, room_version, created_ts) VALUES (?, ?, ?)', [roomId, version.id, this.options.now()]);
    });
  }

  /**
   * Builds, signs, authorises and stores local events in order, atomically. With a
   * transaction key, a repeated request returns the event first sent.
   */
  async sendEvents(roomId: string, templates: EventTemplate[], txn?: TransactionKey, options: { countersign?: Countersign } = {}): Promise<StoredEvent[]> {
    try {
      // The room lock covers building and running the write; making it durable
      // happens outside, so the next send in the room can be built meanwhile.
      const write = await this.withRoomLock(roomId, async (): Promise<LocalWrite> => {
        const head = await this.writerHead(roomId);
        if (!head) throw roomNotFound(roomId);
        const same = await this.sameAsCurrentState(head, templates);
        if (same) return { stored: [same], durable: Promise.resolve() };
        return this.buildAndStore(roomId, head, templates, txn, undefined, options.countersign);
      });
      await write.durable;
      return write.stored;
    } catch (e) {
      // A retried request: answer with the event first sent (checked inside the write, so no extra read per send).
      if (e instanceof RepeatedTransaction) return [(await this.getEvent(e.eventId))!];
      throw e;
    }
  }

  /**
   * A state event the room holds already: same type, state key, sender and content as
   * the one template asked for. Sending it again makes no new event (as in Synapse);
   * the caller gets the current one. Only durable events count, so the answer never
   * names an event that could still roll back.
   */
  private async sameAsCurrentState(head: RoomHead, templates: EventTemplate[]): Promise<StoredEvent | undefined> {
    const template = templates.length === 1 ? templates[0]! : undefined;
    if (template?.state_key === undefined) return undefined;
    const nid = head.current?.state.get(stateKey(template.type, template.state_key));
    const current = nid === undefined ? undefined : await this.getEventByNid(nid);
    if (!current || this.pendingEvents.has(current.nid) || current.redactedBy !== null || current.event.sender !== template.sender) return undefined;
    return canonicalJson(current.event.content) === canonicalJson(template.content) ? current : undefined;
  }

  private async buildAndStore(
    roomId: string,
    head: RoomHead,
    templates: EventTemplate[],
    txn: TransactionKey | undefined,
    before?: (tx: WriteTransaction) => void,
    countersign?: Countersign,
  ): Promise<LocalWrite> {
    // Build every event against the state as it evolves, before touching the database.
    const built: RoomEvent[] = [];
    const state: NidState = head.current?.state ?? new Map();
    const pendingByKey = new Map<StateKey, RoomEvent>();
    const lookup = async (key: StateKey): Promise<RoomEvent | undefined> => {
      const pending = pendingByKey.get(key);
      if (pending) return pending;
      const nid = state.get(key);
      return nid === undefined ? undefined : (await this.getEventByNid(nid))?.event;
    };
    let prevEvents = (await Promise.all(head.extremities.map((id) => this.getEvent(id)))).filter((e) => !!e).map((e) => e.event);
    for (const template of templates) {
      const event = await this.buildEvent(roomId, head.version, template, prevEvents, lookup);
      built.push(event);
      if (isStateEvent(event)) pendingByKey.set(stateKey(event.type, event.state_key!), event);
      prevEvents = [event];
    }
    if (countersign) {
      if (built.length !== 1) throw new Error('only a single event can be countersigned');
      const signed = await countersign(built[0]!, head.version);
      // Signatures are outside the reference hash: anything else changed would be another event.
      const { event_id: _id, ...pdu } = signed;
      const asSent = head.version.eventIdFormat === 'local' ? signed : pdu;
      if (computeEventId(asSent, head.version) !== built[0]!.event_id || !contentHashMatches(pdu)) {
        throw new RoomError('bad_event', 'the countersigned event is not the event that was sent');
      }
      built[0] = { ...signed, event_id: built[0]!.event_id };
    }
    return this.storeLocal(roomId, head, built, txn, before);
  }

  /**
   * An unsigned event built against the room's current state (prev events, auth
   * events, depth) and checked against the auth rules: what make_join, make_leave
   * and make_knock hand a remote server to sign.
   */
  async prepareEvent(roomId: string, template: EventTemplate): Promise<{ version: RoomVersion; event: Record<string, unknown> }> {
    const head = await this.head(roomId);
    if (!head?.current) throw roomNotFound(roomId);
    const state = head.current.state;
    const lookup = async (key: StateKey) => {
      const nid = state.get(key);
      return nid === undefined ? undefined : (await this.getEventByNid(nid))?.event;
    };
    const prevEvents = (await Promise.all(head.extremities.map((id) => this.getEvent(id)))).filter((e) => !!e).map((e) => e.event);
    const { unsigned, authEvents } = await this.eventSkeleton(roomId, head.version, template, prevEvents, lookup);
    const authMap = new Map(authEvents.map((e) => [stateKey(e.type, e.state_key ?? ''), e]));
    try {
      await checkEventAuth(unsigned as unknown as RoomEvent, (type, key) => authMap.get(stateKey(type, key)), head.version, this.options.ed25519);
    } catch (e) {
      if (e instanceof AuthError) throw new RoomError('forbidden', e.message);
      throw e;
    }
    return { version: head.version, event: unsigned };
  }

  private async buildEvent(
    roomId: string,
    version: RoomVersion,
    template: EventTemplate,
    prevEvents: RoomEvent[],
    lookup: (key: StateKey) => Promise<RoomEvent | undefined>,
  ): Promise<RoomEvent> {
    const { serverName, keyId, signingKey } = this.options;
    const { unsigned, authEvents } = await this.eventSkeleton(roomId, version, template, prevEvents, lookup);
    const signed = await signNewEvent(unsigned, version, serverName, keyId, signingKey);
    const event = { ...(signed.event as unknown as PDU), event_id: signed.eventId } as RoomEvent;
    this.checkSize(event, version);
    const authMap = new Map(authEvents.map((e) => [stateKey(e.type, e.state_key ?? ''), e]));
    try {
      await checkEventAuth(event, (type, key) => authMap.get(stateKey(type, key)), version, this.options.ed25519);
    } catch (e) {
      if (e instanceof AuthError) throw new RoomError('forbidden', e.message);
      throw e;
    }
    return event;
  }

  /** The fields of a new event other than hashes and signatures. */
  private async eventSkeleton(
    roomId: string,
    version: RoomVersion,
    template: EventTemplate,
    prevEvents: RoomEvent[],
    lookup: (key: StateKey) => Promise<RoomEvent | undefined>,
  ): Promise<{ unsigned: Record<string, unknown>; authEvents: RoomEvent[] }> {
    const { serverName } = this.options;
    const authEvents: RoomEvent[] = [];
    const partial = { type: template.type, sender: template.sender, state_key: template.state_key, content: template.content };
    for (const [type, key] of authEventSelection(version, partial)) {
      const event = await lookup(stateKey(type, key));
      if (event && !authEvents.includes(event)) authEvents.push(event);
    }
    const reference = (e: RoomEvent) => (version.eventReferences === 'pairs' ? ([e.event_id, { sha256: e.hashes.sha256 }] as [string, { sha256: string }]) : e.event_id);
    const unsigned: Record<string, unknown> = {
      room_id: roomId,
      sender: template.sender,
      type: template.type,
      content: template.content,
      origin_server_ts: this.options.now(),
      depth: Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, ...prevEvents.map((e) => e.depth)) + 1),
      prev_events: prevEvents.slice(0, MAX_PREV_EVENTS).map(reference),
      auth_events: authEvents.map(reference),
    };
    if (template.state_key !== undefined) unsigned['state_key'] = template.state_key;
    if (!version.redactsInContent && template.redacts !== undefined) unsigned['redacts'] = template.redacts;
    if (version.redaction !== 'v11') unsigned['origin'] = serverName;
    if (version.eventIdFormat === 'local') unsigned['event_id'] = `$${randomToken(this.options.random, 18)}:${serverName}`;
    return { unsigned, authEvents };
  }

  private checkSize(event: RoomEvent, version: RoomVersion): void {
    const { event_id: _id, ...pdu } = event;
    const body = version.eventIdFormat === 'local' ? event : pdu;
    let encoded: string;
    try {
      encoded = canonicalJson(body, { strict: version.strictCanonicalJson });
    } catch (e) {
      throw new RoomError('bad_event', (e as Error).message);
    }
    if (utf8(encoded).length > MAX_EVENT_BYTES) throw new RoomError('too_large', `event exceeds ${MAX_EVENT_BYTES} bytes`);
    for (const id of [event.sender, event.room_id, event.type, event.state_key ?? '']) {
      if (byteLength(id) > MAX_ID_BYTES) throw new RoomError('bad_event', 'an identifier exceeds 255 bytes');
    }
  }

  /**
   * Runs the write for locally built events. Resolves once it has run in memory
   * (the room's writer head has moved); `durable` settles when it is durable, and
   * only then do queries and long-polls see it.
   */
  private async storeLocal(
    roomId: string,
    head: RoomHead,
    built: RoomEvent[],
    txn: TransactionKey | undefined,
    before?: (tx: WriteTransaction) => void,
  ): Promise<LocalWrite> {
    const redactionTargets = await this.redactionTargets(roomId, head, built);
    const snapshots: { nid: number; state: NidState }[] = [];
    const prevIds = referenceIds(built[0]!.prev_events);
    const last = built.at(-1)!;
    const write = this.runRoomWrite(roomId, (tx) => {
      // A write this one builds on may have failed to become durable and rolled back.
      for (const id of prevIds) {
        if (!tx.get('SELECT 1 FROM events WHERE event_id = ?', [id])) throw new Error(`an earlier write in room ${roomId} failed; try again`);
      }
      if (txn) {
        const repeated = tx.get<{ event_id: string }>('SELECT event_id FROM transaction_ids WHERE user_id = ? AND device_id = ? AND txn_id = ?', [txn.userId, txn.deviceId, txn.txnId]);
        if (repeated) throw new RepeatedTransaction(repeated.event_id);
      }
      for (const event of built) refuseDuplicateAnnotation(tx, event);
      before?.(tx);
      let current = head.current;
      const stored: StoredEvent[] = [];
      for (const event of built) {
        const streamOrdering = nextStreamId(tx);
        const stateBefore = current ?? this.stateStore.create(tx, roomId, undefined, new Map());
        if (!current) snapshots.push(stateBefore);
        const row = this.insertEvent(tx, event, { streamOrdering, stateSnapshot: stateBefore.nid, replacesState: replaced(stateBefore.state, event) });
        if (isStateEvent(event)) {
          const after = this.stateStore.create(tx, roomId, stateBefore, new Map([[stateKey(event.type, event.state_key!), row.nid]]));
          snapshots.push(after);
          this.updateCurrentState(tx, roomId, current?.state ?? new Map(), after.state);
          current = after;
          tx.run('UPDATE rooms SET current_snapshot = ? WHERE room_id = ?', [after.nid, roomId]);
        }
        this.applyRedaction(tx, event, redactionTargets);
        stored.push(row);
      }
      if (head.extremities.length === 1) {
        tx.run('UPDATE forward_extremities SET event_id = ? WHERE room_id = ?', [last.event_id, roomId]);
      } else {
        tx.run('DELETE FROM forward_extremities WHERE room_id = ?', [roomId]);
        tx.run('INSERT INTO forward_extremities (room_id, event_id) VALUES (?, ?)', [roomId, last.event_id]);
      }
      if (txn) {
        tx.run('INSERT INTO transaction_ids (user_id, device_id, txn_id, event_id) VALUES (?, ?, ?, ?)', [txn.userId, txn.deviceId, txn.txnId, last.event_id]);
      }
      const sent = this.outbox?.(tx, { roomId, version: head.version, events: built, servers: this.destinationsOf(tx, roomId, built) });
      return { stored, head: { version: head.version, current, extremities: [last.event_id] }, snapshots, redactionTargets, afterDurable: sent ?? undefined };
    });
    const { stored } = await write.executed;
    return { stored, durable: write.durable };
  }

  /**
   * One write to a room, with the room lock held. `executed` resolves when fn has
   * run in memory: the room's writer head and its events are then visible to the
   * next write. `durable` settles once the storage layer has made it durable; then
   * the durable head moves and long-polls wake. If it fails, the in-memory view is
   * dropped and reloaded from what was stored.
   */
  private runRoomWrite(
    roomId: string,
    fn: (tx: WriteTransaction) => {
      stored: StoredEvent[];
      head: RoomHead;
      snapshots: { nid: number; state: NidState }[];
      redactionTargets: Map<string, string>;
      afterDurable?: () => void;
    },
  ): { executed: Promise<{ stored: StoredEvent[] }>; durable: Promise<void> } {
    let resolveExecuted!: (value: ReturnType<typeof fn>) => void;
    let rejectExecuted!: (error: unknown) => void;
    const executed = new Promise<ReturnType<typeof fn>>((resolve, reject) => {
      resolveExecuted = resolve;
      rejectExecuted = reject;
    });
    const committed = this.options.db.transaction((tx) => {
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
    return { executed: ran, durable };
  }

  /**
   * The events that redactions among `events` may redact: same room, and the
   * redacter holds the redact level or shares the target's server
   * (rooms/fragments/v3-handling-redactions).
   */
  private async redactionTargets(roomId: string, head: RoomHead, events: RoomEvent[]): Promise<Map<string, string>> {
    const targets = new Map<string, string>(); // redaction event ID → target event ID
    const redactions = events.filter((e) => e.type === 'm.room.redaction');
    if (redactions.length === 0) return targets;
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
      const targetEvent = (await this.getEvent(target))?.event ?? events.find((e) => e.event_id === target);
      if (!targetEvent || targetEvent.room_id !== roomId) continue;
      if (mayApplyRedaction(event, targetEvent, levels)) targets.set(event.event_id, target);
    }
    return targets;
  }

  private applyRedaction(tx: WriteTransaction, event: RoomEvent, targets: Map<string, string>): void {
    const target = targets.get(event.event_id);
    if (!target) return;
    tx.run('UPDATE events SET redacted_by = ? WHERE event_id = ? AND redacted_by IS NULL', [event.event_id, target]);
    // Its m.relates_to is redacted away, and its words with it.
    unindexRelation(tx, target);
    this.indexer?.dropped(tx, target);
  }

  private insertEvent(
    tx: WriteTransaction,
    event: RoomEvent,
    meta: { streamOrdering: number | null; stateSnapshot: number | null; replacesState: number | null; outlier?: boolean; rejected?: string | null; softFailed?: boolean },
  ): StoredEvent {
    const nid = tx.get<{ event_nid: number }>(
      `INSERT INTO events (event_id, room_id, type, state_key, sender, depth, origin_server_ts, json, stream_ordering, state_snapshot, replaces_state, outlier, rejected, soft_failed)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING event_nid`,
      [
        event.event_id, event.room_id, event.type, event.state_key ?? null, event.sender, event.depth, event.origin_server_ts,
        JSON.stringify(event), meta.streamOrdering, meta.stateSnapshot, meta.replacesState, meta.outlier ? 1 : 0, meta.rejected ?? null, meta.softFailed ? 1 : 0,
      ],
    )!.event_nid;
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
    // The indexes of the timeline are kept in the write that stores the event, whichever path stores it.
    indexRelation(tx, stored);
    this.indexer?.stored(tx, stored);
    return stored;
  }

  /** Where local events go: servers joined after the write, and those of users made to leave. */
  private destinationsOf(tx: WriteTransaction, roomId: string, events: RoomEvent[]): string[] {
    const users = tx.all<{ state_key: string }>("SELECT state_key FROM current_state WHERE room_id = ? AND type = 'm.room.member' AND membership = 'join'", [roomId]).map((r) => r.state_key);
    for (const event of events) {
      const membership = event.type === 'm.room.member' ? event.content['membership'] : undefined;
      if (membership === 'leave' || membership === 'ban') users.push(event.state_key!);
    }
    return serversOf(users).filter((server) => server !== this.options.serverName);
  }

  // ------------------------------------------------ rooms we are not in (yet)

  /**
   * An invite for a local user from another server, to a room we may not know:
   * kept as an outlier with the stripped state it came with, so /sync can show it.
   */
  async recordRemoteMembership(event: RoomEvent): Promise<StoredEvent> {
    const userId = event.state_key!;
    const membership = String(event.content['membership']);
    let position = 0;
    const stored = await this.options.db.transaction((tx) => {
      const existing = tx.get<EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE event_id = ?`, [event.event_id]);
      const row = existing ? toStored(existing) : this.insertEvent(tx, event, { streamOrdering: null, stateSnapshot: null, replacesState: null, outlier: true });
      // A room we are joined to learns of the membership by its own events; this is for the others.
      const joined = tx.get("SELECT 1 FROM local_memberships WHERE user_id = ? AND room_id = ? AND membership = 'join'", [userId, event.room_id]);
      if (!joined) {
        position = nextStreamId(tx);
        tx.run(
          `INSERT INTO local_memberships (user_id, room_id, membership, event_id, stream_ordering) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (user_id, room_id) DO UPDATE SET membership = excluded.membership, event_id = excluded.event_id,
             stream_ordering = excluded.stream_ordering, forgotten = 0`,
          [userId, event.room_id, membership, event.event_id, position],
        );
      }
      return row;
    });
    if (position > 0) this.options.notify({ position, userIds: [userId] });
    return this.cache(stored);
  }

  /** A local user's membership as we last heard of it, in rooms we hold and rooms we don't. */
  async localMembership(userId: string, roomId: string): Promise<{ membership: string; eventId: string } | undefined> {
    const row = await this.options.db.get<{ membership: string; event_id: string }>(
      'SELECT membership, event_id FROM local_memberships WHERE user_id = ? AND room_id = ?', [userId, roomId],
    );
    return row ? { membership: row.membership, eventId: row.event_id } : undefined;
  }

  /** An outlier becomes a timeline event: it gets its place in the stream and its state. */
  private promoteOutlier(
    tx: WriteTransaction,
    outlier: StoredEvent,
    meta: { streamOrdering: number | null; stateSnapshot: number; replacesState: number | null; softFailed: boolean },
  ): StoredEvent {
    tx.run('UPDATE events SET stream_ordering = ?, state_snapshot = ?, replaces_state = ?, outlier = 0, soft_failed = ? WHERE event_nid = ?', [
      meta.streamOrdering, meta.stateSnapshot, meta.replacesState, meta.softFailed ? 1 : 0, outlier.nid,
    ]);
    const promoted = { ...outlier, ...meta, outlier: false };
    indexRelation(tx, promoted);
    this.indexer?.stored(tx, promoted);
    return promoted;
  }

  /** Brings the current_state and local_memberships tables from `from` to `to`. */
  private updateCurrentState(tx: WriteTransaction, roomId: string, from: NidState, to: NidState): void {
    for (const [key, nid] of to) {
      if (from.get(key) === nid) continue;
      const [type, sk] = splitStateKey(key);
      const row = tx.get<{ json: string; stream_ordering: number | null }>('SELECT json, stream_ordering FROM events WHERE event_nid = ?', [nid])!;
      const event = JSON.parse(row.json) as RoomEvent;
      const membership = type === 'm.room.member' ? String(event.content['membership'] ?? '') : null;
      tx.run(
        `INSERT INTO current_state (room_id, type, state_key, event_nid, membership) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (room_id, type, state_key) DO UPDATE SET event_nid = excluded.event_nid, membership = excluded.membership`,
        [roomId, type, sk, nid, membership],
      );
      if (membership !== null && sk.endsWith(':' + this.options.serverName)) {
        tx.run(
          `INSERT INTO local_memberships (user_id, room_id, membership, event_id, stream_ordering) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (user_id, room_id) DO UPDATE SET membership = excluded.membership, event_id = excluded.event_id,
             stream_ordering = excluded.stream_ordering, forgotten = 0`,
          [sk, roomId, membership, event.event_id, row.stream_ordering ?? nextStreamId(tx)],
        );
      }
    }
    for (const key of from.keys()) {
      if (to.has(key)) continue;
      const [type, sk] = splitStateKey(key);
      tx.run('DELETE FROM current_state WHERE room_id = ? AND type = ? AND state_key = ?', [roomId, type, sk]);
    }
  }

  private afterCommit(roomId: string, stored: StoredEvent[], redactions: Map<string, string>): void {
    for (const s of stored) this.cache(s);
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

  // --------------------------------------------------------- remote events

  /**
   * Checks and stores an event from another server (server-server §Checks performed
   * on receipt of a PDU). Events failing signature or hash checks are refused and
   * not stored; events failing auth are stored as rejected; events that pass
   * against their own state but not the room's current state are soft-failed.
   */
  async receiveEvent(pdu: PDU, options: ReceiveOptions = {}): Promise<StoredEvent> {
    try {
      return await this.receive(pdu, options);
    } catch (e) {
      // The same event arrived twice at once: the first one stored it.
      if (e instanceof RepeatedTransaction) return (await this.getEvent(e.eventId))!;
      throw e;
    }
  }

  private async receive(pdu: PDU, options: ReceiveOptions): Promise<StoredEvent> {
    const roomId = pdu.room_id;
    // Signatures and hashes need no room state: they are checked while earlier
    // events wait for or hold the room lock, so several events are verified at
    // once. The lock is queued for at once, so events keep the order they came in.
    const checked = this.roomVersion(roomId).then((version) => {
      if (!version) throw roomNotFound(roomId);
      return this.checkRemoteEvent(pdu, version);
    });
    // Whether we hold it already is read outside the lock too: a read waits for the
    // write in flight, and inside the lock that would serialise on every fsync.
    const known = checked.then((event) => this.getEvent(event.event_id));
    checked.catch(() => undefined); // reported inside the lock
    known.catch(() => undefined);
    const write = await this.withRoomLock(roomId, async (): Promise<LocalWrite> => {
      const event = await checked;
      const done = (stored: StoredEvent) => ({ stored: [stored], durable: Promise.resolve() });
      const head = await this.writerHead(roomId);
      if (!head) throw roomNotFound(roomId);
      const existing = this.pendingEvents.get(event.event_id) ?? (await known);
      // An outlier we hold (from a join's state or an auth chain) takes its place in the timeline when it comes with history.
      const promote = existing !== undefined && existing.outlier && !existing.rejected && !options.outlier;
      if (existing && !promote) return done(existing);

      // Auth against the event's own auth events (which must all be known).
      const authIds = referenceIds(event.auth_events);
      const authEvents = await Promise.all(authIds.map((id) => this.getEvent(id)));
      if (authEvents.some((e) => !e)) throw new RoomError('missing_events', `auth events of ${event.event_id} are unknown`);
      const rejectedIds = new Set(authEvents.filter((e) => e!.rejected).map((e) => e!.event.event_id));
      try {
        await checkEventAgainstAuthEvents(event, authEvents.map((e) => e!.event), head.version, this.options.ed25519, { isRejected: (id) => rejectedIds.has(id) });
      } catch (e) {
        if (e instanceof AuthError) return done(await this.storeRejected(event, e.message, options.outlier));
        throw e;
      }
      if (options.outlier) return done(await this.storeOutlier(event));

      // Auth against the state before the event: given (a join's state, the state at a
      // backfilled event whose prev events we lack), or resolved from its prev events.
      const prevIds = referenceIds(event.prev_events);
      const stateBefore = options.stateBefore ? await this.stateOfEvents(options.stateBefore, event.event_id) : await this.stateAfterPrevEvents(head.version, event.event_id, prevIds);
      const beforeEvents = await this.authStateFor(event, head.version, stateBefore);
      const beforeRejection = await this.authReason(event, head.version, (k) => beforeEvents.get(k));
      if (beforeRejection) return done(await this.storeRejected(event, beforeRejection, false, existing));

      // Soft failure: allowed by its own history but not by the room as it is now. History that
      // arrives by backfill is older than the current state, and a join to a room we had no
      // state for (its state came with it) has no current state: nothing to soft-fail against.
      let softFailed = false;
      if (!options.backfilled && head.current) {
        const currentEvents = await this.authStateFor(event, head.version, head.current?.state ?? new Map());
        softFailed = (await this.authReason(event, head.version, (k) => currentEvents.get(k))) !== undefined;
      }
      return this.storeAccepted(head, event, stateBefore, options.stateBefore ? [] : prevIds, {
        softFailed, backfilled: options.backfilled ?? false, promoting: promote ? existing : undefined,
      });
    });
    await write.durable;
    return write.stored[0]!;
  }

  private async stateAfterPrevEvents(version: RoomVersion, eventId: string, prevIds: string[]): Promise<NidState> {
    const prevStates: NidState[] = [];
    for (const id of prevIds) {
      const state = await this.stateAtEvent(id, 'after');
      if (!state) throw new RoomError('missing_events', `prev event ${id} of ${eventId} is unknown or has no state`);
      prevStates.push(state);
    }
    return this.resolve(version, prevStates);
  }

  /** A state given as the IDs of its events, which must all be held (as outliers at least). */
  private async stateOfEvents(eventIds: readonly string[], forEventId: string): Promise<NidState> {
    const state = new Map<StateKey, number>();
    for (const id of eventIds) {
      const stored = await this.getEvent(id);
      if (!stored) throw new RoomError('missing_events', `state event ${id} for ${forEventId} is unknown`);
      if (stored.rejected || !isStateEvent(stored.event)) continue;
      state.set(stateKey(stored.event.type, stored.event.state_key!), stored.nid);
    }
    return state;
  }

  /** Format, size, content hash and signature checks. Returns the event with its ID. */
  private async checkRemoteEvent(pdu: PDU, version: RoomVersion): Promise<RoomEvent> {
    let event = { ...pdu, event_id: computeEventId(pdu, version) } as RoomEvent;
    this.checkSize(event, version);
    for (const origin of requiredSignatureServers(version, event)) {
      const keys = Object.keys(pdu.signatures?.[origin] ?? {}).filter((k) => k.startsWith('ed25519:'));
      let verified = false;
      for (const keyId of keys) {
        const key = await this.options.resolveVerifyKey(origin, keyId);
        if (key && (await verifyEventSignature(pdu, version, origin, keyId, key, this.options.ed25519))) {
          verified = true;
          break;
        }
      }
      if (!verified) throw new RoomError('bad_event', `event ${event.event_id} has no valid signature from ${origin}`);
    }
    // A failed content hash means the event was tampered with: keep only its redacted form.
    if (!contentHashMatches(pdu)) event = { ...(redactEvent(event, version) as unknown as RoomEvent), event_id: event.event_id };
    return event;
  }

  /**
   * The part of a state the auth rules read for an event: its auth event
   * selection, not the whole state (a room's state can hold thousands of members).
   */
  private async authStateFor(event: RoomEvent, version: RoomVersion, state: NidState): Promise<Map<StateKey, RoomEvent>> {
    const out = new Map<StateKey, RoomEvent>();
    for (const [type, key] of authEventSelection(version, event)) {
      const nid = state.get(stateKey(type, key));
      const stored = nid === undefined ? undefined : await this.getEventByNid(nid);
      if (stored) out.set(stateKey(type, key), stored.event);
    }
    return out;
  }

  private async authReason(event: RoomEvent, version: RoomVersion, lookup: (key: StateKey) => RoomEvent | undefined): Promise<string | undefined> {
    try {
      await checkEventAuth(event, (type, key) => lookup(stateKey(type, key)), version, this.options.ed25519);
      return undefined;
    } catch (e) {
      if (e instanceof AuthError) return e.message;
      throw e;
    }
  }

  /**
   * Resolves state sets given by event nid. `pending` is an event not stored yet,
   * standing in the sets under the nid PENDING_NID.
   */
  private async resolve(version: RoomVersion, states: NidState[], pending?: RoomEvent): Promise<NidState> {
    if (states.length === 1) return states[0]!;
    const idOf = async (nid: number) => (nid === PENDING_NID ? pending?.event_id : (await this.getEventByNid(nid))?.event.event_id);
    const nidOf = new Map<string, number>();
    const asIds: StateMap[] = [];
    for (const state of states) {
      const map: StateMap = new Map();
      for (const [key, nid] of state) {
        const id = await idOf(nid);
        if (id === undefined) continue;
        map.set(key, id);
        nidOf.set(id, nid);
      }
      asIds.push(map);
    }
    const getEvent = async (id: string) => (id === pending?.event_id ? pending : (await this.getEvent(id))?.event);
    const resolved = await resolveState(version, asIds, { getEvent });
    const out = new Map<StateKey, number>();
    for (const [key, id] of resolved) {
      const nid = nidOf.get(id) ?? (await this.getEvent(id))?.nid;
      if (nid !== undefined) out.set(key, nid);
    }
    return out;
  }

  private async storeRejected(event: RoomEvent, reason: string, outlier = false, existing?: StoredEvent): Promise<StoredEvent> {
    const stored = await this.options.db.transaction((tx) => {
      if (!existing) return this.insertEvent(tx, event, { streamOrdering: null, stateSnapshot: null, replacesState: null, outlier, rejected: reason });
      tx.run('UPDATE events SET rejected = ? WHERE event_nid = ?', [reason, existing.nid]);
      unindexRelation(tx, existing.event.event_id);
      this.indexer?.dropped(tx, existing.event.event_id);
      return { ...existing, rejected: reason };
    });
    return this.cache(stored);
  }

  private async storeOutlier(event: RoomEvent): Promise<StoredEvent> {
    const stored = await this.options.db.transaction((tx) =>
      this.insertEvent(tx, event, { streamOrdering: null, stateSnapshot: null, replacesState: null, outlier: true }),
    );
    return this.cache(stored);
  }

  /** Stores an accepted (or soft-failed) event and moves the room's current state, in one transaction. */
  private async storeAccepted(
    head: RoomHead,
    event: RoomEvent,
    stateBefore: NidState,
    prevIds: string[],
    how: { softFailed: boolean; backfilled: boolean; promoting: StoredEvent | undefined },
  ): Promise<LocalWrite> {
    const { softFailed, backfilled, promoting } = how;
    const roomId = event.room_id;
    const afterState = new Map(stateBefore);
    if (isStateEvent(event)) afterState.set(stateKey(event.type, event.state_key!), PENDING_NID);
    // Soft-failed and backfilled events stay out of the extremities and the current state.
    const movesCurrent = !softFailed && !backfilled;
    const extremities = movesCurrent ? [...head.extremities.filter((id) => !prevIds.includes(id)), event.event_id] : head.extremities;
    const from = head.current?.state ?? new Map<StateKey, number>();
    // When the event descends from every extremity its state is the room's; otherwise resolve the two.
    const newCurrent = !movesCurrent ? undefined : extremities.length === 1 ? afterState : await this.resolve(head.version, [from, afterState], event);
    const redactionTargets = softFailed ? new Map<string, string>() : await this.redactionTargets(roomId, head, [event]);
    const snapshots: { nid: number; state: NidState }[] = [];
    const write = this.runRoomWrite(roomId, (tx) => {
      for (const id of prevIds) {
        if (!tx.get('SELECT 1 FROM events WHERE event_id = ?', [id])) throw new Error(`an earlier write in room ${roomId} failed; try again`);
      }
      if (!promoting) {
        const already = tx.get<{ event_id: string }>('SELECT event_id FROM events WHERE event_id = ?', [event.event_id]);
        if (already) throw new RepeatedTransaction(already.event_id);
      }
      const before = head.current && sameState(head.current.state, stateBefore) ? head.current : this.stateStore.create(tx, roomId, head.current, diffState(from, stateBefore));
      snapshots.push(before);
      // Backfilled history sorts before everything live: negative stream positions, never reported by /sync.
      const streamOrdering = softFailed ? null : backfilled ? nextBackfillOrdering(tx) : nextStreamId(tx);
      const meta = { streamOrdering, stateSnapshot: before.nid, replacesState: replaced(stateBefore, event), softFailed };
      const stored = promoting ? this.promoteOutlier(tx, promoting, meta) : this.insertEvent(tx, event, meta);
      if (!newCurrent) return { stored: [stored], head, snapshots, redactionTargets };
      const resolvedCurrent = new Map([...newCurrent].map(([k, nid]) => [k, nid === PENDING_NID ? stored.nid : nid]));
      const current = this.stateStore.create(tx, roomId, head.current, diffState(from, resolvedCurrent));
      snapshots.push(current);
      this.updateCurrentState(tx, roomId, from, current.state);
      tx.run('UPDATE rooms SET current_snapshot = ? WHERE room_id = ?', [current.nid, roomId]);
      for (const id of prevIds) tx.run('DELETE FROM forward_extremities WHERE room_id = ? AND event_id = ?', [roomId, id]);
      tx.run('INSERT OR IGNORE INTO forward_extremities (room_id, event_id) VALUES (?, ?)', [roomId, event.event_id]);
      this.applyRedaction(tx, event, redactionTargets);
      return { stored: [stored], head: { version: head.version, current, extremities }, snapshots, redactionTargets };
    });
    const { stored } = await write.executed;
    return { stored, durable: write.durable };
  }
}

/** How an event from another server arrives. */
export interface ReceiveOptions {
  /** Store it without state (auth chains, a join's state): checked against its auth events only. */
  outlier?: boolean;
  /** History fetched by backfill: placed before live events, leaves the current state alone. */
  backfilled?: boolean;
  /**
   * The state before the event, as IDs of events we hold: for a join (the resident server's
   * state) and for backfilled events whose prev events we lack.
   */
  stateBefore?: readonly string[];
}

const STRIPPED_STATE_TYPES = ['m.room.create', 'm.room.join_rules', 'm.room.name', 'm.room.avatar', 'm.room.canonical_alias', 'm.room.encryption', 'm.room.topic'];

function serversOf(userIds: Iterable<string>): string[] {
  return [...new Set([...userIds].map(serverNameOf))];
}

/** Backfilled events count down from -1, below every live stream position. */
function nextBackfillOrdering(tx: WriteTransaction): number {
  const lowest = tx.get<{ low: number | null }>('SELECT MIN(stream_ordering) AS low FROM events')!.low ?? 0;
  return Math.min(lowest, 0) - 1;
}

/** Thrown inside a write whose transaction ID (or event) was stored before, to abandon the write. */
class RepeatedTransaction extends Error {
  constructor(readonly eventId: string) {
    super(`transaction already sent as ${eventId}`);
  }
}

/** Stands for an event in a state map before it is stored and has a nid. */
const PENDING_NID = -1;

/** Changes that turn `from` into `to` (0 marks a removal). */
function diffState(from: NidState | undefined, to: NidState): Map<StateKey, number> {
  const changes = new Map<StateKey, number>();
  for (const [key, nid] of to) if (from?.get(key) !== nid) changes.set(key, nid);
  if (from) for (const key of from.keys()) if (!to.has(key)) changes.set(key, 0);
  return changes;
}

function sameState(a: NidState, b: NidState): boolean {
  if (a === b) return true;
  if (a.size !== b.size) return false;
  for (const [key, nid] of a) if (b.get(key) !== nid) return false;
  return true;
}

function replaced(state: NidState, event: RoomEvent): number | null {
  if (!isStateEvent(event)) return null;
  const nid = state.get(stateKey(event.type, event.state_key!));
  return nid !== undefined && nid > 0 ? nid : null;
}
