import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RateLimitConfig } from '../http/rate-limit.ts';
import { defaultEd25519Backend, SEED_LENGTH } from '../crypto/ed25519.ts';
import { serverNameFromSeed } from '../crypto/identity.ts';
import { webRandomBytes } from '../crypto/random.ts';
import type { ServerSigningKeys } from '../federation/signing-keys.ts';
import { transportByName } from '../federation/transport-by-name.ts';
import { createHomeserver, homeserverSchemas, type Homeserver } from '../homeserver.ts';
import { mediaAnswerBytes } from '../http/bounded-body.ts';
import { FederationUnreachable, type FederationTransport } from '../federation/transport.ts';
import type { HearthStatus, P2PNode } from '../p2p/node.ts';
import { DEFAULT_MEDIA_CONFIG, type MediaConfig } from '../media/config.ts';
import type { MailboxLimits } from '../mailbox/store.ts';
import { fetchPushGateway, type PushGateway } from '../sync/push-delivery.ts';
import { writeFileDurably } from './file-persistence.ts';
import { startHttpServer, type RunningHttpServer } from './http-server.ts';
import type { HttpsFederationOptions, HttpsFederationTransport } from './https-federation.ts';
import { FileMediaStore } from './media-files.ts';
import { openNodeDatabase, type NodeStorage } from './node-database.ts';
import { SharpThumbnailer } from './media-thumbnailer.ts';
import { traceFederation } from './federation-trace.ts';
import { stableListen } from './listen-ports.ts';
import { startControlSocket } from './control-socket.ts';
import { knowsPeers, lazyP2PNode } from './lazy-p2p.ts';

export interface NodeHostOptions {
  dataDir: string;
  /** The database engine (`--storage`): native SQLite (default) or sql.js with its redo log, as in the browser (node-database.ts). */
  storage?: NodeStorage;
  port?: number;
  host?: string;
  registrationEnabled?: boolean;
  /** Guest accounts (`--allow-guests`): off unless asked for. */
  allowGuests?: boolean;
  rateLimits?: RateLimitConfig | false;
  log?: (message: string, error?: unknown) => void;
  /** libp2p multiaddrs to listen on (TCP, or WebSockets with /ws, or secure WebSockets with /wss and `tls`); none: the host only dials out. */
  listen?: string[];
  /** The libp2p addresses peers are told to dial instead (`--announce`): a public name in front of a reverse proxy that ends TLS. */
  announce?: string[];
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
  /**
   * A DNS name (or IP literal), with an optional port (`--server-name`): the host is an ordinary
   * Matrix homeserver of that name over HTTPS, `tls` its certificate. Its signing key lives in
   * `<data>/signing-keys.json`; other names are reached over HTTPS, hex names over libp2p.
   */
  serverName?: string;
  /**
   * PEM certificate chain and key (`--tls-cert`, `--tls-key`): required with serverName (the HTTPS
   * homeserver), and what a `/wss` listen address presents to the browsers that dial it.
   */
  tls?: { cert: string; key: string };
  /** A second HTTPS port that serves the server-server API (`--federation-port`). */
  federationPort?: number;
  /** Notaries asked for the keys of a server that cannot be reached (`--trusted-key-server`). */
  trustedKeyServers?: string[];
  /** A new signing key before start; the old one stays served under old_verify_keys (`--rotate-key`). */
  rotateKey?: boolean;
  /** How the HTTPS federation transport resolves and trusts (tests: their DNS server, their CA). */
  https?: HttpsFederationOptions;
  /** A file that gets every inbound server-server exchange as a JSON line (`federation-trace.ts`). */
  traceFederation?: string;
  /** Stop federating while a peer sees another running copy of this identity (src/p2p/twin.ts); `npm run serve` turns it on. */
  detectTwins?: boolean;
  /** The deadline of one federation exchange, libp2p or HTTPS (30 s by default; `HEARTH_FEDERATION_TIMEOUT_MS` for `npm run serve`). */
  federationTimeoutMs?: number;
}

export interface NodeHost {
  url: string;
  /** The --federation-port listener's URL, when there is one. */
  federationUrl?: string;
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
  await writeFileDurably(path, seed);
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
  const maxRequestBytes = mediaAnswerBytes({ ...DEFAULT_MEDIA_CONFIG, ...options.media }.maxUploadBytes);
  const hostname = options.host ?? '127.0.0.1';
  const client = async (request: Request) => (await ready, handler!(request));
  let federationHandler: ((request: Request, remoteServerName: string | undefined) => Promise<Response>) | undefined;
  const federation = async (request: Request, remoteServerName: string | undefined) => (await ready, federationHandler!(request, remoteServerName));
  if (options.serverName !== undefined && !options.tls) throw new Error('a host with a server name needs a TLS certificate and key');
  const tls = options.serverName !== undefined ? options.tls : undefined;
  // A DNS-named host speaks HTTPS, the client and the server-server API on one port (and on --federation-port the latter).
  // The HTTPS modules (server, federation transport, signing key file) are loaded only there.
  const httpsServer = tls ? await import('./https-server.ts') : undefined;
  const http = tls && httpsServer
    ? await httpsServer.startHttpsServer(httpsServer.routeByApi({ client, federation }), { ...tls, port: options.port ?? 8448, host: hostname, maxRequestBytes })
    : await startHttpServer(client, options.port ?? 8008, hostname, maxRequestBytes);
  const undo: (() => Promise<unknown>)[] = [() => http.close()];
  try {
    let federationListener: RunningHttpServer | undefined;
    if (tls && httpsServer && options.federationPort !== undefined) {
      federationListener = await httpsServer.startHttpsServer(httpsServer.routeByApi({ client: async () => Response.json({ errcode: 'M_UNRECOGNIZED', error: 'this port serves the server-server API only' }, { status: 404 }), federation }), {
        ...tls,
        port: options.federationPort,
        host: hostname,
        maxRequestBytes,
      });
      const listener = federationListener;
      undo.push(() => listener.close());
    }
    await mkdir(options.dataDir, { recursive: true });
    const seed = await loadOrCreateSeed(join(options.dataDir, 'identity.seed'));
    // <data>/db/hearth.sqlite (native, the default; a sql.js folder found there is migrated into it first), or sql.js's snapshot + redo log files.
    const database = await openNodeDatabase({ directory: join(options.dataDir, 'db'), schemas: homeserverSchemas, storage: options.storage, log: options.log });
    undo.push(() => database.close());
    // `npm run export` on a running host asks it here for a copy of the database (control-socket.ts).
    // portable.ts is loaded when an export asks, not at start (~2 MiB of heap).
    const control = await startControlSocket(options.dataDir, { snapshot: async (file) => (await import('./portable.ts')).snapshotDatabase(database, file) }, options.log);
    undo.push(async () => control?.close());
    // The core exists before libp2p starts, so the first request from a redialled peer finds it;
    // its outbound transport is the P2P node's, once that is up.
    let p2p: P2PNode | undefined;
    const libp2pTransport: FederationTransport = {
      send: (destination, request, sendOptions) => (p2p ? p2p.transport.send(destination, request, sendOptions) : Promise.reject(new FederationUnreachable(destination, 'libp2p is not up yet'))),
    };
    // A DNS-named host: its own ed25519 key (ed25519:a_…) kept in the data folder, and HTTPS for every name that is not a Hearth peer's.
    let https: HttpsFederationTransport | undefined;
    let dnsIdentity: { serverName: string; signingKeys: ServerSigningKeys; trustedKeyServers?: string[] } | undefined;
    if (tls) {
      const [{ ServerSigningKeys }, { signingKeyFile }, { createHttpsFederationTransport }] = await Promise.all([import('../federation/signing-keys.ts'), import('./signing-key-file.ts'), import('./https-federation.ts')]);
      const signingKeys = await ServerSigningKeys.open({ storage: signingKeyFile(join(options.dataDir, 'signing-keys.json')), ed25519: await defaultEd25519Backend(), random: webRandomBytes, now: Date.now });
      if (options.rotateKey) await signingKeys.rotate();
      dnsIdentity = { serverName: options.serverName!, signingKeys, trustedKeyServers: options.trustedKeyServers };
      const transport = createHttpsFederationTransport(options.federationTimeoutMs ? { ...options.https, limits: { ...options.https?.limits, timeoutMs: options.federationTimeoutMs } } : options.https);
      https = transport;
      undo.push(async () => transport.close());
    }
    const transport = https ? transportByName({ hearth: libp2pTransport, https }) : libp2pTransport;
    const homeserver = await createHomeserver({
      dnsIdentity,
      database,
      seed,
      registrationEnabled: options.registrationEnabled,
      allowGuests: options.allowGuests,
      rateLimits: options.rateLimits,
      // --no-rate-limits turns off both APIs' limits.
      ...(options.rateLimits === false ? { federationRateLimits: false as const } : {}),
      // Media bytes in files of their own under the data folder; only metadata in the database.
      media: { store: new FileMediaStore(join(options.dataDir, 'media')), thumbnailer: new SharpThumbnailer(), config: options.media },
      log: options.log,
      federation: { transport },
      mailbox: options.mailbox || undefined,
      // An always-on host with a network: it delivers to its users' push gateways.
      pushGateway: options.pushGateway ?? fetchPushGateway,
    });
    undo.push(() => homeserver.close());
    const inbound = options.traceFederation ? traceFederation(homeserver.federation.fetch, options.traceFederation) : homeserver.federation.fetch;
    const peersDirectory = join(options.dataDir, 'peers');
    // The one seed is both the Matrix signing key and the libp2p identity. A listen address that asks for
    // any port keeps the one it got (<data>/listen.json), so the peers that knew us find us after a restart.
    const ports = await stableListen(options.dataDir, options.listen ?? []);
    // libp2p and its transports are loaded as the node starts: at start on a host that federates over
    // libp2p, at its first federation request on one that has nothing to listen on or dial (lazy-p2p.ts).
    const startNode = async (listen: string[]): Promise<P2PNode> => {
      const [{ tcp }, { webSockets }, { FsDatastore }, { createP2PNode }] = await Promise.all([import('@libp2p/tcp'), import('@libp2p/websockets'), import('datastore-fs'), import('../p2p/node.ts')]);
      // WebRTC-Direct (`/udp/P/webrtc-direct`): a browser dials the host by IP and certificate hash, no domain, no CA.
      // Loaded only for such an address (node-datachannel, a native module).
      const webRTCDirect = listen.some((address) => address.includes('/webrtc-direct')) ? (await import('@libp2p/webrtc')).webRTCDirect : undefined;
      // Its certificate is kept, so its address (which carries the certificate's hash) stays the same across restarts.
      const certificate = webRTCDirect ? await (await import('./webrtc-direct-certificate.ts')).loadOrCreateWebRTCDirectCertificate(options.dataDir) : undefined;
      const peers = new FsDatastore(peersDirectory);
      await peers.open();
      try {
        const node = await createP2PNode({
          seed,
          // A /wss listen address presents the host's certificate: pages served over HTTPS dial only wss://.
          transports: [tcp(), webSockets(options.tls ? { https: { cert: options.tls.cert, key: options.tls.key } } : {}), ...(webRTCDirect ? [webRTCDirect({ certificate })] : [])],
          listen,
          announce: options.announce,
          bootstrap: options.bootstrap ?? [],
          relay: options.relay,
          detectTwins: options.detectTwins,
          datastore: peers,
          handler: inbound,
          // A peer that connects, or whose address we just learnt, is worth trying at once: its queue wakes.
          onPeerConnected: homeserver.federation.peerConnected,
          onPeerDiscovered: homeserver.federation.peerConnected,
          // Remote media comes back whole in one answer: let one as large as an upload may be (plus the multipart framing) through.
          limits: {
            maxResponseBytes: Math.max(4 * 1024 * 1024, mediaAnswerBytes(homeserver.services.media.config.maxUploadBytes)),
            ...(options.federationTimeoutMs ? { timeoutMs: options.federationTimeoutMs } : {}),
          },
          log: options.log,
        });
        return { ...node, stop: async () => (await node.stop(), await peers.close()) };
      } catch (error) {
        await peers.close();
        throw error;
      }
    };
    let listen = ports.addresses;
    const federatesAtStart = listen.length > 0 || (options.bootstrap ?? []).length > 0 || Boolean(options.relay) || Boolean(options.mailbox) || (await knowsPeers(peersDirectory));
    if (federatesAtStart) {
      try {
        p2p = await startNode(listen);
      } catch (error) {
        if (!ports.reused) throw error;
        options.log?.(`could not listen on ${listen.join(', ')} again (${(error as Error).message}); listening on new ports`);
        listen = await ports.fresh();
        p2p = await startNode(listen);
      }
      await ports.save(listen);
    } else {
      // Its libp2p name is the seed's (hex) even on a DNS-named host.
      p2p = lazyP2PNode(await serverNameFromSeed(seed), () => startNode([]));
    }
    const node = p2p;
    undo.push(() => node.stop());
    await homeserver.start();
    federationHandler = inbound;
    // /_hearth/status: who we are on the network and who we are connected to.
    handler = async (request: Request): Promise<Response> =>
      new URL(request.url).pathname === '/_hearth/status' ? Response.json(node.status() satisfies HearthStatus, { headers: { 'access-control-allow-origin': '*' } }) : homeserver.fetch(request);
    markReady();
    return {
      url: http.url,
      ...(federationListener ? { federationUrl: federationListener.url } : {}),
      homeserver,
      p2p: node,
      close: async () => {
        await http.close();
        await control?.close();
        await federationListener?.close();
        https?.close();
        await node.stop();
        await homeserver.close();
      },
    };
  } catch (error) {
    for (const step of undo.reverse()) await step().catch(() => undefined);
    throw error;
  }
}
