import type { RandomBytes } from '../crypto/random.ts';
import type { Keys } from '../keys/keys.ts';
import type { Rooms } from '../rooms/rooms.ts';
import type { Sync } from '../sync/sync.ts';
import type { Users } from '../users/users.ts';
import type { RateLimiter } from './rate-limit.ts';
import type { UserInteractiveAuth } from './uia.ts';

export interface ClientConfig {
  /** Accept new accounts on /register. */
  registrationEnabled: boolean;
  /** Longest /sync long-poll we hold, in ms (below a service worker's lifetime in the browser). */
  maxSyncTimeoutMs: number;
}

/** What the client-server routes call into. */
export interface ClientServices {
  config: ClientConfig;
  users: Users;
  rooms: Rooms;
  sync: Sync;
  keys: Keys;
  uia: UserInteractiveAuth;
  rateLimiter: RateLimiter | undefined;
  random: RandomBytes;
  now: () => number;
}
