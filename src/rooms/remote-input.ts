import { checkEventAgainstAuthEvents, checkEventAuth, authEventSelection, requiredSignatureServers } from '../events/auth.ts';
import { isStateEvent, stateKey, type RoomEvent, type StateKey } from '../events/event.ts';
import { CanonicalJsonError } from '../crypto/canonical-json.ts';
import {
  asRoomEvent,
  authEventIds,
  computeEventId,
  eventIdFromSigningBytes,
  eventIdOf,
  receivedEventForms,
  referenceIds,
  roomIdOfPdu,
  verifyEventSignatureOver,
  type PDU,
  type ReceivedEventForms,
} from '../events/pdu.ts';
import { AuthError } from '../events/power-levels.ts';
import { redactEvent } from '../events/redaction.ts';
import { requireRoomVersion, type RoomVersion } from '../events/room-versions.ts';
import type { WriteTransaction } from '../storage/database.ts';
import { nextStreamId } from '../storage/stream.ts';
import { RoomError, roomNotFound } from './errors.ts';
import { checkEventSize } from './event-builder.ts';
import type { RoomReads } from './room-reads.ts';
import { appliedTargets, RepeatedTransaction, replaced, type EventRowFields, type RedactionClaim, type RoomWrite, type RoomHead, type RoomStore } from './room-store.ts';
import type { NidState } from './state-store.ts';
import { diffState, PENDING_NID, RemoteEventState, sameState } from './remote-state.ts';
import type { OutlierAnswer, PduSource, ReceiveOptions, StoredEvent } from './types.ts';


/** Events whose signatures are checked at once (bounds what a big batch holds in flight). */
const CHECKS_IN_FLIGHT = 256;

/** Outliers stored per write: a big batch is held a window at a time, at a commit per window. */
const OUTLIERS_PER_WRITE = 2_000;

/** How many events an event's arrival may walk back through soft-failed ones to find the extremities it replaces. */
const MAX_SUPERSEDED_WALK = 1_000;

/**
 * The remote input path (server-server §Checks performed on receipt of a PDU):
 * signatures and the content hash first, outside the room lock; then, in arrival
 * order per room, auth against the event's own auth events, against the state before
 * it (resolved from its prev events) and against the current state (soft failure).
 */
export class RemoteInput {
  private readonly state: RemoteEventState;

  constructor(
    private readonly store: RoomStore,
    private readonly reads: Pick<RoomReads, 'roomVersion' | 'stateAtEvent'>,
  ) {
    this.state = new RemoteEventState(store, reads);
  }

  /**
   * Starts tracking a room that lives on other servers (before its events arrive,
   * for instance while joining it over federation).
   */
  async trackRemoteRoom(roomId: string, versionId: string): Promise<void> {
    const version = requireRoomVersion(versionId);
    await this.store.db.transaction((tx) => {
      tx.run('INSERT OR IGNORE INTO rooms (room_id, room_version, created_ts) VALUES (?, ?, ?)', [roomId, version.id, this.store.options.now()]);
    });
  }

  /**
   * Checks and stores an event from another server. Events failing signature or hash
   * checks are refused and not stored; events failing auth are stored as rejected;
   * events that pass against their own state but not the room's current state are soft-failed.
   */
  async receiveEvent(pdu: PDU, options: ReceiveOptions = {}): Promise<StoredEvent> {
    const roomId = roomIdOfPdu(pdu);
    if (roomId === undefined) throw new RoomError('bad_event', 'the event names no room');
    if (options.outlier) {
      // One outlier is a batch of one: a single path checks and stores outliers.
      const [answer] = await this.receiveOutliers(roomId, [pdu]);
      if (!answer) throw new RoomError('bad_event', 'the event is too malformed to have an ID');
      if (answer.refused) throw answer.refused;
      return (await this.store.getEvent(answer.eventId))!;
    }
    try {
      return await this.receive(roomId, pdu, options);
    } catch (e) {
      // The same event arrived twice at once: the first one stored it.
      if (e instanceof RepeatedTransaction) return (await this.store.getEvent(e.eventId))!;
      throw e;
    }
  }

  /**
   * Checks and stores many events without state at once (a join's state and auth chain, a
   * gap's /state), each after its auth events, which may come in the same batch. In two
   * passes over the source, which parses each event when it is read, so that a big batch is
   * never held as objects (20,000 for a room of 10,000 members):
   * 1. outside the room lock, a window at a time, in parallel: each event's ID, size,
   *    content hash and signatures checked; kept of it is what ordering it needs;
   * 2. with the lock, each after its auth events: read again, auth against its auth events,
   *    and stored, a write (one commit) per window of events.
   * Events held already are not checked again (an auth chain is mostly known). The answers
   * follow the source's order: undefined where it gave no PDU, or none with an ID.
   */
  async receiveOutliers(roomId: string, source: PduSource | readonly PDU[]): Promise<(OutlierAnswer | undefined)[]> {
    const version = await this.reads.roomVersion(roomId);
    if (!version) throw roomNotFound(roomId);
    const events: PduSource = isPduArray(source) ? { length: source.length, read: (i) => source[i] } : source;
    const answers: (OutlierAnswer | undefined)[] = new Array(events.length).fill(undefined);
    const checked = new Map<string, CheckedOutlier>();
    const firstIndex = new Map<string, number>();
    const repeats: [index: number, first: number][] = [];
    // Auth event IDs repeat across a batch (every join names the same create, power levels and join
    // rules events): one string each, not one per mention (~5 MiB for a state of 20,000).
    const authIdStrings = new Map<string, string>();
    const sharedAuthIds = (ids: string[]) => ids.map((id) => authIdStrings.get(id) ?? (authIdStrings.set(id, id), id));
    for (let from = 0; from < events.length; from += CHECKS_IN_FLIGHT) {
      const window: { index: number; pdu: PDU; eventId: string }[] = [];
      for (let index = from; index < Math.min(from + CHECKS_IN_FLIGHT, events.length); index++) {
        const pdu = events.read(index);
        const eventId = pdu && eventIdOf(pdu, version); // none: too malformed, left out as no PDU
        if (!pdu || !eventId) continue;
        const first = firstIndex.get(eventId);
        if (first !== undefined) {
          repeats.push([index, first]);
          continue;
        }
        firstIndex.set(eventId, index);
        const ofRoom = (pdu.room_id ?? asRoomEvent(pdu, eventId, version).room_id) === roomId;
        answers[index] = ofRoom ? { eventId } : { eventId, refused: new RoomError('bad_event', `event ${eventId} is of another room`) };
        if (ofRoom) window.push({ index, pdu, eventId });
      }
      const held = await this.heldIds(window.map((w) => w.eventId));
      await Promise.all(window.filter((w) => !held.has(w.eventId)).map(async ({ index, pdu, eventId }) => {
        try {
          const { event, tampered } = await this.checkRemoteEventForms(pdu, version, eventId);
          // A tampered event is kept as its redacted form, which a second read would not give.
          checked.set(eventId, { index, authIds: sharedAuthIds(authEventIds(event, version)), depth: event.depth, ...(tampered ? { redacted: event } : {}) });
        } catch (e) {
          if (!(e instanceof RoomError)) throw e;
          answers[index] = { eventId, refused: e };
        }
      }));
    }
    const usedAsAuth = new Set<string>();
    for (const entry of checked.values()) for (const id of entry.authIds) if (checked.has(id)) usedAsAuth.add(id);

    await this.store.lock.run(roomId, async () => {
      const head = await this.store.writerHead(roomId);
      if (!head) throw roomNotFound(roomId);
      // Stored meanwhile (the lock was not held while checking): not stored again.
      const heldNow = await this.heldIds([...checked.keys()]);
      // Of the batch, only the events others name as auth events stay parsed.
      const authEvents = new Map<string, { event: RoomEvent; rejected: string | null }>();
      const ordered = inAuthOrder(checked).filter(([eventId]) => !heldNow.has(eventId));
      for (let from = 0; from < ordered.length; from += OUTLIERS_PER_WRITE) {
        const rows: { fields: EventRowFields; json: string; rejected: string | null }[] = [];
        for (const [eventId, entry] of ordered.slice(from, from + OUTLIERS_PER_WRITE)) {
          const event = entry.redacted ?? asRoomEvent(events.read(entry.index)!, eventId, version);
          const auth = await Promise.all(entry.authIds.map(async (id) => authEvents.get(id) ?? (await this.store.getEvent(id))));
          if (auth.some((e) => !e)) {
            answers[entry.index] = { eventId, refused: new RoomError('missing_events', `auth events of ${eventId} are unknown`) };
            continue;
          }
          const rejected = (await this.ownAuthReason(event, auth as { event: RoomEvent; rejected: string | null }[], version)) ?? null;
          if (usedAsAuth.has(eventId)) authEvents.set(eventId, { event, rejected });
          const { room_id, type, state_key, sender, depth, origin_server_ts } = event;
          rows.push({ fields: { event_id: eventId, room_id, type, state_key, sender, depth, origin_server_ts }, json: JSON.stringify(event), rejected });
        }
        if (rows.length === 0) continue;
        const written = await this.store.runRoomWrite(roomId, (tx) => {
          for (const row of rows) this.store.insertOutlier(tx, row.fields, row.json, row.rejected);
          this.store.applyWaitingRedactions(tx, roomId, rows.map((row) => row.fields));
          // Outliers are neither cached nor indexed as they are stored (RoomStore.afterCommit): none to hand on.
          return { stored: [], head, snapshots: [], redactionTargets: new Map() };
        });
        await written.durable;
      }
    });
    for (const [index, first] of repeats) answers[index] = answers[first];
    return answers;
  }

  /** Which of these events are stored already: one query per chunk, not one read each. */
  async heldIds(ids: readonly string[]): Promise<Set<string>> {
    const held = new Set<string>();
    for (let from = 0; from < ids.length; from += 500) {
      const chunk = ids.slice(from, from + 500);
      const rows = await this.store.db.all<{ event_id: string }>(`SELECT event_id FROM events WHERE event_id IN (${chunk.map(() => '?').join(',')})`, chunk);
      for (const row of rows) held.add(row.event_id);
    }
    for (const id of ids) if (this.store.pendingEvent(id)) held.add(id);
    return held;
  }

  private async receive(roomId: string, pdu: PDU, options: ReceiveOptions): Promise<StoredEvent> {
    // Signatures and hashes need no room state: they are checked while earlier
    // events wait for or hold the room lock, so several events are verified at
    // once. The lock is queued for at once, so events keep the order they came in.
    const checked = this.reads.roomVersion(roomId).then((version) => {
      if (!version) throw roomNotFound(roomId);
      return this.checkRemoteEvent(pdu, version);
    });
    // Whether we hold it already is read outside the lock too: a read waits for the
    // write in flight, and inside the lock that would serialise on every fsync.
    const known = checked.then((event) => this.store.getEvent(event.event_id));
    checked.catch(() => undefined); // reported inside the lock
    known.catch(() => undefined);
    const write = await this.store.lock.run(roomId, async (): Promise<RoomWrite> => {
      const event = await checked;
      const done = (stored: StoredEvent) => ({ stored: [stored], durable: Promise.resolve() });
      const head = await this.store.writerHead(roomId);
      if (!head) throw roomNotFound(roomId);
      const existing = this.store.pendingEvent(event.event_id) ?? (await known);
      // An outlier we hold (from a join's state or an auth chain) takes its place in the timeline when it comes with history.
      const promote = existing !== undefined && existing.outlier && !existing.rejected;
      if (existing && !promote) return done(existing);

      // Auth against the event's own auth events (which must all be known), from v12 the implied create event too.
      const authIds = authEventIds(event, head.version);
      const authEvents = await Promise.all(authIds.map((id) => this.store.getEvent(id)));
      if (authEvents.some((e) => !e)) throw new RoomError('missing_events', `auth events of ${event.event_id} are unknown`);
      const ownRejection = await this.ownAuthReason(event, authEvents as StoredEvent[], head.version);
      // Auth against the state before the event: given (a join's state, the state at a
      // backfilled event whose prev events we lack), or resolved from its prev events.
      const prevIds = referenceIds(event.prev_events);
      const findStateBefore = () => options.stateBefore ? this.state.ofEvents(options.stateBefore, event) : this.state.afterPrevEvents(head.version, event, prevIds, options.prevStates);
      if (ownRejection) {
        // Kept with the state before it where that is known: an event built on it then finds the
        // state as it was before it (server-server §Rejection), not a hole.
        const known = await findStateBefore().catch((e: unknown) => {
          if (e instanceof RoomError && e.code === 'missing_events') return undefined;
          throw e;
        });
        return this.storeRejected(head, event, ownRejection, known);
      }
      const stateBefore = await findStateBefore();
      const beforeEvents = await this.authStateFor(event, head.version, stateBefore);
      const beforeRejection = await this.authReason(event, head.version, (k) => beforeEvents.get(k));
      if (beforeRejection) return this.storeRejected(head, event, beforeRejection, stateBefore, existing);

      // Soft failure: allowed by its own history but not by the room as it is now. History that
      // arrives by backfill is older than the current state, and a join to a room we had no
      // state for (its state came with it) has no current state: nothing to soft-fail against.
      let softFailed = false;
      if (!options.backfilled && !options.ownJoin && head.current) {
        const currentEvents = await this.authStateFor(event, head.version, head.current?.state ?? new Map());
        softFailed = (await this.authReason(event, head.version, (k) => currentEvents.get(k))) !== undefined;
      }
      // Prev events another server gave the state after may be held nowhere (it would not serve them).
      const placedOn = options.stateBefore ? [] : options.prevStates ? [...(await this.heldIds(prevIds))] : prevIds;
      return this.storeAccepted(head, event, stateBefore, placedOn, {
        softFailed, backfilled: options.backfilled ?? false, promoting: promote ? existing : undefined, replacesExtremities: options.ownJoin ?? false,
      });
    });
    await write.durable;
    return write.stored[0]!;
  }

  /**
   * The state before an event: the resolution of the states after its prev events, each held with
   * its state here, or given (`given`: the state after a prev event we hold no state for, as another
   * server said it was). With `given`, a prev event in neither is left out: one of another room is
   * no part of this one's history, and one of ours never lends it its state.
   */
  /**
   * Format, size, content hash and signature checks. Returns the event with its ID.
   * The event is encoded once for all of them (receivedEventForms), its ID too when not given.
   */
  private async checkRemoteEvent(pdu: PDU, version: RoomVersion, givenId?: string): Promise<RoomEvent> {
    return (await this.checkRemoteEventForms(pdu, version, givenId)).event;
  }

  /** The same, saying whether the content hash failed (the event is then its redacted form). */
  private async checkRemoteEventForms(pdu: PDU, version: RoomVersion, givenId?: string): Promise<{ event: RoomEvent; tampered: boolean }> {
    let forms: ReceivedEventForms;
    try {
      forms = receivedEventForms(pdu, version);
    } catch (e) {
      if (e instanceof CanonicalJsonError) throw new RoomError('bad_event', e.message);
      throw e;
    }
    const eventId = givenId ?? (version.eventIdFormat === 'local' ? computeEventId(pdu, version) : eventIdFromSigningBytes(forms.signingBytes, version.eventIdFormat));
    let event = asRoomEvent(pdu, eventId, version);
    checkEventSize(event, version, forms.byteLength);
    for (const origin of requiredSignatureServers(version, event)) {
      const keys = Object.keys(pdu.signatures?.[origin] ?? {}).filter((k) => k.startsWith('ed25519:'));
      let verified = false;
      for (const keyId of keys) {
        const key = await this.store.options.resolveVerifyKey(origin, keyId, pdu.origin_server_ts);
        if (key && (await verifyEventSignatureOver(forms.signingBytes, pdu, origin, keyId, key, this.store.options.ed25519))) {
          verified = true;
          break;
        }
      }
      if (!verified) throw new RoomError('bad_event', `event ${event.event_id} has no valid signature from ${origin}`);
    }
    // A failed content hash means the event was tampered with: keep only its redacted form.
    if (!forms.contentHashMatches) event = { ...(redactEvent(event, version) as unknown as RoomEvent), event_id: event.event_id };
    return { event, tampered: !forms.contentHashMatches };
  }

  /**
   * The part of a state the auth rules read for an event: its auth event
   * selection, not the whole state (a room's state can hold thousands of members).
   */
  private async authStateFor(event: RoomEvent, version: RoomVersion, state: NidState): Promise<Map<StateKey, RoomEvent>> {
    const out = new Map<StateKey, RoomEvent>();
    for (const [type, key] of authEventSelection(version, event)) {
      const nid = state.get(stateKey(type, key));
      const stored = nid === undefined ? undefined : await this.store.getEventByNid(nid);
      if (stored) out.set(stateKey(type, key), stored.event);
    }
    return out;
  }

  /** Why an event fails auth against its own auth events (given, all held: stored, or earlier in a batch), or undefined. */
  private async ownAuthReason(event: RoomEvent, authEvents: { event: RoomEvent; rejected: string | null }[], version: RoomVersion): Promise<string | undefined> {
    const rejectedIds = new Set(authEvents.filter((e) => e.rejected).map((e) => e.event.event_id));
    try {
      await checkEventAgainstAuthEvents(event, authEvents.map((e) => e.event), version, this.store.options.ed25519, { isRejected: (id) => rejectedIds.has(id) });
      return undefined;
    } catch (e) {
      if (e instanceof AuthError) return e.message;
      throw e;
    }
  }

  private async authReason(event: RoomEvent, version: RoomVersion, lookup: (key: StateKey) => RoomEvent | undefined): Promise<string | undefined> {
    try {
      await checkEventAuth(event, (type, key) => lookup(stateKey(type, key)), version, this.store.options.ed25519);
      return undefined;
    } catch (e) {
      if (e instanceof AuthError) return e.message;
      throw e;
    }
  }

  /**
   * Stores a rejected event (or marks an outlier we held rejected after all), with the snapshot of
   * the state before it when that is known: the state after it is that same state. It moves
   * neither the current state nor the extremities.
   */
  private async storeRejected(head: RoomHead, event: RoomEvent, reason: string, stateBefore: NidState | undefined, existing?: StoredEvent): Promise<RoomWrite> {
    const store = this.store;
    return store.runRoomWrite(event.room_id, (tx) => {
      const before = stateBefore === undefined ? undefined : this.snapshotFor(tx, event.room_id, head, stateBefore);
      const snapshots = before ? [before] : [];
      if (!existing) {
        const stored = store.insertEvent(tx, event, { streamOrdering: null, stateSnapshot: before?.nid ?? null, replacesState: null, outlier: false, rejected: reason });
        return { stored: [stored], head, snapshots, redactionTargets: new Map() };
      }
      tx.run('UPDATE events SET rejected = ?, state_snapshot = ?, outlier = 0 WHERE event_nid = ?', [reason, before?.nid ?? null, existing.nid]);
      store.unindex(tx, existing.event.event_id);
      return { stored: [{ ...existing, rejected: reason, stateSnapshot: before?.nid ?? null, outlier: false }], head, snapshots, redactionTargets: new Map() };
    });
  }

  /** The snapshot of a state: the current one or a committed one when it is that very state, else a new one. */
  private snapshotFor(tx: WriteTransaction, roomId: string, head: RoomHead, state: NidState): { nid: number; state: NidState } {
    if (head.current && sameState(head.current.state, state)) return head.current;
    return this.store.stateStore.snapshotOf(state) ?? this.store.stateStore.create(tx, roomId, head.current, diffState(head.current?.state, state));
  }

  /** Stores an accepted (or soft-failed) event and moves the room's current state, in one transaction. */
  private async storeAccepted(
    head: RoomHead,
    event: RoomEvent,
    stateBefore: NidState,
    prevIds: string[],
    how: { softFailed: boolean; backfilled: boolean; promoting: StoredEvent | undefined; replacesExtremities?: boolean },
  ): Promise<RoomWrite> {
    const { softFailed, backfilled, promoting } = how;
    const store = this.store;
    const roomId = event.room_id;
    // Soft-failed and backfilled events stay out of the extremities and the current state.
    const movesCurrent = !softFailed && !backfilled;
    const superseded = how.replacesExtremities ? head.extremities : await this.supersededBy(prevIds);
    const extremities = movesCurrent ? [...head.extremities.filter((id) => !superseded.includes(id)), event.event_id] : head.extremities;
    const from = head.current?.state ?? new Map<StateKey, number>();
    const afterState = () => {
      if (!isStateEvent(event)) return stateBefore;
      const after = new Map(stateBefore);
      after.set(stateKey(event.type, event.state_key!), PENDING_NID);
      return after;
    };
    // When the event descends from every extremity its state is the room's; otherwise resolve the two.
    const newCurrent = !movesCurrent ? undefined : extremities.length === 1 ? afterState() : await this.state.resolve(head.version, [from, afterState()], event);
    const claims = softFailed ? new Map<string, RedactionClaim>() : await store.redactionClaims(roomId, head, [event]);
    const snapshots: { nid: number; state: NidState }[] = [];
    return store.runRoomWrite(roomId, (tx) => {
      store.requirePrevEvents(tx, roomId, prevIds);
      if (!promoting) {
        const already = tx.get<{ event_id: string }>('SELECT event_id FROM events WHERE event_id = ?', [event.event_id]);
        if (already) throw new RepeatedTransaction(already.event_id);
      }
      const before = this.snapshotFor(tx, roomId, head, stateBefore);
      snapshots.push(before);
      // Backfilled history sorts before everything live: negative stream positions, never reported by /sync.
      const streamOrdering = softFailed ? null : backfilled ? nextBackfillOrdering(tx) : nextStreamId(tx);
      const meta = { streamOrdering, stateSnapshot: before.nid, replacesState: replaced(stateBefore, event), softFailed };
      const stored = promoting ? this.promoteOutlier(tx, promoting, meta) : store.insertEvent(tx, event, meta);
      // Backfilled and live redactions alike; a soft-failed one claims nothing.
      store.applyRedaction(tx, event, claims);
      const waited = store.applyWaitingRedactions(tx, roomId, [event]);
      const [redactedBy] = waited.keys();
      if (redactedBy !== undefined) stored.redactedBy = redactedBy;
      const redactionTargets = new Map([...appliedTargets(claims), ...waited]);
      if (!newCurrent) return { stored: [stored], head, snapshots, redactionTargets };
      const resolvedCurrent = new Map([...newCurrent].map(([k, nid]) => [k, nid === PENDING_NID ? stored.nid : nid]));
      const current = store.stateStore.create(tx, roomId, head.current, diffState(from, resolvedCurrent));
      snapshots.push(current);
      store.updateCurrentState(tx, roomId, from, current.state);
      tx.run('UPDATE rooms SET current_snapshot = ? WHERE room_id = ?', [current.nid, roomId]);
      for (const id of superseded) tx.run('DELETE FROM forward_extremities WHERE room_id = ? AND event_id = ?', [roomId, id]);
      tx.run('INSERT OR IGNORE INTO forward_extremities (room_id, event_id) VALUES (?, ?)', [roomId, event.event_id]);
      return { stored: [stored], head: { version: head.version, current, extremities }, snapshots, redactionTargets };
    });
  }

  /**
   * The extremities an event takes the place of: its prev events and, through those that were
   * soft-failed or rejected (never extremities themselves), the events they were built on, which
   * would otherwise stay extremities that nothing builds on.
   */
  private async supersededBy(prevIds: string[]): Promise<string[]> {
    const out = new Set<string>();
    const queue = [...prevIds];
    // Soft-failed runs are short; the bound only keeps a hostile chain from being walked whole.
    while (queue.length > 0 && out.size < MAX_SUPERSEDED_WALK) {
      const id = queue.shift()!;
      if (out.has(id)) continue;
      out.add(id);
      const stored = this.store.pendingEvent(id) ?? (await this.store.getEvent(id));
      if (stored && (stored.softFailed || (stored.rejected && !stored.outlier))) queue.push(...referenceIds(stored.event.prev_events));
    }
    return [...out];
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
    this.store.indexStored(tx, promoted);
    return promoted;
  }
}

/** Backfilled events count down from -1, below every live stream position. */
function nextBackfillOrdering(tx: WriteTransaction): number {
  const lowest = tx.get<{ low: number | null }>('SELECT MIN(stream_ordering) AS low FROM events')!.low ?? 0;
  return Math.min(lowest, 0) - 1;
}

/** Changes that turn `from` into `to` (0 marks a removal). */
/** An event of a batch of outliers once its signatures are checked: what storing it in auth order needs. */
interface CheckedOutlier {
  /** Its first place in the batch: where it is read again, and its answer. */
  index: number;
  authIds: string[];
  depth: number;
  /** Its redacted form, for an event whose content hash failed. */
  redacted?: RoomEvent;
}

const isPduArray = (source: PduSource | readonly PDU[]): source is readonly PDU[] => Array.isArray(source);

/**
 * The batch ordered so that each event comes after those of its auth events in the batch,
 * shallowest first otherwise. A cycle is broken anywhere; auth then refuses what it reaches.
 */
function inAuthOrder(batch: Map<string, CheckedOutlier>): [string, CheckedOutlier][] {
  const out: [string, CheckedOutlier][] = [];
  const visited = new Set<string>();
  const byDepth = [...batch].sort(([, a], [, b]) => a.depth - b.depth);
  for (const [rootId, root] of byDepth) {
    if (visited.has(rootId)) continue;
    visited.add(rootId);
    const stack = [{ id: rootId, entry: root, deps: [...root.authIds] }];
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const next = top.deps.pop();
      if (next === undefined) {
        stack.pop();
        out.push([top.id, top.entry]);
        continue;
      }
      const dep = batch.get(next);
      if (!dep || visited.has(next)) continue;
      visited.add(next);
      stack.push({ id: next, entry: dep, deps: [...dep.authIds] });
    }
  }
  return out;
}
