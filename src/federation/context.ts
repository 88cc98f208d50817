import type { Context } from 'hono';
import type { Ed25519Backend } from '../crypto/ed25519.ts';
import type { Keys } from '../keys/keys.ts';
import type { Rooms } from '../rooms/rooms.ts';
import type { Sync } from '../sync/sync.ts';
import type { Users } from '../users/users.ts';
import type { Federation } from './federation.ts';
import type { KeyRing } from './keyring.ts';
import type { FederationMediaSource } from './routes/media.ts';

/** What the inbound server-server routes call into. */
export interface FederationServices {
  serverName: string;
  keyRing: KeyRing;
  ed25519: Ed25519Backend;
  rooms: Rooms;
  users: Users;
  keys: Keys;
  sync: Sync;
  federation: Federation;
  /** The media repository, for /media/download and /media/thumbnail. */
  media?: FederationMediaSource;
  now: () => number;
  log: (message: string, error?: unknown) => void;
}

export type FederationEnv = {
  Variables: {
    services: FederationServices;
    /** The authenticated origin server of the request. */
    origin: string;
    /** The parsed JSON body (undefined for requests without one). */
    body: unknown;
  };
  Bindings: { remoteServerName: string };
};
export type FederationCtx = Context<FederationEnv>;
