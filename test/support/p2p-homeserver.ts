import { tcp } from '@libp2p/tcp';
import initSqlJs from 'sql.js';
import { createHomeserver, homeserverSchemas, type Homeserver } from '../../src/homeserver.ts';
import { startHttpServer } from '../../src/node/http-server.ts';
import type { HttpLimits } from '../../src/p2p/http.ts';
import { createP2PNode, type P2PNode } from '../../src/p2p/node.ts';
import { openSqlJsDatabase } from '../../src/storage/sqljs-database.ts';

export interface P2PHomeserver {
  url: string;
  homeserver: Homeserver;
  p2p: P2PNode;
  close(): Promise<void>;
}

/**
 * A homeserver (in-memory sql.js) federating over a real libp2p node on
 * 127.0.0.1 with an OS-chosen TCP port, its client API over real HTTP.
 */
export async function startP2PHomeserver(options: { bootstrap?: string[]; seed?: Uint8Array; limits?: Partial<HttpLimits> } = {}): Promise<P2PHomeserver> {
  const seed = options.seed ?? crypto.getRandomValues(new Uint8Array(32));
  let homeserver: Homeserver | undefined;
  const p2p = await createP2PNode({
    seed,
    transports: [tcp()],
    listen: ['/ip4/127.0.0.1/tcp/0'],
    bootstrap: options.bootstrap,
    announceIntervalMs: 1000,
    limits: options.limits,
    handler: (request, remote) => homeserver!.federation.fetch(request, remote),
    onPeerConnected: (name) => homeserver?.federation.peerConnected(name),
  });
  const database = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: homeserverSchemas });
  homeserver = await createHomeserver({
    database,
    seed,
    rateLimits: false,
    passwordIterations: 1000,
    log: () => {},
    federation: { transport: p2p.transport, backoff: { initialMs: 100, maxMs: 1000, refusedMs: 500 } },
  });
  await homeserver.start();
  const http = await startHttpServer(homeserver.fetch);
  return {
    url: http.url,
    homeserver,
    p2p,
    close: async () => {
      await http.close();
      await p2p.stop();
      await homeserver!.close();
    },
  };
}
