import { mkdir, open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import initSqlJs from 'sql.js';
import type { RateLimitConfig } from '../client/rate-limit.ts';
import { SEED_LENGTH } from '../crypto/ed25519.ts';
import { createHomeserver, homeserverSchemas, type Homeserver } from '../homeserver.ts';
import { openDurableDatabase } from '../storage/durable-database.ts';
import { fsyncDirectory, openFilePersistence } from './file-persistence.ts';
import { startHttpServer } from './http-server.ts';

export interface NodeHostOptions {
  dataDir: string;
  port?: number;
  host?: string;
  registrationEnabled?: boolean;
  rateLimits?: RateLimitConfig | false;
  log?: (message: string, error?: unknown) => void;
}

export interface NodeHost {
  url: string;
  homeserver: Homeserver;
  close(): Promise<void>;
}

/** Reads the server's identity seed, or creates one (written atomically, readable only by us). */
export async function loadOrCreateSeed(path: string): Promise<Uint8Array> {
  try {
    const seed = new Uint8Array(await readFile(path));
    if (seed.length !== SEED_LENGTH) throw new Error(`${path} holds ${seed.length} bytes, not a ${SEED_LENGTH}-byte seed`);
    return seed;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const seed = crypto.getRandomValues(new Uint8Array(SEED_LENGTH));
  const temporary = `${path}.tmp`;
  const file = await open(temporary, 'w', 0o600);
  await file.writeFile(seed);
  await file.sync();
  await file.close();
  await rename(temporary, path);
  await fsyncDirectory(join(path, '..'));
  return seed;
}

/** The homeserver under Node: durable files in dataDir, HTTP on the loopback interface. */
export async function startNodeHost(options: NodeHostOptions): Promise<NodeHost> {
  await mkdir(options.dataDir, { recursive: true });
  const seed = await loadOrCreateSeed(join(options.dataDir, 'identity.seed'));
  const persistence = await openFilePersistence({ directory: join(options.dataDir, 'db') });
  const database = await openDurableDatabase({ sqlJs: await initSqlJs(), persistence, schemas: homeserverSchemas });
  const homeserver = await createHomeserver({
    database,
    seed,
    registrationEnabled: options.registrationEnabled,
    rateLimits: options.rateLimits,
    log: options.log,
  });
  const http = await startHttpServer(homeserver.fetch, options.port ?? 8008, options.host ?? '127.0.0.1');
  return {
    url: http.url,
    homeserver,
    close: async () => {
      await http.close();
      await homeserver.close();
    },
  };
}
