import type { Context } from 'hono';
import type { Ed25519Backend } from '../crypto/ed25519.ts';
import type { RateLimiter } from '../http/rate-limit.ts';
import type { Keys } from '../keys/keys.ts';
import type { Rooms } from '../rooms/rooms.ts';
import type { Sync } from '../sync/sync.ts';
import type { Users } from '../users/users.ts';
import type { RoomEvent } from '../events/event.ts';
import type { PDU } from '../events/pdu.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import type { RoomGraph } from '../rooms/dag.ts';
import type { MediaContent } from '../media/media.ts';
import type { Edu } from './queue.ts';
import type { VerifyKeys } from './keyring.ts';
import type { ServedHistory } from './served-history.ts';

/**
 * What the inbound routes need of the Federation component: a view, not the class,
 * so that the component can build its app without a cycle back through the routes.
 */
export interface InboundFederation {
  readonly graph: RoomGraph;
  /** A room's events and state as other servers read them (served-history.ts). */
  readonly served: ServedHistory;
  receiveTransaction(origin: string, txnId: string, pdus: unknown[], edus: Edu[]): Promise<{ pdus: Record<string, { error?: string }> }>;
  /** An invite of one of our users to a room on the sending server; `roomVersion` undefined from the v1 endpoint. */
  receiveInvite(origin: string, roomId: string, roomVersion: string | undefined, pdu: unknown, inviteRoomState: unknown[]): Promise<PDU>;
  /** Passes an event this server accepted (a join, leave or knock sent to it) on to the rest of the room. */
  forward(event: RoomEvent, version: RoomVersion, origin: string): Promise<void>;
  /** Whether a server's signature on an event verifies, under any of its key IDs. */
  signedBy(pdu: PDU, version: RoomVersion, server: string): Promise<boolean>;
  /** The event with this server's signature added. */
  countersign(pdu: PDU, version: RoomVersion): Promise<PDU>;
}

/** What the federation media routes need of the media repository (src/media: Media). */
export interface FederationMediaSource {
  serveToServer(mediaId: string, timeoutMs?: number): Promise<MediaContent>;
  serveThumbnailToServer(mediaId: string, request: { width: number; height: number; method: 'crop' | 'scale'; timeoutMs?: number }): Promise<MediaContent>;
}

/** What the inbound server-server routes call into. */
export interface FederationServices {
  serverName: string;
  keyRing: VerifyKeys;
  ed25519: Ed25519Backend;
  rooms: Rooms;
  users: Pick<Users, 'exists' | 'getProfile' | 'isGuest' | 'isLocal' | 'openIdUserinfo'>;
  keys: Keys;
  sync: Pick<Sync, 'visibility'>;
  federation: InboundFederation;
  /** The media repository, for /media/download and /media/thumbnail. */
  media?: FederationMediaSource;
  now: () => number;
  log: (message: string, error?: unknown) => void;
  /** Each origin's allowance of requests, taken once a request is authenticated. */
  rateLimiter?: RateLimiter;
}

export type FederationEnv = {
  Variables: {
    services: FederationServices;
    /** The authenticated origin server of the request. */
    origin: string;
    /** The parsed JSON body (undefined for requests without one). */
    body: unknown;
  };
  /**
   * The peer the transport authenticated (libp2p: the connection's remote peer), which the
   * X-Matrix origin must then be; undefined for a transport that authenticates no one (HTTPS),
   * where the X-Matrix signature alone says who sent the request.
   */
  Bindings: { remoteServerName: string | undefined };
};
export type FederationCtx = Context<FederationEnv>;
