import type { Hono } from 'hono';
import { CanonicalJsonError, type JsonObject } from '../crypto/canonical-json.ts';
import type { Ed25519Backend, SigningKey } from '../crypto/ed25519.ts';
import { verifyEventSignature, computeEventId, eventIdOf, contentHashMatches, signNewEvent, referenceIds, receivedEventForms, roomIdOfPdu, authEventIds, asRoomEvent, type PDU } from '../events/pdu.ts';
import { serverNameOf } from '../events/identifiers.ts';
import type { RoomEvent } from '../events/event.ts';
import { getRoomVersion, ROOM_VERSIONS, type RoomVersion } from '../events/room-versions.ts';
import type { Keys } from '../keys/keys.ts';
import { RoomError } from '../rooms/errors.ts';
import { RoomGraph } from '../rooms/dag.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import type { PublicRoomsPage, PublicRoomsQuery } from '../rooms/directory.ts';
import type { Database } from '../storage/database.ts';
import type { Sync } from '../sync/sync.ts';
import type { Users } from '../users/users.ts';
import type { RateLimiter } from '../http/rate-limit.ts';
import { CodedError } from '../util/coded-error.ts';
import { createFederationApp } from './app.ts';
import { asJoinError, checkTemplate, FederationJoinError, unique } from './templates.ts';
import { GapNotFilled, UndoneTransactions, type TransactionAnswer } from './transaction-gaps.ts';
import { GapFiller, PrevEventsWithheld, type Elements } from './gap-filling.ts';
import { serverAllowedInRoom } from './acl.ts';
import { FederationRequestError, isUnknownEndpoint, type FederationClient, type SendJoinResponse } from './client.ts';
import type { FederationEnv, FederationMediaSource } from './context.ts';
import { Edus } from './edus.ts';
import { KeyRing, type VerifyKeys } from './keyring.ts';
import { countersignEvent, isPduShaped, roomOf, toPdu } from './pdus.ts';
import type { OutgoingQueues, Edu, PendingEvent } from './queue.ts';
import { takeInviteIntoRoom } from './invites.ts';
import { leaveOutOfBand, receiveRescindedInvite } from './out-of-band-memberships.ts';
import type { FederationTransport } from './transport.ts';

export { FederationJoinError } from './templates.ts';

export interface FederationOptions {
  db: Database;
  serverName: string;
  keyId: string;
  signingKey: SigningKey;
  ed25519: Ed25519Backend;
  rooms: Rooms;
  users: Users;
  keys: Keys;
  sync: Sync;
  /** The signed requests to other servers, and the outgoing queues the room engine's outbox fills (`roomOutbox`): made by the composition root before the room engine. */
  client: FederationClient;
  queues: OutgoingQueues;
  now: () => number;
  log: (message: string, error?: unknown) => void;
  /** Limits each origin server's requests (429 M_LIMIT_EXCEEDED once it is spent); none when not given. */
  rateLimiter?: RateLimiter;
  /** More server-server routes, from components above federation (the mailbox's). */
  routes?: (app: Hono<FederationEnv>) => void;
  /** The media repository, served to other servers (routes/media.ts). */
  media?: FederationMediaSource;
  /** Other servers' verify keys and our key document; a hex name's `KeyRing` when not given (a DNS name's is `ServerKeys`). */
  keyRing?: VerifyKeys;
}

/** Room versions we can join, newest first, for make_join's `ver`. */
const SUPPORTED_VERSIONS = [...ROOM_VERSIONS.keys()];

/** How long a received transaction's answer is kept for a retry, and how often old ones are dropped. */
const RECEIVED_TXN_TTL_MS = 24 * 60 * 60 * 1000;
const PRUNE_EVERY_TXNS = 500;

/**
 * Federation: the inbound server-server API, the outgoing queues, and what the
 * client API does across servers (joins, invites, leaves, backfill). Platform-free:
 * the host carries requests with a {@link FederationTransport}.
 */
export class Federation {
  readonly client: FederationClient;
  readonly queues: OutgoingQueues;
  readonly keyRing: VerifyKeys;
  readonly graph: RoomGraph;
  readonly edus: Edus;
  /** What an event from another server lacks, fetched from that server. */
  readonly gaps: GapFiller;
  private readonly app: Hono<FederationEnv>;
  private receivedSincePrune = 0;
  /** Transactions being processed, by origin and txn ID: a retry that comes meanwhile waits for the first attempt. */
  private readonly receiving = new Map<string, Promise<TransactionAnswer>>();
  private readonly undone = new UndoneTransactions();

  constructor(private readonly options: FederationOptions) {
    const { serverName, signingKey, now, log } = options;
    this.client = options.client;
    this.queues = options.queues;
    this.keyRing = options.keyRing ?? new KeyRing(serverName, signingKey, now);
    this.graph = new RoomGraph(options.rooms);
    this.gaps = new GapFiller({
      rooms: options.rooms, client: this.client, log,
      storeOutliers: (roomId, events) => this.storeOutliers(roomId, events),
      storeStateAndAuthChain: (roomId, state, authChain) => this.storeStateAndAuthChain(roomId, state, authChain),
    });
    this.edus = new Edus({ ...options, queues: this.queues, client: this.client });
    this.app = createFederationApp({ ...options, keyRing: this.keyRing, federation: this }, options.routes);
  }

  get serverName(): string {
    return this.options.serverName;
  }

  /**
   * The inbound server-server API; `remoteServerName` is who the transport says sent it, or
   * undefined when the transport authenticates no one (HTTPS: the X-Matrix signature decides).
   */
  fetch(request: Request, remoteServerName: string | undefined): Promise<Response> {
    return Promise.resolve(this.app.fetch(request, { remoteServerName }));
  }

  async start(): Promise<void> {
    await this.queues.resume();
    await this.options.keys.remoteLists.start();
  }

  stop(): void {
    this.queues.stop();
    this.options.keys.remoteLists.stop();
  }

  /**
   * A peer connected (or reconnected): send what waited for it at once, and resync
   * the device lists of its users who share a room with ours, so end-to-end
   * encryption works the moment the peers meet.
   */
  peerConnected(serverName: string): void {
    this.queues.wake(serverName);
    this.options.keys.remoteLists.peerConnected(serverName).catch((error) => this.options.log(`federation: resyncing device lists of ${serverName} failed`, error));
  }

  /** Sends another server's event on to every other server in the room (what a resident server does for a join). */
  async forward(event: RoomEvent, version: RoomVersion, origin: string): Promise<void> {
    const servers = (await this.options.rooms.joinedServers(event.room_id)).filter((s) => s !== origin && s !== this.serverName);
    await this.queues.send(servers, { pdus: [toPdu(event, version)], eventIds: [event.event_id] });
  }

  /** `sender`'s events not yet delivered to every server in their rooms (for the client's "pending" marks). */
  pendingEvents(sender: string): Promise<Map<string, PendingEvent>> {
    return this.queues.pendingEvents(sender);
  }

  /** Another server's public room directory, for a client's `/publicRooms?server=`. */
  publicRooms(server: string, query: PublicRoomsQuery): Promise<PublicRoomsPage> {
    return this.client.publicRooms(server, query);
  }

  /** Sends EDUs to servers, durably. */
  sendEdus(destinations: Iterable<string>, edus: Edu[]): Promise<void> {
    return this.queues.send(destinations, { edus });
  }

  // ------------------------------------------------------------- inbound PDUs

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
        await this.edus.receive(origin, edu);
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
          const rescinded = await receiveRescindedInvite(this.options.rooms, pdu, (p, v, server) => this.signedBy(p, v, server));
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
    if (serverNameOf(pdu.sender) === this.serverName && !(await this.options.rooms.getEvent(eventId))) {
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
  private async storeStateAndAuthChain(roomId: string, state: Elements, authChain: Elements): Promise<string[]> {
    const both: Elements = { length: authChain.length + state.length, parse: (i) => (i < authChain.length ? authChain.parse(i) : state.parse(i - authChain.length)) };
    const ids = await this.storeOutliers(roomId, both);
    return ids.slice(authChain.length).filter((id): id is string => id !== undefined);
  }

  // ------------------------------------------------------------- joins

  /**
   * Joins a local user to a room on other servers (server-server §Joining Rooms):
   * make_join, sign, send_join v2, then check and store the room's state and auth
   * chain and the join. Tries each server in turn.
   */
  async joinRemoteRoom(roomId: string, userId: string, servers: string[], content: JsonObject): Promise<StoredEvent> {
    const { rooms, serverName } = this.options;
    let lastError: unknown = new FederationJoinError(404, 'M_NOT_FOUND', `no server to join ${roomId} through`);
    for (const server of unique(servers).filter((s) => s !== serverName)) {
      try {
        const made = await this.client.makeJoin(server, roomId, userId, SUPPORTED_VERSIONS);
        const version = this.versionOf(made.room_version ?? '1');
        const template = checkTemplate(made.event, roomId, userId, 'join');
        // A restricted room's resident names the member who vouches for the join; its auth events count on it being kept.
        const authoriser = (template['content'] as JsonObject)['join_authorised_via_users_server'];
        const vouched: JsonObject = typeof authoriser === 'string' ? { join_authorised_via_users_server: authoriser } : {};
        const { event } = await this.signTemplate(template, version, { ...content, ...vouched, membership: 'join' });
        const eventId = computeEventId(event, version);
        const response = await this.client.sendJoin(server, roomId, eventId, event);
        await rooms.trackRemoteRoom(roomId, version.id);
        return await this.storeJoin(response, event, eventId, version, roomId);
      } catch (error) {
        lastError = error;
        this.options.log(`federation: joining ${roomId} through ${server} failed`, error);
      }
    }
    throw asJoinError(lastError);
  }

  private async storeJoin(response: SendJoinResponse, sent: PDU, eventId: string, version: RoomVersion, roomId: string): Promise<StoredEvent> {
    if (!response.state || !response.auth_chain) {
      throw new FederationJoinError(502, 'M_BAD_JSON', 'the send_join response has no state or auth chain');
    }
    const stateIds = await this.storeStateAndAuthChain(roomId, response.state, response.auth_chain);
    // Stored: the answer (17.5 MiB for a room of 10,000 members) is let go before the join is placed.
    response.state = response.auth_chain = undefined;
    await this.requireCreateInState(sent, stateIds, version);
    // The resident server may have added its signature (restricted joins); it is still our event.
    const join = response.event && isPduShaped(response.event) && eventIdOf(response.event, version) === eventId ? response.event : sent;
    const stored = await this.options.rooms.receiveEvent(join, { stateBefore: stateIds, ownJoin: true });
    if (stored.rejected) throw new FederationJoinError(403, 'M_FORBIDDEN', `the join was refused here: ${stored.rejected}`);
    return stored;
  }

  /**
   * A room's state must hold its create event, of the version make_join named (server-server
   * §Joining rooms); the join names it among its auth events (from v12 implies it), so the few of
   * those are all we read.
   */
  private async requireCreateInState(join: PDU, stateIds: string[], version: RoomVersion): Promise<void> {
    const inState = new Set(stateIds);
    const authIds = authEventIds({ ...join, room_id: roomOf(join) }, version);
    const authEvents = await Promise.all(authIds.filter((id) => inState.has(id)).map((id) => this.options.rooms.getEvent(id)));
    const create = authEvents.find((e) => e?.event.type === 'm.room.create' && e.event.state_key === '');
    if (!create) throw new FederationJoinError(502, 'M_BAD_JSON', 'the send_join answer has no m.room.create in its state');
    const created = create.event.content['room_version'] ?? '1';
    if (created !== version.id) throw new FederationJoinError(502, 'M_BAD_JSON', `the room was created as version ${JSON.stringify(created)}, but make_join said ${version.id}`);
  }

  /** Fills a make_* template in as the joining (leaving, knocking) server and signs it. */
  private async signTemplate(template: Record<string, unknown>, version: RoomVersion, content: JsonObject): Promise<{ event: PDU }> {
    const { serverName, keyId, signingKey, now } = this.options;
    const { hashes: _h, signatures: _s, unsigned: _u, event_id: _id, ...fields } = template;
    const unsigned: Record<string, unknown> = { ...fields, content, origin_server_ts: now() };
    if (version.redaction !== 'v11') unsigned['origin'] = serverName;
    else delete unsigned['origin'];
    if (version.eventIdFormat === 'local') unsigned['event_id'] = `$${crypto.randomUUID().replace(/-/g, '')}:${serverName}`;
    const signed = await signNewEvent(unsigned, version, serverName, keyId, signingKey);
    return { event: signed.event as unknown as PDU };
  }

  private versionOf(id: string): RoomVersion {
    const version = getRoomVersion(id);
    if (!version) throw new FederationJoinError(400, 'M_UNSUPPORTED_ROOM_VERSION', `room version ${id} is not supported here`);
    return version;
  }

  // ------------------------------------------------------------- leaves, knocks

  /**
   * Leaves (or rejects an invite to) a room we hold no state for, through the
   * servers given: make_leave, sign, send_leave v2. The leave is kept with the
   * user's memberships so /sync reports it.
   */
  async leaveRemoteRoom(roomId: string, userId: string, servers: string[], content: JsonObject): Promise<StoredEvent> {
    let lastError: unknown = new FederationJoinError(404, 'M_NOT_FOUND', `no server to leave ${roomId} through`);
    for (const server of unique(servers).filter((s) => s !== this.serverName)) {
      try {
        const made = await this.client.makeLeave(server, roomId, userId);
        const version = this.versionOf(made.room_version ?? (await this.options.rooms.roomVersion(roomId))?.id ?? '1');
        const template = checkTemplate(made.event, roomId, userId, 'leave');
        const { event } = await this.signTemplate(template, version, { ...content, membership: 'leave' });
        const eventId = computeEventId(event, version);
        await this.client.sendLeave(server, roomId, eventId, event);
        return await this.options.rooms.recordRemoteMembership({ ...(event as unknown as RoomEvent), event_id: eventId });
      } catch (error) {
        lastError = error;
        this.options.log(`federation: leaving ${roomId} through ${server} failed`, error);
      }
    }
    // No server took it (everyone left, or none answers): an invite or a knock is left here, out of band.
    const outOfBand = await leaveOutOfBand(this.options.rooms, roomId, userId, content, (t, version, c) => this.signTemplate(t, version, c));
    if (outOfBand) return outOfBand;
    throw asJoinError(lastError);
  }

  /** Knocks on a room on other servers: make_knock, sign, send_knock; the knock shows in /sync with the room's stripped state. */
  async knockRemoteRoom(roomId: string, userId: string, servers: string[], content: JsonObject): Promise<StoredEvent> {
    let lastError: unknown = new FederationJoinError(404, 'M_NOT_FOUND', `no server to knock on ${roomId} through`);
    for (const server of unique(servers).filter((s) => s !== this.serverName)) {
      try {
        const made = await this.client.makeKnock(server, roomId, userId, SUPPORTED_VERSIONS);
        const version = this.versionOf(made.room_version ?? '7');
        const template = checkTemplate(made.event, roomId, userId, 'knock');
        const { event } = await this.signTemplate(template, version, { ...content, membership: 'knock' });
        const eventId = computeEventId(event, version);
        const response = await this.client.sendKnock(server, roomId, eventId, event);
        const state = Array.isArray(response.knock_room_state) ? response.knock_room_state : [];
        return await this.options.rooms.recordRemoteMembership({ ...(event as unknown as RoomEvent), event_id: eventId, unsigned: { knock_room_state: state as unknown as JsonObject[] } as unknown as JsonObject });
      } catch (error) {
        lastError = error;
        this.options.log(`federation: knocking on ${roomId} through ${server} failed`, error);
      }
    }
    throw asJoinError(lastError);
  }

  // ------------------------------------------------------------- invites

  /**
   * Has the invitee's server countersign an invite we built (server-server §Inviting
   * to a room, v2), before we store it. The returned event must carry a valid
   * signature from that server.
   */
  async countersignInvite(event: RoomEvent, version: RoomVersion): Promise<RoomEvent> {
    const destination = serverNameOf(event.state_key!);
    const inviteRoomState = await this.options.rooms.strippedState(event.room_id, event.sender);
    const pdu = toPdu(event, version);
    const { event: signed } = await this.client.invite(destination, event.room_id, event.event_id, { room_version: version.id, event: pdu, invite_room_state: inviteRoomState }).catch((error: unknown) => {
      if (!isUnknownEndpoint(error)) throw error;
      // A server without v2 can take v1, which names no room version: only for rooms whose events are v1's (versions 1 and 2), as Synapse does.
      if (version.eventIdFormat !== 'local') throw new FederationJoinError(400, 'M_UNSUPPORTED_ROOM_VERSION', `${destination} serves only the v1 invite, which cannot carry a room of version ${version.id}`);
      return this.client.inviteV1(destination, event.room_id, event.event_id, pdu, inviteRoomState);
    });
    if (!isPduShaped(signed)) throw new FederationJoinError(502, 'M_BAD_JSON', 'the invite came back malformed');
    if (!(await this.signedBy(signed, version, destination))) throw new FederationJoinError(403, 'M_FORBIDDEN', `${destination} did not sign the invite`);
    return { ...(signed as unknown as RoomEvent), event_id: event.event_id };
  }

  /** The event with our signature added (a restricted join we vouch for, an invite we accept). */
  countersign(pdu: PDU, version: RoomVersion): Promise<PDU> {
    const { serverName, keyId, signingKey } = this.options;
    return countersignEvent(pdu, version, serverName, keyId, signingKey);
  }

  /** Whether a server's signature on an event verifies, under any of its key IDs. */
  async signedBy(pdu: PDU, version: RoomVersion, server: string): Promise<boolean> {
    for (const keyId of Object.keys(pdu.signatures?.[server] ?? {})) {
      const key = await this.keyRing.verifyKey(server, keyId, pdu.origin_server_ts);
      if (key && (await verifyEventSignature(pdu, version, server, keyId, key, this.options.ed25519))) return true;
    }
    return false;
  }

  /** Accepts an invite of a local user from another server (PUT /invite v2): check, countersign, keep. */
  async receiveInvite(origin: string, roomVersion: string, pdu: PDU, inviteRoomState: unknown[]): Promise<PDU> {
    const { rooms, users } = this.options;
    const version = getRoomVersion(roomVersion);
    if (!version) throw new FederationJoinError(400, 'M_INCOMPATIBLE_ROOM_VERSION', `room version ${roomVersion} is not supported here`, { room_version: roomVersion });
    // The whole event must be JSON its version allows (v6+: integers within ±(2^53−1), no floats), not only what is signed.
    try {
      receivedEventForms(pdu, version);
    } catch (error) {
      if (error instanceof CanonicalJsonError) throw new RoomError('bad_event', `the invite is not valid JSON for room version ${version.id}: ${error.message}`);
      throw error;
    }
    const eventId = eventIdOf(pdu, version);
    if (!eventId) throw new RoomError('bad_event', 'the invite has no valid event ID');
    if (pdu.type !== 'm.room.member' || pdu.content['membership'] !== 'invite' || typeof pdu.state_key !== 'string') {
      throw new RoomError('bad_event', 'not an invite');
    }
    if (!users.isLocal(pdu.state_key)) throw new RoomError('not_found', `${pdu.state_key} is not a user of this server`);
    if (serverNameOf(pdu.sender) !== origin) throw new RoomError('forbidden', 'the inviter is not from the server that sent the invite');
    if (!(await this.signedBy(pdu, version, origin))) throw new RoomError('forbidden', "the invite is not signed by its sender's server");
    if (!contentHashMatches(pdu)) throw new RoomError('bad_event', 'the invite\'s content hash does not match');
    const signed = await this.countersign(pdu, version);
    // In a room we are in, the invite takes its place in the room now (`invites.ts`): it is a room event like any
    // other, which reaches us by /send too, whoever it names (Synapse does not ask whether the invitee exists at all).
    if (await takeInviteIntoRoom(rooms, signed, version)) return signed;
    // Elsewhere it is kept for the invitee's /sync, so there must be one.
    if (!(await users.exists(pdu.state_key))) throw new RoomError('not_found', `no user ${pdu.state_key} here`);
    const stripped = inviteRoomState.filter((e) => typeof e === 'object' && e !== null) as JsonObject[];
    await rooms.recordRemoteMembership({
      ...(signed as unknown as RoomEvent),
      event_id: eventId,
      unsigned: { invite_room_state: stripped } as unknown as JsonObject,
    });
    return signed;
  }

  // ------------------------------------------------------------- backfill

  /**
   * Fetches older history from a server in the room (server-server §Backfilling) and
   * stores it in its place by the DAG. Returns how many events were added.
   */
  async backfill(roomId: string, fromEventIds: string[], limit: number): Promise<number> {
    const { rooms } = this.options;
    const version = await rooms.roomVersion(roomId);
    if (!version || fromEventIds.length === 0) return 0;
    const servers = (await rooms.joinedServers(roomId)).filter((s) => s !== this.serverName);
    let added = 0;
    next: for (const server of servers) {
      let pdus: PDU[];
      try {
        pdus = (await this.client.backfill(server, roomId, fromEventIds, limit)).pdus ?? [];
      } catch (error) {
        this.options.log(`federation: backfill from ${server} failed`, error);
        continue;
      }
      for (const pdu of pdus.filter(isPduShaped).sort((a, b) => a.depth - b.depth)) {
        const id = eventIdOf(pdu, version);
        if (!id || roomIdOfPdu(pdu) !== roomId) continue;
        const known = await rooms.getEvent(id);
        if (known && !known.outlier) continue;
        try {
          const stored = await this.gaps.receivePulled(server, pdu, id, version, true);
          if (!stored.rejected) added++;
        } catch (error) {
          // What the event needs could not be had from this server (the stream reset, a timeout, a refusal): the next one is asked.
          if (error instanceof GapNotFilled || error instanceof FederationRequestError) {
            this.options.log(`federation: backfill from ${server} failed`, error);
            continue next;
          }
          if (!(error instanceof RoomError)) throw error;
          this.options.log(`federation: backfilled event ${id} refused: ${error.message}`);
        }
      }
      if (added > 0) return added;
    }
    // Every server failed (or had nothing): the caller answers with what is held.
    return added;
  }
}

