import type { Hono } from 'hono';
import type { JsonObject } from '../crypto/canonical-json.ts';
import type { Ed25519Backend, SigningKey } from '../crypto/ed25519.ts';
import type { RoomEvent } from '../events/event.ts';
import type { PDU } from '../events/pdu.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import type { RateLimiter } from '../http/rate-limit.ts';
import type { Keys } from '../keys/keys.ts';
import { RoomGraph } from '../rooms/dag.ts';
import type { PublicRoomsPage, PublicRoomsQuery } from '../rooms/directory.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import type { Database } from '../storage/database.ts';
import { createFederationApp } from './app.ts';
import { Backfill } from './backfill.ts';
import type { FederationClient } from './client.ts';
import type { FederationEnv, FederationMediaSource, FederationServices } from './context.ts';
import { Edus, type EduServices } from './edus.ts';
import type { GapFiller } from './gap-filling.ts';
import { InboundTransactions } from './inbound-transactions.ts';
import type { VerifyKeys } from './keyring.ts';
import { MembershipHandshakes } from './membership-handshakes.ts';
import { signatureCheck, toPdu, type SignatureCheck } from './pdus.ts';
import { ServedHistory } from './served-history.ts';
import type { Edu, OutgoingQueues, PendingEvent } from './queue.ts';
import type { TransactionAnswer } from './transaction-gaps.ts';
import type { FederationTransport } from './transport.ts';

export { FederationJoinError } from './templates.ts';

export interface FederationOptions {
  db: Database;
  serverName: string;
  keyId: string;
  signingKey: SigningKey;
  ed25519: Ed25519Backend;
  rooms: Rooms;
  /** Of users and sync, only what the inbound routes and the EDU handlers call (the Federation hands these options to both). */
  users: FederationServices['users'] & EduServices['users'];
  keys: Keys;
  sync: FederationServices['sync'] & EduServices['sync'];
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
  /** Other servers' verify keys and our key document: a hex name's `KeyRing`, a DNS name's `ServerKeys` (made by the composition root before the room engine and the mailbox, which use it too). */
  keyRing: VerifyKeys;
}

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
  /** A room's events and state as other servers read them. */
  readonly served: ServedHistory;
  readonly edus: Edus;
  /** What an event from another server lacks, fetched from that server. */
  readonly gaps: GapFiller;
  private readonly app: Hono<FederationEnv>;
  private readonly inbound: InboundTransactions;
  private readonly handshakes: MembershipHandshakes;
  private readonly history: Backfill;

  constructor(private readonly options: FederationOptions) {
    const { serverName, signingKey, now, log } = options;
    this.client = options.client;
    this.queues = options.queues;
    this.keyRing = options.keyRing;
    this.graph = new RoomGraph(options.rooms);
    this.served = new ServedHistory({ rooms: options.rooms, graph: this.graph, visibility: options.sync.visibility });
    const { db, rooms, users, keyId, ed25519 } = options;
    this.edus = new Edus({ ...options, queues: this.queues, client: this.client });
    // Each seam is given what it uses: no part reaches into another after construction.
    const signedBy = (this.signedBy = signatureCheck(this.keyRing, ed25519));
    this.inbound = new InboundTransactions({ db, serverName, rooms, client: this.client, receiveEdu: (origin, edu) => this.edus.receive(origin, edu), signedBy, now, log });
    this.gaps = this.inbound.gaps;
    this.handshakes = new MembershipHandshakes({
      serverName, keyId, signingKey, ed25519, rooms, users, client: this.client, signedBy, now, log,
      storeStateAndAuthChain: (roomId, state, authChain) => this.inbound.storeStateAndAuthChain(roomId, state, authChain),
    });
    this.history = new Backfill({ serverName, rooms, client: this.client, gaps: this.gaps, log });
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

  // ------------------------------------------------------------- inbound (inbound-transactions.ts)

  /** A transaction from another server, processed once; see {@link InboundTransactions.receiveTransaction}. */
  receiveTransaction(origin: string, txnId: string, pdus: unknown[], edus: Edu[]): Promise<TransactionAnswer> {
    return this.inbound.receiveTransaction(origin, txnId, pdus, edus);
  }

  // ------------------------------------------------------------- memberships (membership-handshakes.ts)

  joinRemoteRoom(roomId: string, userId: string, servers: string[], content: JsonObject): Promise<StoredEvent> {
    return this.handshakes.joinRemoteRoom(roomId, userId, servers, content);
  }

  leaveRemoteRoom(roomId: string, userId: string, servers: string[], content: JsonObject): Promise<StoredEvent> {
    return this.handshakes.leaveRemoteRoom(roomId, userId, servers, content);
  }

  knockRemoteRoom(roomId: string, userId: string, servers: string[], content: JsonObject): Promise<StoredEvent> {
    return this.handshakes.knockRemoteRoom(roomId, userId, servers, content);
  }

  countersignInvite(event: RoomEvent, version: RoomVersion): Promise<RoomEvent> {
    return this.handshakes.countersignInvite(event, version);
  }

  countersign(pdu: PDU, version: RoomVersion): Promise<PDU> {
    return this.handshakes.countersign(pdu, version);
  }

  /** Whether a server's signature on an event verifies, under any of its key IDs. */
  readonly signedBy: SignatureCheck;

  receiveInvite(origin: string, roomId: string, roomVersion: string | undefined, pdu: unknown, inviteRoomState: unknown[]): Promise<PDU> {
    return this.handshakes.receiveInvite(origin, roomId, roomVersion, pdu, inviteRoomState);
  }

  // ------------------------------------------------------------- backfill (backfill.ts)

  /** Older history from the servers in the room; how many events were added. */
  backfill(roomId: string, fromEventIds: string[], limit: number): Promise<number> {
    return this.history.backfill(roomId, fromEventIds, limit);
  }
}

