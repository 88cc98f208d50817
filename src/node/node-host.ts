import { mkdir, open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { tcp } from '@libp2p/tcp';
import { webSockets } from '@libp2p/websockets';
import { FsDatastore } from 'datastore-fs';
import initSqlJs from 'sql.js';
import type { RateLimitConfig } from '../client/rate-limit.ts';
import { SEED_LENGTH } from '../crypto/ed25519.ts';
import { createHomeserver, homeserverSchemas, type Homeserver } from '../homeserver.ts';
import { mediaAnswerBytes } from '../http/bounded-body.ts';
import { FederationUnreachable, type FederationTransport } from '../federation/transport.ts';
import { createP2PNode, type HearthStatus, type P2PNode } from '../p2p/node.ts';
import { DEFAULT_MEDIA_CONFIG, type MediaConfig } from '../media/media.ts';
import type { MailboxLimits } from '../mailbox/store.ts';
import { openDurableDatabase } from '../storage/durable-database.ts';
import { fetchPushGateway, type PushGateway } from '../sync/push-delivery.ts';
import { fsyncDirectory, openFilePersistence } from './file-persistence.ts';
import { startHttpServer } from './http-server.ts';
import { FileMediaStore } from './media-files.ts';
import { SharpThumbnailer } from './media-thumbnailer.ts';

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
  /** Media repository limits (m.upload.size, quota, refused types, remote cache). */
  media?: Partial<MediaConfig>;
  /** Serve as a circuit relay v2 for browsers (reservations, WebRTC signalling), with libp2p's relay limits lifted. */
  relay?: boolean;
  /** Hold mail for peers that cannot be reached until they collect it (src/mailbox); `true`: the default limits. */
  mailbox?: boolean | Partial<MailboxLimits>;
  /** How notifications reach push gateways; fetch unless a test gives another. */
  pushGateway?: PushGateway;
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

/**
 * The homeserver under Node: durable files in dataDir, HTTP on the loopback interface.
 * The HTTP port is taken first, so a port in use fails before anything is written
 * (requests that arrive while the rest starts wait for it). A failure part-way
 * closes what was opened, releasing the database lock.
 */
export async function startNodeHost(options: NodeHostOptions): Promise<NodeHost> {
  let handler: ((request: Request) => Promise<Response>) | undefined;
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  // Uploads as large as the media config allows, plus a request's framing, reach the core.
  const maxUploadBytes = { ...DEFAULT_MEDIA_CONFIG, ...options.media }.maxUploadBytes;
  const http = await startHttpServer(async (request) => (await ready, handler!(request)), options.port ?? 8008, options.host ?? '127.0.0.1', mediaAnswerBytes(maxUploadBytes));
  const undo: (() => Promise<unknown>)[] = [() => http.close()];
  try {
    await mkdir(options.dataDir, { recursive: true });
    const seed = await loadOrCreateSeed(join(options.dataDir, 'identity.seed'));
    const persistence = await openFilePersistence({ directory: join(options.dataDir, 'db') });
    undo.push(() => persistence.close());
    const database = await openDurableDatabase({ sqlJs: await initSqlJs(), persistence, schemas: homeserverSchemas });
    undo.push(() => database.close());
    // The core exists before libp2p starts, so the first request from a redialled peer finds it;
    // its outbound transport is the P2P node's, once that is up.
    let p2p: P2PNode | undefined;
    const transport: FederationTransport = {
      send: (destination, request, sendOptions) => (p2p ? p2p.transport.send(destination, request, sendOptions) : Promise.reject(new FederationUnreachable(destination, 'libp2p is not up yet'))),
    };
    const homeserver = await createHomeserver({
      database,
      seed,
      registrationEnabled: options.registrationEnabled,
      rateLimits: options.rateLimits,
      // Media bytes in files of their own under the data folder; only metadata in the database.
      media: { store: new FileMediaStore(join(options.dataDir, 'media')), thumbnailer: new SharpThumbnailer(), config: options.media },
      log: options.log,
      federation: { transport },
      mailbox: options.mailbox || undefined,
      // An always-on host with a network: it delivers to its users' push gateways.
      pushGateway: options.pushGateway ?? fetchPushGateway,
    });
    undo.push(() => homeserver.close());
    const peers = new FsDatastore(join(options.dataDir, 'peers'));
    await peers.open();
    undo.push(() => peers.close());
    // The one seed is both the Matrix signing key and the libp2p identity.
    p2p = await createP2PNode({
      seed,
      transports: [tcp(), webSockets()],
      listen: options.listen ?? [],
      bootstrap: options.bootstrap ?? [],
      relay: options.relay,
      datastore: peers,
      handler: homeserver.federation.fetch,
      // A peer that connects, or whose address we just learnt, is worth trying at once: its queue wakes.
      onPeerConnected: homeserver.federation.peerConnected,
      onPeerDiscovered: homeserver.federation.peerConnected,
      // Remote media comes back whole in one answer: let one as large as an upload may be (plus the multipart framing) through.
      limits: { maxResponseBytes: Math.max(4 * 1024 * 1024, mediaAnswerBytes(homeserver.services.media.config.maxUploadBytes)) },
      log: options.log,
    });
    const node = p2p;
    undo.push(() => node.stop());
    await homeserver.start();
    // /_hearth/status: who we are on the network and who we are connected to.
    handler = async (request: Request): Promise<Response> =>
      new URL(request.url).pathname === '/_hearth/status' ? Response.json(node.status() satisfies HearthStatus, { headers: { 'access-control-allow-origin': '*' } }) : homeserver.fetch(request);
    markReady();
    return {
      url: http.url,
      homeserver,
      p2p: node,
      close: async () => {
        await http.close();
        await node.stop();
        await peers.close();
        await homeserver.close();
      },
    };
  } catch (error) {
    for (const step of undo.reverse()) await step().catch(() => undefined);
    throw error;
  }
}
