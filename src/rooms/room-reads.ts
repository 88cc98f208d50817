import { isStateEvent, stateKey, type RoomEvent, type StateKey } from '../events/event.ts';
import { serverNameOf } from '../events/identifiers.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import { roomNotFound } from './errors.ts';
import { LruCache } from './lru.ts';
import { serversOf, SHARES_ROOM_SQL, type RoomStore } from './room-store.ts';
import type { NidState } from './state-store.ts';
import type { StoredEvent } from './types.ts';

const STRIPPED_STATE_TYPES = ['m.room.create', 'm.room.join_rules', 'm.room.name', 'm.room.avatar', 'm.room.canonical_alias', 'm.room.encryption', 'm.room.topic'];

/**
 * The room engine's queries: events, current state and state at an event, memberships
 * and who shares rooms. They see only durable writes (the durable head).
 */
export class RoomReads {
  /** Member counts by membership, per room, as of one state snapshot (see memberCount). */
  private readonly memberCounts = new LruCache<string, { snapshot: number; counts: Map<string, number> }>(10_000);

  constructor(protected readonly store: RoomStore) {}

  get serverName(): string {
    return this.store.options.serverName;
  }

  async roomVersion(roomId: string): Promise<RoomVersion | undefined> {
    return (await this.store.head(roomId))?.version;
  }

  async exists(roomId: string): Promise<boolean> {
    return (await this.store.head(roomId)) !== undefined;
  }

  async getEvent(eventId: string): Promise<StoredEvent | undefined> {
    return this.store.getEvent(eventId);
  }

  async getEventByNid(nid: number): Promise<StoredEvent | undefined> {
    return this.store.getEventByNid(nid);
  }

  /** Many events by nid, in order (undefined where unknown), read together. */
  async getEventsByNid(nids: readonly number[]): Promise<(StoredEvent | undefined)[]> {
    return this.store.getEventsByNid(nids);
  }

  /** The room's newest events, that new events build on. */
  async forwardExtremities(roomId: string): Promise<string[]> {
    return [...((await this.store.head(roomId))?.extremities ?? [])];
  }

  /** The room's current state as events. */
  async currentState(roomId: string): Promise<Map<StateKey, StoredEvent>> {
    const head = await this.store.head(roomId);
    if (!head) throw roomNotFound(roomId);
    return this.loadStateEvents(head.current?.state ?? new Map());
  }

  async currentStateEvent(roomId: string, type: string, key: string): Promise<StoredEvent | undefined> {
    const head = await this.store.head(roomId);
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

  /**
   * Whether a redaction the room took applies to its target (rooms v3+: its target is known, of
   * the same room, and its sender held the redact level or is of the target sender's server).
   */
  async redactionApplies(redactionId: string): Promise<boolean> {
    const row = await this.store.db.get<{ applies: number | null }>('SELECT applies FROM redactions WHERE redaction_id = ?', [redactionId]);
    return row?.applies === 1;
  }

  /** The state before an event we hold, from its snapshot; undefined for outliers (they have none). */
  async stateBefore(stored: StoredEvent): Promise<NidState | undefined> {
    return stored.stateSnapshot === null ? undefined : this.store.stateStore.load(stored.stateSnapshot);
  }

  /** State before (or after) an event we hold with state; undefined for outliers. */
  async stateAtEvent(eventId: string, which: 'before' | 'after'): Promise<NidState | undefined> {
    const stored = await this.getEvent(eventId);
    const before = stored && (await this.stateBefore(stored));
    if (!before) return undefined;
    if (which === 'before' || !isStateEvent(stored.event) || stored.rejected) return before;
    const after = new Map(before);
    after.set(stateKey(stored.event.type, stored.event.state_key!), stored.nid);
    return after;
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

  async membership(roomId: string, userId: string): Promise<string | undefined> {
    const event = await this.currentStateEvent(roomId, 'm.room.member', userId);
    return event?.event.content['membership'] as string | undefined;
  }

  /** Members of a room with a given membership in its current state. */
  async members(roomId: string, membership = 'join'): Promise<string[]> {
    const rows = await this.store.db.all<{ state_key: string }>(
      "SELECT state_key FROM current_state WHERE room_id = ? AND type = 'm.room.member' AND membership = ?", [roomId, membership],
    );
    return rows.map((r) => r.state_key);
  }

  /**
   * How many members of a room have a given membership in its current state (counted, not listed).
   * Counting a big room's 10,000 members takes milliseconds, and every /sync summary asks: the counts
   * are kept per state snapshot of the durable head (immutable, so never stale), and counted again
   * only once the room's state has changed.
   */
  async memberCount(roomId: string, membership = 'join'): Promise<number> {
    const snapshot = (await this.store.head(roomId))?.current?.nid;
    const cached = this.memberCounts.get(roomId);
    if (cached && cached.snapshot === snapshot && cached.counts.has(membership)) return cached.counts.get(membership)!;
    const n = (await this.store.db.get<{ n: number }>(
      "SELECT COUNT(*) AS n FROM current_state WHERE room_id = ? AND type = 'm.room.member' AND membership = ?", [roomId, membership],
    ))!.n;
    // Kept only if the head did not move while counting (the count could then be of the newer state).
    if (snapshot !== undefined && (await this.store.head(roomId))?.current?.nid === snapshot) {
      const entry = cached?.snapshot === snapshot ? cached : { snapshot, counts: new Map<string, number>() };
      entry.counts.set(membership, n);
      this.memberCounts.set(roomId, entry);
    }
    return n;
  }

  /** Servers with a member joined to the room now, ours included. */
  async joinedServers(roomId: string): Promise<string[]> {
    return serversOf(await this.members(roomId, 'join'));
  }

  /** Users of other servers (of `server`, if given) joined to a room a local user is joined to. */
  async remoteMembersSharingRooms(server?: string): Promise<string[]> {
    const rows = await this.store.db.all<{ state_key: string }>(
      `SELECT DISTINCT state_key FROM current_state WHERE type = 'm.room.member' AND membership = 'join'
       AND room_id IN (SELECT room_id FROM local_memberships WHERE membership = 'join')`,
    );
    const ours = ':' + this.serverName;
    return rows.map((r) => r.state_key).filter((u) => !u.endsWith(ours) && (server === undefined || serverNameOf(u) === server));
  }

  /** Whether a user is joined to a room a local user is joined to. */
  async sharesRoom(userId: string): Promise<boolean> {
    return (await this.store.db.get(SHARES_ROOM_SQL, [userId])) !== undefined;
  }

  /**
   * Rooms a local user is joined to that are open to anyone, as Synapse's user directory counts
   * them public: whoever may join (join rule `public`) or read (history `world_readable`) them.
   * A copy of a room we left is stale.
   */
  async roomsOpenToAll(): Promise<string[]> {
    const rows = await this.store.db.all<{ room_id: string; type: string; event_nid: number }>(
      `SELECT room_id, type, event_nid FROM current_state WHERE type IN ('m.room.join_rules', 'm.room.history_visibility') AND state_key = ''
       AND room_id IN (SELECT room_id FROM local_memberships WHERE membership = 'join')`,
    );
    const open = new Set<string>();
    for (const row of rows) {
      const content = (await this.getEventByNid(row.event_nid))?.event.content;
      if (row.type === 'm.room.join_rules' ? content?.['join_rule'] === 'public' : content?.['history_visibility'] === 'world_readable') open.add(row.room_id);
    }
    return [...open];
  }

  /** Rooms where a user's current membership is one of `memberships`. */
  async roomsOf(userId: string, memberships: string[] = ['join']): Promise<string[]> {
    const rows = await this.store.db.all<{ room_id: string }>(
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
    const rows = await this.store.db.all<{ room_id: string; state_key: string; json: string }>(
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
    const row = await this.store.db.get<{ txn_id: string }>(
      'SELECT txn_id FROM transaction_ids WHERE event_id = ? AND user_id = ? AND device_id = ?', [eventId, userId, deviceId],
    );
    return row?.txn_id;
  }
}
