import { canonicalJson } from '../crypto/canonical-json.ts';
import { isStateEvent, stateKey, type RoomEvent, type StateKey } from '../events/event.ts';
import { serverNameOf } from '../events/identifiers.ts';
import { referenceIds } from '../events/pdu.ts';
import { requireRoomVersion } from '../events/room-versions.ts';
import type { WriteTransaction } from '../storage/database.ts';
import { nextStreamId } from '../storage/stream.ts';
import { RoomError, roomNotFound } from './errors.ts';
import { EventBuilder } from './event-builder.ts';
import { refuseDuplicateAnnotation } from './relations.ts';
import { appliedTargets, RepeatedTransaction, replaced, serversOf, type RoomWrite, type RoomHead, type RoomStore } from './room-store.ts';
import type { NidState } from './state-store.ts';
import type { Countersign, EventTemplate, StoredEvent, TransactionKey } from './types.ts';

/**
 * The send path: local events are built against the room's newest head (durable or
 * not), signed and authorised (event-builder.ts), then written in one transaction with
 * their stream positions, state snapshots, current state, extremities, the client's
 * transaction ID and federation's outbox. The room lock covers building and running
 * the write in memory; becoming durable happens after, so writes in a room pipeline.
 */
export class LocalWrites {
  readonly builder: EventBuilder;
  /** Servers with joined members, by the state snapshot they were read from. */
  private readonly joinedServers = new WeakMap<NidState, string[]>();

  constructor(private readonly store: RoomStore) {
    this.builder = new EventBuilder(store);
  }

  /**
   * Creates a room: stores its version, then builds and stores the given events
   * (the first must be m.room.create) in one atomic transaction. Before v12 the caller
   * chooses the room ID; from v12 it is the create event's (`roomId` undefined), found in
   * the stored events' room_id.
   */
  async createRoom(roomId: string | undefined, versionId: string, templates: EventTemplate[]): Promise<StoredEvent[]> {
    const version = requireRoomVersion(versionId);
    const head: RoomHead = { version, current: undefined, extremities: [] };
    const insertRoom = (id: string) => (tx: WriteTransaction) => {
      tx.run('INSERT INTO rooms (room_id, room_version, created_ts) VALUES (?, ?, ?)', [id, version.id, this.store.options.now()]);
    };
    if (!version.roomIdFromCreateEvent) {
      if (roomId === undefined) throw new Error(`a room ${version.id} needs a room ID`);
      const write = await this.store.lock.run(roomId, async () => {
        if (await this.store.writerHead(roomId)) throw new RoomError('bad_event', `room ${roomId} already exists`);
        return this.buildAndStore(roomId, head, templates, undefined, insertRoom(roomId));
      });
      await write.durable;
      return write.stored;
    }
    if (roomId !== undefined) throw new Error(`a room ${version.id}'s ID is its create event's`);
    const [createTemplate, ...rest] = templates;
    if (!createTemplate) throw new Error('a room starts with its create event');
    // The create event's hash is the room ID: the same user creating two rooms alike in the
    // same millisecond would make one ID twice. Another try, a millisecond earlier, makes
    // another (as Synapse does).
    const now = this.store.options.now();
    for (let attempt = 0; attempt < 5; attempt++) {
      const create = await this.builder.build(undefined, version, createTemplate, [], async () => undefined, now - attempt);
      const id = create.room_id;
      const write = await this.store.lock.run(id, async () => {
        if (await this.store.writerHead(id)) return undefined;
        return this.buildAndStore(id, head, rest, undefined, insertRoom(id), undefined, [create]);
      });
      if (!write) continue;
      await write.durable;
      return write.stored;
    }
    throw new RoomError('bad_event', 'the room ID this create event gives is taken');
  }

  /**
   * Builds, signs, authorises and stores local events in order, atomically. With a
   * transaction key, a repeated request returns the event first sent.
   */
  async sendEvents(roomId: string, templates: EventTemplate[], txn?: TransactionKey, options: { countersign?: Countersign } = {}): Promise<StoredEvent[]> {
    try {
      // The room lock covers building and running the write; making it durable
      // happens outside, so the next send in the room can be built meanwhile.
      const write = await this.store.lock.run(roomId, async (): Promise<RoomWrite> => {
        const head = await this.store.writerHead(roomId);
        if (!head) throw roomNotFound(roomId);
        const same = await this.sameAsCurrentState(head, templates);
        if (same) return { stored: [same], durable: Promise.resolve() };
        return this.buildAndStore(roomId, head, templates, txn, undefined, options.countersign);
      });
      await write.durable;
      return write.stored;
    } catch (e) {
      // A retried request: answer with the event first sent (checked inside the write, so no extra read per send).
      if (e instanceof RepeatedTransaction) return [(await this.store.getEvent(e.eventId))!];
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
    const current = nid === undefined ? undefined : await this.store.getEventByNid(nid);
    if (!current || this.store.pendingEvent(current.nid) || current.redactedBy !== null || current.event.sender !== template.sender) return undefined;
    return canonicalJson(current.event.content) === canonicalJson(template.content) ? current : undefined;
  }

  private async buildAndStore(
    roomId: string,
    head: RoomHead,
    templates: EventTemplate[],
    txn: TransactionKey | undefined,
    before?: (tx: WriteTransaction) => void,
    countersign?: Countersign,
    builtAlready: RoomEvent[] = [],
  ): Promise<RoomWrite> {
    // Build every event against the state as it evolves, before touching the database
    // (after those built already: a v12 room's create event, built to learn the room's ID).
    const built: RoomEvent[] = [...builtAlready];
    const state: NidState = head.current?.state ?? new Map();
    const pendingByKey = new Map<StateKey, RoomEvent>();
    for (const event of builtAlready) if (isStateEvent(event)) pendingByKey.set(stateKey(event.type, event.state_key!), event);
    const lookup = async (key: StateKey): Promise<RoomEvent | undefined> => {
      const pending = pendingByKey.get(key);
      if (pending) return pending;
      const nid = state.get(key);
      return nid === undefined ? undefined : (await this.store.getEventByNid(nid))?.event;
    };
    let prevEvents = builtAlready.length > 0 ? builtAlready.slice(-1) : await this.builder.eventsOf(head.extremities);
    for (const template of templates) {
      const event = await this.builder.build(roomId, head.version, template, prevEvents, lookup);
      built.push(event);
      if (isStateEvent(event)) pendingByKey.set(stateKey(event.type, event.state_key!), event);
      prevEvents = [event];
    }
    if (countersign) {
      if (built.length !== 1) throw new Error('only a single event can be countersigned');
      const sent = built[0]!;
      const signed = await countersign(sent, head.version);
      // The countersigning server may add its signature and change `unsigned`, nothing else: in every
      // room version (v1 and v2 carry event_id inside the event, so no hash would tell).
      if (canonicalJson(withoutSignatures(signed)) !== canonicalJson(withoutSignatures(sent))) {
        throw new RoomError('bad_event', 'the countersigned event is not the event that was sent');
      }
      // Ours as we built it, with the other servers' signatures added (our own stays ours).
      built[0] = { ...sent, signatures: { ...signed.signatures, ...sent.signatures } };
    }
    return this.storeLocal(roomId, head, built, txn, before);
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
  ): Promise<RoomWrite> {
    const store = this.store;
    const redactionClaims = await store.redactionClaims(roomId, head, built);
    const snapshots: { nid: number; state: NidState }[] = [];
    // Only prev events not yet durable as this write is built can still roll back: those are checked in it
    // (one at a time, the previous send was answered, so durable, and this write reads nothing for it).
    const pendingPrevIds = referenceIds(built[0]!.prev_events).filter((id) => store.pendingEvent(id) !== undefined);
    const last = built.at(-1)!;
    return store.runRoomWrite(roomId, (tx) => {
      // A write this one builds on may have failed to become durable and rolled back.
      store.requirePrevEvents(tx, roomId, pendingPrevIds);
      if (txn) {
        const repeated = tx.get<{ event_id: string }>(
          'SELECT event_id FROM transaction_ids WHERE user_id = ? AND device_id = ? AND endpoint = ? AND txn_id = ?', [txn.userId, txn.deviceId, txn.endpoint, txn.txnId],
        );
        if (repeated) throw new RepeatedTransaction(repeated.event_id);
      }
      for (const event of built) refuseDuplicateAnnotation(tx, event);
      before?.(tx);
      let current = head.current;
      const stored: StoredEvent[] = [];
      for (const event of built) {
        const streamOrdering = nextStreamId(tx);
        const stateBefore = current ?? store.stateStore.create(tx, roomId, undefined, new Map());
        if (!current) snapshots.push(stateBefore);
        const row = store.insertEvent(tx, event, { streamOrdering, stateSnapshot: stateBefore.nid, replacesState: replaced(stateBefore.state, event) });
        if (isStateEvent(event)) {
          const after = store.stateStore.create(tx, roomId, stateBefore, new Map([[stateKey(event.type, event.state_key!), row.nid]]));
          snapshots.push(after);
          store.updateCurrentState(tx, roomId, current?.state ?? new Map(), after.state);
          current = after;
          tx.run('UPDATE rooms SET current_snapshot = ? WHERE room_id = ?', [after.nid, roomId]);
        }
        store.applyRedaction(tx, event, redactionClaims);
        stored.push(row);
      }
      if (head.extremities.length === 1) {
        tx.run('UPDATE forward_extremities SET event_id = ? WHERE room_id = ?', [last.event_id, roomId]);
      } else {
        tx.run('DELETE FROM forward_extremities WHERE room_id = ?', [roomId]);
        tx.run('INSERT INTO forward_extremities (room_id, event_id) VALUES (?, ?)', [roomId, last.event_id]);
      }
      if (txn) {
        tx.run('INSERT INTO transaction_ids (user_id, device_id, endpoint, txn_id, event_id) VALUES (?, ?, ?, ?, ?)', [txn.userId, txn.deviceId, txn.endpoint, txn.txnId, last.event_id]);
      }
      const sent = store.outbox?.(tx, { roomId, version: head.version, events: built, servers: this.destinationsOf(tx, roomId, built, current?.state) });
      return { stored, head: { version: head.version, current, extremities: [last.event_id] }, snapshots, redactionTargets: appliedTargets(redactionClaims), afterDurable: sent ?? undefined };
    });
  }

  /**
   * Where local events go: servers joined after the write, and those of users made to leave.
   * The joined servers are kept per state snapshot (immutable, so never stale): a message into
   * a room of 10,000 members does not read them all again.
   */
  private destinationsOf(tx: WriteTransaction, roomId: string, events: RoomEvent[], state: NidState | undefined): string[] {
    let joined = state && this.joinedServers.get(state);
    if (!joined) {
      joined = serversOf(this.store.joinedMembersIn(tx, roomId));
      if (state) this.joinedServers.set(state, joined);
    }
    const servers = new Set(joined);
    for (const event of events) {
      const membership = event.type === 'm.room.member' ? event.content['membership'] : undefined;
      if (membership === 'leave' || membership === 'ban') servers.add(serverNameOf(event.state_key!));
    }
    return [...servers].filter((server) => server !== this.store.options.serverName);
  }
}

/** An event as far as a countersigning server must leave it. */
function withoutSignatures(event: RoomEvent): Omit<RoomEvent, 'signatures' | 'unsigned'> {
  const { signatures: _signatures, unsigned: _unsigned, ...rest } = event;
  return rest;
}
