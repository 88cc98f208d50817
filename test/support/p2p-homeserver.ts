import { join } from 'node:path';
import type { PeerId } from '@libp2p/interface';
import { tcp } from '@libp2p/tcp';
import initSqlJs from 'sql.js';
import { createHomeserver, homeserverSchemas, type Homeserver, type HomeserverOptions } from '../../src/homeserver.ts';
import { openFilePersistence } from '../../src/node/file-persistence.ts';
import { startHttpServer } from '../../src/node/http-server.ts';
import type { HttpLimits } from '../../src/p2p/http.ts';
import { serverNameFromPeerId } from '../../src/p2p/identity.ts';
import { createP2PNode, type P2PNode } from '../../src/p2p/node.ts';
import type { Database } from '../../src/storage/database.ts';
import { openDurableDatabase } from '../../src/storage/durable-database.ts';
import { openSqlJsDatabase } from '../../src/storage/sqljs-database.ts';

export interface P2PHomeserver {
  url: string;
  homeserver: Homeserver;
  p2p: P2PNode;
  database: Database;
  close(): Promise<void>;
}

export interface P2PHomeserverOptions {
  bootstrap?: string[];
  seed?: Uint8Array;
  limits?: Partial<HttpLimits>;
  /** Keep the database in files here (so a peer can stop and come back with its data); in memory otherwise. */
  dataDir?: string;
  /** Hold mail for others (createHomeserver's `mailbox`). */
  mailbox?: HomeserverOptions['mailbox'];
  /** Servers this node never connects with, either way (libp2p's connection gater). */
  refuse?: (serverName: string) => boolean;
  /** Called with the homeserver before it starts (to listen for what it does from its first moment). */
  onCreated?: (homeserver: Homeserver) => void;
  /** Stands between the libp2p node and the homeserver's federation API (fault injection: hold, fail or pass each inbound request). */
  inbound?: (request: Request, remoteServerName: string, next: (request: Request) => Promise<Response>) => Promise<Response>;
  /** Where the homeserver's log lines go (nowhere by default). */
  log?: HomeserverOptions['log'];
  /** The per-origin federation limits (the homeserver's defaults unless given; false: none). */
  federationRateLimits?: HomeserverOptions['federationRateLimits'];
}

/**
 * A homeserver federating over a real libp2p node on 127.0.0.1 with an OS-chosen
 * TCP port, its client API over real HTTP.
 */
export async function startP2PHomeserver(options: P2PHomeserverOptions = {}): Promise<P2PHomeserver> {
  const seed = options.seed ?? crypto.getRandomValues(new Uint8Array(32));
  let homeserver: Homeserver | undefined;
  const refused = (peerId: PeerId) => {
    const name = serverNameFromPeerId(peerId);
    return name !== undefined && (options.refuse?.(name) ?? false);
  };
  const p2p = await createP2PNode({
    seed,
    transports: [tcp()],
    listen: ['/ip4/127.0.0.1/tcp/0'],
    bootstrap: options.bootstrap,
    announceIntervalMs: 1000,
    limits: options.limits,
    connectionGater: options.refuse ? { denyDialPeer: refused, denyInboundEncryptedConnection: refused, denyOutboundEncryptedConnection: refused } : undefined,
    handler: (request, remote) => {
      const next = (r: Request) => homeserver!.federation.fetch(r, remote);
      return options.inbound ? options.inbound(request, remote, next) : next(request);
    },
    onPeerConnected: (name) => homeserver?.federation.peerConnected(name),
  });
  const sqlJs = await initSqlJs();
  const database = options.dataDir
    ? await openDurableDatabase({ sqlJs, persistence: await openFilePersistence({ directory: join(options.dataDir, 'db') }), schemas: homeserverSchemas })
    : await openSqlJsDatabase({ sqlJs, schemas: homeserverSchemas });
  homeserver = await createHomeserver({
    database,
    seed,
    rateLimits: false,
    passwordIterations: 1000,
    log: options.log ?? (() => {}),
    ...(options.federationRateLimits !== undefined ? { federationRateLimits: options.federationRateLimits } : {}),
    mailbox: options.mailbox,
    federation: { transport: p2p.transport, backoff: { initialMs: 100, maxMs: 1000, refusedMs: 500 } },
  });
  options.onCreated?.(homeserver);
  await homeserver.start();
  // Peers that connected while the homeserver was being made were not told to it.
  for (const peer of p2p.peers()) homeserver.federation.peerConnected(peer.server_name);
  const http = await startHttpServer(homeserver.fetch);
  return {
    url: http.url,
    homeserver,
    p2p,
    database,
    close: async () => {
      await http.close();
      await p2p.stop();
      await homeserver!.close();
    },
  };
}
