import type { RandomBytes } from '../crypto/random.ts';
import type { Federation } from '../federation/federation.ts';
import type { Memberships } from '../federation/memberships.ts';
import type { Keys } from '../keys/keys.ts';
import type { Media } from '../media/media.ts';
import type { Rooms } from '../rooms/rooms.ts';
import type { Search } from '../search/search.ts';
import type { SlidingSync } from '../sliding-sync/sliding-sync.ts';
import type { SpaceHierarchy } from '../spaces/hierarchy.ts';
import type { RoomHistory } from '../sync/history.ts';
import type { Sync } from '../sync/sync.ts';
import type { Users } from '../users/users.ts';
import type { RateLimiter } from '../http/rate-limit.ts';
import type { UserInteractiveAuth } from './uia.ts';

export interface ClientConfig {
  /** Accept new accounts on /register. */
  registrationEnabled: boolean;
  /** Accept guest accounts (`/register?kind=guest`): off unless the host turns it on (`--allow-guests`). */
  guestsEnabled: boolean;
  /** Longest /sync long-poll we hold, in ms (below a service worker's lifetime in the browser). */
  maxSyncTimeoutMs: number;
}

/**
 * What the client-server routes call into. Where the routes use a few methods of a component, they are given
 * only those (`Pick<>`), so a reader sees what an edge needs; the routes use most of what Rooms, Users, Keys,
 * Sync and Media offer, and those stay whole.
 */
export interface ClientServices {
  config: ClientConfig;
  users: Users;
  rooms: Rooms;
  sync: Sync;
  /** /messages, /context, a room's initial sync and its state at a token, backfilling from other servers going back. */
  history: Pick<RoomHistory, 'messages' | 'context' | 'stateAtToken' | 'roomInitialSync'>;
  /** Simplified sliding sync (MSC4186). */
  slidingSync: Pick<SlidingSync, 'sync'>;
  keys: Keys;
  /** The content repository. */
  media: Media;
  federation: Pick<Federation, 'client' | 'pendingEvents' | 'publicRooms'>;
  /** Server-side search of room events. */
  search: Pick<Search, 'roomEvents'>;
  /** The space hierarchy walk, over the rooms here and (for those held elsewhere) the servers their m.space.child events name. */
  spaces: Pick<SpaceHierarchy, 'page'>;
  /** Joins, leaves, invites and knocks, in rooms here and on other servers. */
  memberships: Pick<Memberships, 'invite' | 'join' | 'knock' | 'leave' | 'resolveAlias' | 'sendMembership'>;
  uia: Pick<UserInteractiveAuth, 'authenticate'>;
  rateLimiter: RateLimiter | undefined;
  random: RandomBytes;
  now: () => number;
}
