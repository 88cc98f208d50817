import { mkdir, open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { tcp } from '@libp2p/tcp';
import { webSockets } from '@libp2p/websockets';
import { FsDatastore } from 'datastore-fs';
import initSqlJs from 'sql.js';
import type { RateLimitConfig } from '../client/rate-limit.ts';
import { SEED_LENGTH } from '../crypto/ed25519.ts';
import { createHomeserver, homeserverSchemas, type Homeserver } from '../homeserver.ts';
import { createP2PNode, type P2PNode } from '../p2p/node.ts';
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
  /** libp2p multiaddrs to listen on (TCP, or WebSockets with /ws); none: the host only dials out. */
  listen?: string[];
  /** Peers to dial at start (multiaddrs ending in /p2p/<peer id>); peers known from before are redialled too. */
  bootstrap?: string[];
}

export interface NodeHost {
  url: string;
  homeserver: Homeserver;
  p2p: P2PNode;
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
  let homeserver: Homeserver | undefined;
  // The one seed is both the Matrix signing key and the libp2p identity.
  const p2p = await createP2PNode({
    seed,
    transports: [tcp(), webSockets()],
    listen: options.listen ?? [],
    bootstrap: options.bootstrap ?? [],
    datastore: new FsDatastore(join(options.dataDir, 'peers')),
    handler: (request, remoteServerName) => homeserver!.federation.fetch(request, remoteServerName),
    onPeerConnected: (serverName) => homeserver?.federation.peerConnected(serverName),
    log: options.log,
  });
  homeserver = await createHomeserver({
    database,
    seed,
    registrationEnabled: options.registrationEnabled,
    rateLimits: options.rateLimits,
    log: options.log,
    federation: { transport: p2p.transport },
  });
  await homeserver.start();
  const core = homeserver;
  // /_hearth/status: who we are on the network and who we are connected to.
  const fetch = async (request: Request): Promise<Response> =>
    new URL(request.url).pathname === '/_hearth/status' ? Response.json(p2p.status(), { headers: { 'access-control-allow-origin': '*' } }) : core.fetch(request);
  const http = await startHttpServer(fetch, options.port ?? 8008, options.host ?? '127.0.0.1');
  return {
    url: http.url,
    homeserver: core,
    p2p,
    close: async () => {
      await http.close();
      await p2p.stop();
      await core.close();
    },
  };
}
