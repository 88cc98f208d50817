import type { RoomEvent } from '../events/event.ts';
import type { PDU } from '../events/pdu.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import type { WriteTransaction } from '../storage/database.ts';
import { RoomAliases } from './aliases.ts';
import { LocalWrites } from './local-writes.ts';
import { RoomRelations } from './relations.ts';
import { RemoteInput } from './remote-input.ts';
import { RemoteMemberships } from './remote-memberships.ts';
import { RoomReads } from './room-reads.ts';
import { RoomStore } from './room-store.ts';
import { RoomTimeline } from './timeline.ts';
import type { Countersign, EventIndexHook, EventTemplate, OutlierAnswer, PduSource, ReceiveOptions, RoomsOptions, StoredEvent, TransactionKey } from './types.ts';

export { MAX_EVENT_BYTES } from './event-builder.ts';
export type { Countersign, EventIndexHook, EventTemplate, OutboxHook, OutlierAnswer, PduSource, ReceiveOptions, RoomsOptions, StoredEvent, TransactionKey, UnsharedHook, VerifyKeyResolver } from './types.ts';

/**
 * The room engine: builds, authorises and stores events, one at a time per room
 * (rooms run in parallel), and keeps each room's state as snapshots.
 *
 * Its queries are {@link RoomReads}'s (room-reads.ts); the rest is composed from one
 * file per seam, which the methods below hand on to:
 * - the send path, local events: local-writes.ts (built and signed by event-builder.ts);
 * - the remote input path, events from other servers: remote-input.ts;
 * - memberships of local users in rooms we are not in: remote-memberships.ts;
 * - aliases and the directory's published flag: aliases.ts.
 * All share one internal RoomStore (room-store.ts): the events table, caches, room heads,
 * the per-room input lock and the write runner.
 */
export class Rooms extends RoomReads {
  /** Reads of rooms' timelines, by stream position and by topological order. */
  readonly timeline: RoomTimeline;
  /** Reads of the relations index (edits, reactions, threads, references) the engine keeps as events are stored. */
  readonly relations: RoomRelations;
  private readonly aliases: RoomAliases;
  private readonly writes: LocalWrites;
  private readonly input: RemoteInput;
  private readonly remoteMemberships: RemoteMemberships;

  constructor(private readonly options: RoomsOptions) {
    super(new RoomStore(options));
    this.timeline = new RoomTimeline(this.options.db, this);
    this.relations = new RoomRelations(this.options.db, (nid) => this.getEventByNid(nid));
    this.aliases = new RoomAliases(this.options.db);
    this.writes = new LocalWrites(this.store);
    this.input = new RemoteInput(this.store, this);
    this.remoteMemberships = new RemoteMemberships(this.store);
  }

  /**
   * For an index begun after events were stored (search's first index): hands the timeline events
   * after `afterNid`, up to `limit` in nid order, to `index` inside one write transaction, so what
   * it writes is atomic with what it read (a redaction or a new event comes before or after, and
   * reaches the index through the {@link EventIndexHook}). Returns how many it handed over.
   */
  async replayTimeline(afterNid: number, limit: number, index: (tx: WriteTransaction, events: StoredEvent[]) => void): Promise<number> {
    return this.options.db.transaction((tx) => {
      const events = this.store.timelineAfter(tx, afterNid, limit);
      index(tx, events);
      return events.length;
    });
  }

  // ------------------------------------------------ the send path (local-writes.ts)

  /**
   * Creates a room: its version, then the given events (m.room.create first), atomically. From
   * v12 the room ID is the create event's (`roomId` undefined; the events' room_id says it).
   */
  createRoom(roomId: string | undefined, versionId: string, templates: EventTemplate[]): Promise<StoredEvent[]> {
    return this.writes.createRoom(roomId, versionId, templates);
  }

  /** Builds, signs, authorises and stores local events, atomically; a repeated transaction key answers with the first events. */
  sendEvents(roomId: string, templates: EventTemplate[], txn?: TransactionKey, options: { countersign?: Countersign } = {}): Promise<StoredEvent[]> {
    return this.writes.sendEvents(roomId, templates, txn, options);
  }

  /** An unsigned, authorised event for a remote server to sign (make_join, make_leave, make_knock). */
  prepareEvent(roomId: string, template: EventTemplate): Promise<{ version: RoomVersion; event: Record<string, unknown> }> {
    return this.writes.builder.prepare(roomId, template);
  }

  // ------------------------------------------ the remote input path (remote-input.ts)

  /** Checks and stores an event from another server: refused, rejected, soft-failed or accepted. */
  receiveEvent(pdu: PDU, options: ReceiveOptions = {}): Promise<StoredEvent> {
    return this.input.receiveEvent(pdu, options);
  }

  /**
   * Checks and stores many outliers (a join's state and auth chain), read from the source a window
   * at a time and stored a write per 2,000; each answer, in the source's order, gives the event's ID
   * and why it was refused, if it was (undefined where the source gave no PDU).
   */
  receiveOutliers(roomId: string, source: PduSource | readonly PDU[]): Promise<(OutlierAnswer | undefined)[]> {
    return this.input.receiveOutliers(roomId, source);
  }

  /** Those of the given event IDs that are not stored (as anything, outliers included). */
  async unknownEvents(eventIds: readonly string[]): Promise<string[]> {
    const held = await this.input.heldIds(eventIds);
    return eventIds.filter((id) => !held.has(id));
  }

  /** Starts tracking a room that lives on other servers, before its events arrive. */
  trackRemoteRoom(roomId: string, versionId: string): Promise<void> {
    return this.input.trackRemoteRoom(roomId, versionId);
  }

  // ----------------------------- rooms we are not in (yet) (remote-memberships.ts)

  /** An invite (knock, leave) of a local user from another server, kept as an outlier for /sync. */
  recordRemoteMembership(event: RoomEvent): Promise<StoredEvent> {
    return this.remoteMemberships.record(event);
  }

  /** A local user's membership as we last heard of it, in rooms we hold and rooms we don't. */
  localMembership(userId: string, roomId: string): Promise<{ membership: string; eventId: string } | undefined> {
    return this.remoteMemberships.localMembership(userId, roomId);
  }

  /** Hides a room the user has left from their /sync (client-server POST /forget). */
  forget(userId: string, roomId: string): Promise<boolean> {
    return this.remoteMemberships.forget(userId, roomId);
  }

  // --------------------------------------------- aliases, directory (aliases.ts)

  resolveAlias(alias: string): Promise<string | undefined> {
    return this.aliases.resolveAlias(alias);
  }

  /**
   * The room an alias of ours names, with the servers to join it through: this server first (it
   * holds the alias), then every other server in the room. What a client of ours and another
   * server asking `/query/directory` are both told.
   */
  async resolveAliasWithServers(alias: string): Promise<{ roomId: string; servers: string[] } | undefined> {
    const roomId = await this.aliases.resolveAlias(alias);
    if (!roomId) return undefined;
    const { serverName } = this.options;
    return { roomId, servers: [serverName, ...(await this.joinedServers(roomId)).filter((s) => s !== serverName)] };
  }

  /** Creates an alias; false when it is taken. */
  createAlias(alias: string, roomId: string, creator: string): Promise<boolean> {
    return this.aliases.createAlias(alias, roomId, creator);
  }

  aliasCreator(alias: string): Promise<string | undefined> {
    return this.aliases.aliasCreator(alias);
  }

  deleteAlias(alias: string): Promise<void> {
    return this.aliases.deleteAlias(alias);
  }

  /** Points every alias of one room at another, at once (a room upgrade). */
  moveAliases(fromRoomId: string, toRoomId: string): Promise<void> {
    return this.aliases.moveAliases(fromRoomId, toRoomId);
  }

  aliasesOf(roomId: string): Promise<string[]> {
    return this.aliases.aliasesOf(roomId);
  }

  setPublished(roomId: string, published: boolean): Promise<void> {
    return this.aliases.setPublished(roomId, published);
  }

  isPublished(roomId: string): Promise<boolean> {
    return this.aliases.isPublished(roomId);
  }

  publishedRooms(): Promise<string[]> {
    return this.aliases.publishedRooms();
  }
}
