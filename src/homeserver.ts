import { createClientApp } from './client/app.ts';
import { RateLimiter, type RateLimitConfig } from './client/rate-limit.ts';
import type { ClientServices } from './client/services.ts';
import { UserInteractiveAuth } from './client/uia.ts';
import { defaultEd25519Backend, type Ed25519Backend } from './crypto/ed25519.ts';
import { HEARTH_KEY_ID, publicKeyFromServerName, serverNameFromPublicKey } from './crypto/identity.ts';
import { webRandomBytes, type RandomBytes } from './crypto/random.ts';
import { Keys } from './keys/keys.ts';
import { keysSchema } from './keys/schema.ts';
import { roomsSchema } from './rooms/schema.ts';
import { Rooms } from './rooms/rooms.ts';
import type { ComponentSchema, Database } from './storage/database.ts';
import { streamSchema, type StreamChange } from './storage/stream.ts';
import { syncSchema } from './sync/schema.ts';
import { Sync } from './sync/sync.ts';
import { usersSchema } from './users/schema.ts';
import { Users } from './users/users.ts';

/** Every component's schema, in dependency order: hosts open the database with these. */
export const homeserverSchemas: ComponentSchema[] = [streamSchema, usersSchema, roomsSchema, syncSchema, keysSchema];

export interface HomeserverOptions {
  /** The database, opened by the host (with durable persistence) using homeserverSchemas. */
  database: Database;
  /** 32-byte ed25519 seed: the server's identity. */
  seed: Uint8Array;
  registrationEnabled?: boolean;
  /** Rate limits per device; false turns them off (test harnesses that register many users). */
  rateLimits?: RateLimitConfig | false;
  /** Cap on /sync long-polls. */
  maxSyncTimeoutMs?: number;
  passwordIterations?: number;
  now?: () => number;
  random?: RandomBytes;
  ed25519?: Ed25519Backend;
  log?: (message: string, error?: unknown) => void;
}

export interface Homeserver {
  readonly serverName: string;
  readonly keyId: string;
  readonly publicKey: Uint8Array;
  /** The client-server API: one Request → Response function. */
  fetch(request: Request): Promise<Response>;
  readonly services: ClientServices;
  close(): Promise<void>;
}

export const DEFAULT_RATE_LIMITS: RateLimitConfig = { perSecond: 10, burst: 50 };

/** The composition root: wires the components together. Every host calls it. */
export async function createHomeserver(options: HomeserverOptions): Promise<Homeserver> {
  const now = options.now ?? Date.now;
  const random = options.random ?? webRandomBytes;
  const ed25519 = options.ed25519 ?? (await defaultEd25519Backend());
  const signingKey = await ed25519.keyFromSeed(options.seed);
  const serverName = serverNameFromPublicKey(signingKey.publicKey);
  const db = options.database;

  // Components report stream changes; the sync notifier wakes long-polls.
  let sync: Sync | undefined;
  const notify = (change: StreamChange) => sync?.notify(change);

  const users = new Users({ db, serverName, now, random, notify, passwordIterations: options.passwordIterations });
  const rooms = new Rooms({
    db,
    serverName,
    keyId: HEARTH_KEY_ID,
    signingKey,
    ed25519,
    now,
    random,
    notify,
    resolveVerifyKey: async (server, keyId) => (keyId === HEARTH_KEY_ID ? publicKeyFromServerName(server) : undefined),
  });
  sync = new Sync(db, rooms, users, now);
  const keys = new Keys({ db, ed25519, notify, membership: rooms, users, log: options.log });
  users.addDeviceListener(keys);
  sync.addExtension(keys);

  const services: ClientServices = {
    config: {
      registrationEnabled: options.registrationEnabled ?? true,
      maxSyncTimeoutMs: options.maxSyncTimeoutMs ?? 5 * 60 * 1000,
    },
    users,
    rooms,
    sync,
    keys,
    uia: new UserInteractiveAuth(random, now),
    rateLimiter: options.rateLimits === false ? undefined : new RateLimiter(options.rateLimits ?? DEFAULT_RATE_LIMITS, now),
    random,
    now,
  };
  const app = createClientApp(services, options.log);

  return {
    serverName,
    keyId: HEARTH_KEY_ID,
    publicKey: signingKey.publicKey,
    fetch: async (request) => app.fetch(request),
    services,
    close: async () => {
      sync?.typing.stop();
      await db.close();
    },
  };
}
