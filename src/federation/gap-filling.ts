import { asRoomEvent, authEventIds, eventIdOf, referenceIds, roomIdOfPdu, type PDU } from '../events/pdu.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import { isRefusal as isRefusalStatus } from '../util/backoff.ts';
import { CodedError } from '../util/coded-error.ts';
import type { JsonElements } from '../util/json-elements.ts';
import { FederationRequestError, type FederationClient } from './client.ts';
import { isPduShaped, roomOf } from './pdus.ts';
import { GapNotFilled, unfilled } from './transaction-gaps.ts';

// What an event from another server lacks, fetched from that server (server-server §Retrieving
// events): its auth events by /event_auth; for an event pushed to us (/send), its missing prev
// events by /get_missing_events; for an event pulled that way or by /backfill, the state after each
// prev event still missing, by /state_ids at it (the events we lack by /state), resolved with the
// states of its other prev events. A pushed event whose prev events the sender will not give is
// refused, as Synapse refuses it: pushed with a hole under it, it would become an extremity whose
// state no one vouched for.

/** Whether a request failed because the server refused it (4xx but 429), not because it could not be had now. */
const isRefusal = (error: unknown): boolean => error instanceof FederationRequestError && isRefusalStatus(error.status);

/** How far /get_missing_events looks back; beyond it, the oldest event fetched gets its state from /state_ids. */
const MISSING_EVENTS_LIMIT = 20;

/** Events read by index, parsed when read: a JsonElements from a big answer, or an array in hand. */
export type Elements = Pick<JsonElements, 'length' | 'parse'>;
const inHand = (values: readonly unknown[]): Elements => ({ length: values.length, parse: (i) => values[i] });

/**
 * A pushed event whose prev events its sender did not give when asked (/get_missing_events): a
 * verdict, not a failure to fetch, so its transaction is not sent again for it.
 */
export class PrevEventsWithheld extends CodedError {
  override name = 'PrevEventsWithheld';
  constructor(eventId: string, missing: readonly string[]) {
    super(403, 'M_FORBIDDEN', `the prev events ${missing.join(', ')} of ${eventId} could not be had from its sender`);
  }
}

export interface GapFillerOptions {
  rooms: Rooms;
  client: FederationClient;
  log: (message: string, error?: unknown) => void;
  /** Checks and stores events without state, each after its auth events; answers their IDs. */
  storeOutliers(roomId: string, events: Elements): Promise<(string | undefined)[]>;
  /** Stores a state and its auth chain as outliers; answers the state's event IDs. */
  storeStateAndAuthChain(roomId: string, state: Elements, authChain: Elements): Promise<string[]>;
}

export class GapFiller {
  constructor(private readonly options: GapFillerOptions) {}

  /**
   * An event pushed to us by `origin` (a transaction's PDU) whose auth or prev events we may lack:
   * its auth events are fetched, its missing prev events by /get_missing_events (each placed as a
   * pulled event); if some are still missing, it is refused ({@link PrevEventsWithheld}).
   */
  async receivePushed(origin: string, pdu: PDU, version: RoomVersion, eventId: string): Promise<StoredEvent> {
    const { rooms, client } = this.options;
    const roomId = roomOf(pdu);
    await this.fetchMissingAuth(origin, pdu, eventId, version);
    if ((await this.missingPrevEvents(pdu)).length > 0) {
      const answer = await client.getMissingEvents(origin, roomId, {
        earliest_events: await rooms.forwardExtremities(roomId),
        latest_events: [eventId],
        limit: MISSING_EVENTS_LIMIT,
        min_depth: 0,
      }).catch((error: unknown) => {
        // A refusal is the sender's answer: it gives nothing. Anything else leaves the gap for later.
        if (isRefusal(error)) return { events: [] };
        return unfilled(`/get_missing_events from ${origin}`)(error);
      });
      const events = Array.isArray(answer.events) ? answer.events : [];
      for (const missing of events.filter(isPduShaped).filter((e) => roomIdOfPdu(e) === roomId).sort((a, b) => a.depth - b.depth)) {
        const id = eventIdOf(missing, version);
        if (!id || id === eventId || (await rooms.getEvent(id))?.outlier === false) continue;
        try {
          await this.receivePulled(origin, missing, id, version, false);
        } catch (error) {
          if (error instanceof GapNotFilled) throw error;
          // One bad event of the answer does not stop the others; what needed it is refused in turn.
          this.options.log(`federation: missing event ${id} from ${origin} refused: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
      const stillMissing = await this.missingPrevEvents(pdu);
      if (stillMissing.length > 0) throw new PrevEventsWithheld(eventId, stillMissing);
    }
    return rooms.receiveEvent(pdu);
  }

  /**
   * An event we asked `origin` for (/get_missing_events, /backfill): its auth events are fetched,
   * and for each of its prev events we hold no state for, the state after it (/state_ids at it, and
   * the event itself). A prev event of another room takes no part; with none of its prev events
   * usable, the state before the event itself is asked for.
   */
  async receivePulled(origin: string, pdu: PDU, eventId: string, version: RoomVersion, backfilled: boolean): Promise<StoredEvent> {
    const { rooms } = this.options;
    const roomId = roomOf(pdu);
    await this.fetchMissingAuth(origin, pdu, eventId, version);
    if (pdu.type === 'm.room.create') return rooms.receiveEvent(pdu, { backfilled, stateBefore: [] });
    const missing = await this.missingPrevEvents(pdu);
    if (missing.length === 0) return rooms.receiveEvent(pdu, { backfilled });
    const prevStates = new Map<string, string[]>();
    for (const prevId of missing) {
      const held = await rooms.getEvent(prevId);
      if (held && held.event.room_id !== roomId) continue;
      prevStates.set(prevId, await this.stateAfter(origin, roomId, prevId, version));
    }
    const usable = prevStates.size + (referenceIds(pdu.prev_events).length - missing.length);
    if (usable === 0) return rooms.receiveEvent(pdu, { backfilled, stateBefore: await this.stateAt(origin, roomId, eventId) });
    return rooms.receiveEvent(pdu, { backfilled, prevStates });
  }

  /** Prev events we hold no state for: unknown, held only as outliers, or of another room. */
  async missingPrevEvents(pdu: PDU): Promise<string[]> {
    const missing: string[] = [];
    for (const id of referenceIds(pdu.prev_events)) {
      const stored = await this.options.rooms.getEvent(id);
      if (!stored || stored.outlier || stored.event.room_id !== roomIdOfPdu(pdu)) missing.push(id);
    }
    return missing;
  }

  /** Fetches the auth chain of an event whose auth events (the create event a v12+ event implies too) we lack (/event_auth), as outliers. */
  async fetchMissingAuth(origin: string, pdu: PDU, eventId: string, version: RoomVersion): Promise<void> {
    const unknown = await this.options.rooms.unknownEvents(authEventIds(asRoomEvent(pdu, eventId, version), version));
    if (unknown.length === 0) return;
    const roomId = roomOf(pdu);
    const { auth_chain } = await this.options.client.eventAuth(origin, roomId, eventId).catch(unfilled(`/event_auth from ${origin}`));
    await this.options.storeOutliers(roomId, inHand(Array.isArray(auth_chain) ? auth_chain : []));
  }

  /**
   * The state after a prev event we hold no state for, as `origin` gives it: the state before it
   * (/state_ids at it), and the event itself unless it is rejected or no state event. The event
   * is fetched (/event) and kept as an outlier.
   */
  private async stateAfter(origin: string, roomId: string, prevId: string, version: RoomVersion): Promise<string[]> {
    const { rooms, client } = this.options;
    const before = await this.stateAt(origin, roomId, prevId);
    if (!(await rooms.getEvent(prevId))) {
      // Refused, it stays missing: the state before it stands for the state after it.
      const { pdus } = await client.event(origin, prevId).catch((error: unknown) => (isRefusal(error) ? { pdus: [] } : unfilled(`/event from ${origin}`)(error)));
      const prev = (Array.isArray(pdus) ? pdus : []).find((p): p is PDU => isPduShaped(p) && roomIdOfPdu(p) === roomId);
      if (prev) {
        await this.fetchMissingAuth(origin, prev, prevId, version);
        await this.options.storeOutliers(roomId, inHand([prev]));
      }
    }
    const prev = await rooms.getEvent(prevId);
    if (!prev || prev.rejected || prev.event.room_id !== roomId || typeof prev.event.state_key !== 'string') return before;
    return [...before, prevId];
  }

  /**
   * The state before an event as `origin` gives it, as IDs of events we then hold: its IDs first
   * (/state_ids), the events themselves (/state) only when we lack some. After a join we mostly hold
   * them all: a big room's /state is the size of its send_join answer. An answer whose auth chain
   * is empty is taken as it is: its state events are checked against the auth events we hold.
   */
  private async stateAt(origin: string, roomId: string, eventId: string): Promise<string[]> {
    const { rooms, client } = this.options;
    // A server that does not serve /state_ids (or fails it) is asked for /state.
    const ids = await client.stateIds(origin, roomId, eventId).catch(() => ({ pdu_ids: undefined, auth_chain_ids: undefined }));
    if (Array.isArray(ids.pdu_ids) && ids.pdu_ids.every((id) => typeof id === 'string')) {
      const chain = Array.isArray(ids.auth_chain_ids) ? ids.auth_chain_ids.filter((id) => typeof id === 'string') : [];
      if ((await rooms.unknownEvents([...ids.pdu_ids, ...chain])).length === 0) return ids.pdu_ids;
    }
    const { pdus, auth_chain } = await client.state(origin, roomId, eventId).catch(unfilled(`/state from ${origin}`));
    // An answer without them says nothing of the event: it is not checked against an empty state.
    if (!pdus || !auth_chain) throw new GapNotFilled(503, 'M_UNKNOWN', `/state from ${origin} has no pdus or auth chain`);
    const stored = await this.options.storeStateAndAuthChain(roomId, pdus, auth_chain);
    // Events refused on the way (a bad signature) are left out of the state.
    const refused = new Set(await rooms.unknownEvents(stored));
    return stored.filter((id) => !refused.has(id));
  }
}
