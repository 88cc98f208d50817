import type { PDU } from '../events/pdu.ts';
import { contentHashMatches, eventIdOf, referenceIds, roomIdOfPdu } from '../events/pdu.ts';
import { serverNameOf } from '../events/identifiers.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import { RoomError } from '../rooms/errors.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import type { Database } from '../storage/database.ts';
import { serverAllowedInRoom } from './acl.ts';
import type { FederationClient } from './client.ts';
import { GapFiller, PrevEventsWithheld, type Elements } from './gap-filling.ts';
import { receiveRescindedInvite } from './out-of-band-memberships.ts';
import { isPduShaped, type SignatureCheck } from './pdus.ts';
import type { Edu } from './queue.ts';
import { GapNotFilled, UndoneTransactions, type TransactionAnswer } from './transaction-gaps.ts';

/** How long a received transaction's answer is kept for a retry, and how often old ones are dropped. */
const RECEIVED_TXN_TTL_MS = 24 * 60 * 60 * 1000;
const PRUNE_EVERY_TXNS = 500;

export interface InboundTransactionsOptions {
  /** For this component's own table of answered transactions (`federation_received_txns`). */
  db: Database;
  serverName: string;
  rooms: Rooms;
  /** Where what an event lacks is fetched from its sender (gap-filling.ts). */
  client: FederationClient;
  /** Applies one EDU of a transaction (edus.ts). */
  receiveEdu(origin: string, edu: Edu): Promise<void>;
  /** Whether a server's signature on an event verifies (a rescinded invite's, for a room we do not hold; pdus.ts, signatureCheck). */
  signedBy: SignatureCheck;
  now: () => number;
  log: (message: string, error?: unknown) => void;
}

/**
 * Transactions other servers send us (`PUT /send/{txnId}`): each once, its PDUs checked and stored
 * room by room, what they build on fetched first when we lack it (gap-filling.ts), then its EDUs.
 */
export class InboundTransactions {
  /** What an event from another server lacks, fetched from that server. */
  readonly gaps: GapFiller;
  private receivedSincePrune = 0;
  /** Transactions being processed, by origin and txn ID: a retry that comes meanwhile waits for the first attempt. */
  private readonly receiving = new Map<string, Promise<TransactionAnswer>>();
  private readonly undone = new UndoneTransactions();

  constructor(private readonly options: InboundTransactionsOptions) {
    this.gaps = new GapFiller({
      rooms: options.rooms, client: options.client, log: options.log,
      storeOutliers: (roomId, events) => this.storeOutliers(roomId, events),
      storeStateAndAuthChain: (roomId, state, authChain) => this.storeStateAndAuthChain(roomId, state, authChain),
    });
  }

  /**
   * Processes a transaction once (dedupe by origin and txn ID: a retry gets the first answer, and
   * waits for it while the first attempt is still processed). PDUs and EDUs are all stored before
   * it answers. A PDU that could not be placed for want of events not to be had now ({@link GapNotFilled})
   * leaves the transaction undone: 503, not recorded, EDUs not applied, so the sender sends it again
   * (answered 200 with that PDU's error, the sender would drop it, and nothing would bring it again),
   * a few times ({@link UndoneTransactions}). */
  async receiveTransaction(origin: string, txnId: string, pdus: unknown[], edus: Edu[]): Promise<TransactionAnswer> {
    const key = JSON.stringify([origin, txnId]);
    const answer = await this.receiving.get(key)?.catch(() => undefined);
    if (answer) return answer;
    const attempt = this.processTransaction(key, origin, txnId, pdus, edus);
    this.receiving.set(key, attempt);
    // Dropped once settled (a retry after that reads the recorded answer).
    void attempt.catch(() => undefined).finally(() => this.receiving.get(key) === attempt && this.receiving.delete(key));
    return attempt;
  }

  private async processTransaction(key: string, origin: string, txnId: string, pdus: unknown[], edus: Edu[]): Promise<TransactionAnswer> {
    const { db, now } = this.options;
    const seen = await db.get<{ response: string }>('SELECT response FROM federation_received_txns WHERE origin = ? AND txn_id = ?', [origin, txnId]);
    if (seen) return JSON.parse(seen.response) as TransactionAnswer;
    const unplaced = new Set<string>();
    const results = await this.receivePdus(origin, pdus, unplaced);
    const [id] = unplaced;
    if (!id) this.undone.done(key);
    else if (this.undone.mayLeaveUndone(key)) throw new GapNotFilled(503, 'M_UNKNOWN', `${unplaced.size} PDU(s) could not be placed yet (${id}: ${results[id]?.error}); send the transaction again`);
    for (const edu of edus) {
      try {
        await this.options.receiveEdu(origin, edu);
      } catch (error) {
        this.options.log(`federation: ${edu.edu_type} EDU from ${origin} failed`, error);
      }
    }
    const response = { pdus: results };
    // A sender retries a transaction within minutes, not days: older answers are dropped now and then.
    const prune = ++this.receivedSincePrune >= PRUNE_EVERY_TXNS;
    if (prune) this.receivedSincePrune = 0;
    await db.transaction((tx) => {
      tx.run('INSERT OR IGNORE INTO federation_received_txns (origin, txn_id, response, received_ts) VALUES (?, ?, ?, ?)', [origin, txnId, JSON.stringify(response), now()]);
      if (prune) tx.run('DELETE FROM federation_received_txns WHERE received_ts < ?', [now() - RECEIVED_TXN_TTL_MS]);
    });
    return response;
  }

  /**
   * Processes the PDUs of a transaction (server-server §Checks performed on receipt of
   * a PDU), each room in order, rooms in parallel. The result per event is `{}` when
   * it was accepted (or soft-failed) and `{ error }` otherwise; the IDs of those that failed for
   * want of events that could not be had now are added to `unplaced`.
   */
  async receivePdus(origin: string, pdus: unknown[], unplaced = new Set<string>()): Promise<Record<string, { error?: string }>> {
    const results: Record<string, { error?: string }> = {};
    const byRoom = new Map<string, PDU[]>();
    for (const pdu of pdus) {
      const roomId = isPduShaped(pdu) ? roomIdOfPdu(pdu) : undefined;
      if (roomId === undefined) continue; // no event ID to report it under
      const list = byRoom.get(roomId) ?? [];
      list.push(pdu as PDU);
      byRoom.set(roomId, list);
    }
    await Promise.all([...byRoom].map(async ([roomId, list]) => {
      const version = await this.options.rooms.roomVersion(roomId);
      // A server the room's ACL denies takes no part in it: none of its PDUs for the room are processed.
      if (version && !(await serverAllowedInRoom(this.options.rooms, roomId, origin))) {
        for (const pdu of list) {
          const eventId = eventIdOf(pdu, version);
          if (eventId) results[eventId] = { error: `${origin} is denied by the room's server ACL` };
        }
        return;
      }
      const record = (pdu: PDU, eventId: string) => (stored: StoredEvent) => {
        // A bad content hash means tampering on the way: the spec keeps the redacted event, and we say so.
        if (stored.rejected) results[eventId] = { error: `rejected: ${stored.rejected}` };
        else if (!contentHashMatches(pdu)) results[eventId] = { error: 'the content hash does not match; only the redacted event was kept' };
        else results[eventId] = {};
      };
      const fail = (eventId: string) => (error: unknown) => {
        results[eventId] = { error: error instanceof Error ? error.message : String(error) };
        // Not a verdict on the event: what it builds on could not be had now (a fetch failed, or an earlier event of the batch did).
        if (error instanceof GapNotFilled || (error instanceof RoomError && error.code === 'missing_events')) unplaced.add(eventId);
        if (!(error instanceof RoomError || error instanceof PrevEventsWithheld)) this.options.log(`federation: event ${eventId} from ${origin} failed`, error);
      };
      // Events whose auth and prev events we hold, or that come earlier in this transaction,
      // go to the room engine without waiting for each other: it keeps their order, checks
      // several at once and commits them as a group. Any other waits for those before it
      // and fetches what it lacks.
      const inFlight: Promise<void>[] = [];
      const here = new Set<string>();
      for (const pdu of list) {
        const eventId = version ? eventIdOf(pdu, version) : typeof pdu.event_id === 'string' ? pdu.event_id : undefined;
        if (!version) {
          const rescinded = await receiveRescindedInvite(this.options.rooms, pdu, this.options.signedBy);
          if (rescinded) results[rescinded.eventId] = {};
          else if (eventId) results[eventId] = { error: `room ${roomId} is unknown here` };
          continue;
        }
        if (!eventId) continue;
        if (await this.holdsWhatItNeeds(pdu, here)) {
          inFlight.push(this.receiveLive(pdu, eventId).then(record(pdu, eventId), fail(eventId)));
        } else {
          await Promise.all(inFlight.splice(0));
          await this.receiveWithGaps(origin, pdu, version, eventId).then(record(pdu, eventId), fail(eventId));
        }
        here.add(eventId);
      }
      await Promise.all(inFlight);
    }));
    return results;
  }

  /** Whether an event's auth and prev events are all held (or come before it in the same batch). */
  private async holdsWhatItNeeds(pdu: PDU, batch: Set<string>): Promise<boolean> {
    for (const id of referenceIds(pdu.auth_events)) if (!batch.has(id) && !(await this.options.rooms.getEvent(id))) return false;
    for (const id of referenceIds(pdu.prev_events)) {
      if (batch.has(id)) continue;
      const stored = await this.options.rooms.getEvent(id);
      if (!stored || stored.outlier || stored.event.room_id !== pdu.room_id) return false;
    }
    return true;
  }

  /** An event that builds on what we hold. */
  private async receiveLive(pdu: PDU, eventId: string): Promise<StoredEvent> {
    await this.refuseImpostor(pdu, eventId);
    return this.options.rooms.receiveEvent(pdu);
  }

  /** Another server may not hand us an event of ours that we never made. */
  private async refuseImpostor(pdu: PDU, eventId: string): Promise<void> {
    if (serverNameOf(pdu.sender) === this.options.serverName && !(await this.options.rooms.getEvent(eventId))) {
      throw new RoomError('bad_event', `event ${eventId} claims to come from this server`);
    }
  }

  /**
   * Stores a live event, fetching what it builds on when we lack it ({@link GapFiller.receivePushed}):
   * its auth events by /event_auth, its prev events by /get_missing_events, and for those fetched
   * whose own prev events are still missing, the state after each by /state_ids.
   */
  async receiveWithGaps(origin: string, pdu: PDU, version: RoomVersion, eventId: string): Promise<StoredEvent> {
    await this.refuseImpostor(pdu, eventId);
    const known = await this.options.rooms.getEvent(eventId);
    if (known && !known.outlier) return known;
    return this.gaps.receivePushed(origin, pdu, version, eventId);
  }

  /**
   * Checks and stores events without state (auth chains, a join's state), each after its auth
   * events, read (and parsed) one window at a time; answers each one's ID, in order, where it
   * is a PDU of the room that was stored (or held already), undefined where it was refused.
   */
  async storeOutliers(roomId: string, events: Elements): Promise<(string | undefined)[]> {
    const answers = await this.options.rooms.receiveOutliers(roomId, {
      length: events.length,
      read: (i) => {
        let pdu: unknown;
        try {
          pdu = events.parse(i);
        } catch {
          return undefined; // an element that is not JSON is no PDU
        }
        return isPduShaped(pdu) && roomIdOfPdu(pdu) === roomId ? pdu : undefined;
      },
    });
    for (const answer of answers) {
      // A bad event in a chain is left out (a bad signature, say); whatever needed it is then refused too.
      if (answer?.refused) this.options.log(`federation: outlier ${answer.eventId} refused: ${answer.refused.message}`);
    }
    return answers.map((answer) => (answer && !answer.refused ? answer.eventId : undefined));
  }

  /** Stores a state and its auth chain as outliers; answers the state's event IDs. */
  async storeStateAndAuthChain(roomId: string, state: Elements, authChain: Elements): Promise<string[]> {
    const both: Elements = { length: authChain.length + state.length, parse: (i) => (i < authChain.length ? authChain.parse(i) : state.parse(i - authChain.length)) };
    const ids = await this.storeOutliers(roomId, both);
    return ids.slice(authChain.length).filter((id): id is string => id !== undefined);
  }
}
