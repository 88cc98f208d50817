import type { JsonObject } from '../crypto/canonical-json.ts';
import type { Ed25519Backend, SigningKey } from '../crypto/ed25519.ts';
import type { RandomBytes } from '../crypto/random.ts';
import type { RoomEvent } from '../events/event.ts';
import type { PDU } from '../events/pdu.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import type { Database, WriteTransaction } from '../storage/database.ts';
import type { StreamNotify } from '../storage/stream.ts';
import type { RoomError } from './errors.ts';
import type { NidState } from './state-store.ts';

// The room engine's shared types. They import nothing of the engine but state-store's
// NidState and the engine's error, so every part (and the timeline and relations readers) can use them without a cycle.

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

/** A client's transaction: scoped to the device and the endpoint (client-server §Transaction identifiers). */
export interface TransactionKey {
  userId: string;
  deviceId: string;
  /** Names the endpoint the request went to, with its path parameters: another endpoint, another request. */
  endpoint: string;
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

/**
 * Told, inside the write that changes a room's current state, of users of other servers who share
 * no room with a local user after it (they left, or our last user in a room with them did), so what
 * another component keeps of them only while they share one (their device lists) changes in the
 * same write. It must not throw.
 */
export type UnsharedHook = (tx: WriteTransaction, userIds: string[]) => void;

/** Lets another server countersign an event before it is stored (an invite of a remote user). */
export type Countersign = (event: RoomEvent, version: RoomVersion) => Promise<RoomEvent>;

/** Looks up a server's verify key, for events that come from elsewhere; `at` is when the event says it was signed (its origin_server_ts). */
export type VerifyKeyResolver = (serverName: string, keyId: string, at?: number) => Promise<Uint8Array | undefined>;

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
  /** Federation's outbox, told of every local write (see {@link OutboxHook}); none: nothing leaves this server. */
  outbox?: OutboxHook;
  /** An index kept with the timeline in the same writes (search's; see {@link EventIndexHook}). */
  indexer?: EventIndexHook;
  /** The keys component's, for users of other servers we stop sharing rooms with (see {@link UnsharedHook}). */
  unshared?: UnsharedHook;
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
  /**
   * The state after some of its prev events, as IDs of events we hold: for prev events we hold no
   * state for (missing, or outliers), as the server we had them from gave it (/state_ids at each).
   * The state before the event resolves these with the states after its other prev events; a prev
   * event in neither (one of another room) is left out.
   */
  prevStates?: ReadonlyMap<string, readonly string[]>;
  /**
   * Our own join, made through a resident server (send_join), with that server's state as
   * `stateBefore`: the room as it holds it now. It becomes our current state and sole forward
   * extremity, replacing whatever we held from before (a room we left and now rejoin, whose
   * invite reached us out of band), and is never soft-failed against that older view.
   */
  ownJoin?: boolean;
}

/**
 * Events read one at a time, each parsed when read: a big answer's events (a join's state:
 * 20,000 in a room of 10,000 members) are then never all held as objects at once.
 */
export interface PduSource {
  readonly length: number;
  /** Event `index`, parsed anew, or undefined when it is no PDU of the room (it is then left out). */
  read(index: number): PDU | undefined;
}

/** What became of one event given to receiveOutliers. */
export interface OutlierAnswer {
  /** Its ID (computed once, here). */
  eventId: string;
  /** Why it was refused and not stored (a bad signature, unknown auth events); absent when it is stored, as accepted or rejected. */
  refused?: RoomError;
}

/** The event reads the timeline reader builds on (the room engine answers them). */
export interface EventLookup {
  getEvent(eventId: string): Promise<StoredEvent | undefined>;
  getEventByNid(nid: number): Promise<StoredEvent | undefined>;
  /** State before (or after) an event we hold with state; undefined for outliers. */
  stateAtEvent(eventId: string, which: 'before' | 'after'): Promise<NidState | undefined>;
}
