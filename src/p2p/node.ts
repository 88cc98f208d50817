/**
 * The libp2p node that carries Hearth federation. Platform-free: the host injects
 * the transports (TCP and WebSockets under Node; WebSockets, WebRTC and relays in
 * the page) and the datastore the peer store persists to.
 */
import { noise } from '@chainsafe/libp2p-noise';
import { yamux } from '@chainsafe/libp2p-yamux';
import { bootstrap } from '@libp2p/bootstrap';
import { identify, identifyPush } from '@libp2p/identify';
import { DialError, type Connection, type ConnectionGater, type PeerId } from '@libp2p/interface';
import { multiaddr } from '@multiformats/multiaddr';
import { createLibp2p, type Libp2p, type Libp2pInit } from 'libp2p';
import { FederationUnreachable, type FederationTransport } from '../federation/transport.ts';
import { hearthDiscovery } from './discovery.ts';
import { createHttpTransport, HTTP_PROTOCOL, serveHttp, type HttpLimits, type InboundFederationHandler } from './http.ts';
import { watchForStalls, type StallWatchOptions } from './stall-watch.ts';
import { twinSentence, watchForTwins, type TwinReport } from './twin.ts';
import { privateKeyFromSeed, serverNameFromPeerId } from './identity.ts';
import { dialFailureLogger, forgetUndialablePeers, redialInBackground, webrtcDialAddresses } from './redial.ts';

/** Marks the peers we have been connected to, so a restarted node redials them. */
const KNOWN_PEER_TAG = 'hearth-peer';

const DAY = 24 * 60 * 60 * 1000;

/** How long a request waits for discovery to bring the record of a peer it holds no address for. */
const DISCOVERY_WAIT_MS = 10_000;

/** How often a peer reached only through a relay gets another WebRTC dial (preferWebRTC). */
const DIRECT_SWEEP_MS = 5_000;
/** How often, at most, a relayed connection whose peer has told us of no WebRTC address is asked again (identify). */
const IDENTIFY_AGAIN_MS = 10_000;
/** How long an asked-again identify may take. */
const IDENTIFY_TIMEOUT_MS = 10_000;

/**
 * Through a relay, but not WebRTC: a WebRTC address reads `…/p2p-circuit/webrtc/…`
 * (the relay only carried its signalling), and its link is direct.
 */
export const isRelayedAddress = (address: string): boolean => address.includes('/p2p-circuit') && !address.includes('/webrtc');

/** Reservations a Hearth relay accepts (libp2p's default is 15: too few for a relay that serves a network's browsers). */
export const RELAY_MAX_RESERVATIONS = 1024;

export interface PeerStatus {
  peer_id: string;
  server_name: string;
  multiaddrs: string[];
  /** How we reach it: `direct` when any connection to it is not through a relay (`/p2p-circuit`; WebRTC is direct). */
  via: 'direct' | 'relayed';
}

/** What `GET /_hearth/status` answers. */
export interface HearthStatus {
  server_name: string;
  peer_id: string;
  multiaddrs: string[];
  /** Peers connected now. */
  peers: PeerStatus[];
  /** Present while a peer sees another copy of this homeserver online (twin.ts): federation is off meanwhile. */
  twin?: TwinReport;
}

export interface P2PNodeOptions {
  /** The server's 32-byte identity seed: it is also the libp2p key. */
  seed: Uint8Array;
  /** Transport factories, chosen by the host. */
  transports: NonNullable<Libp2pInit['transports']>;
  /** Multiaddrs to listen on; none means the node only dials out. */
  listen?: string[];
  /**
   * The addresses others should dial, in place of those listened on (`--announce`): a peer behind a
   * reverse proxy that ends TLS listens on `/ip4/127.0.0.1/tcp/4001/ws` and announces
   * `/dns4/peer.example.org/tcp/443/wss`, the address a page can dial.
   */
  announce?: string[];
  /** Multiaddrs (with /p2p/<peer id>) to dial at start. No public list is built in. */
  bootstrap?: string[];
  /** Where the peer store persists; in memory when absent. */
  datastore?: Libp2pInit['datastore'];
  /** The core's inbound federation entry. */
  handler: InboundFederationHandler;
  limits?: Partial<HttpLimits>;
  /** How often each node re-announces itself on the discovery topic (ms). */
  announceIntervalMs?: number;
  /** New inbound connections accepted per second from one host (libp2p's default is 5). */
  inboundConnectionThreshold?: number;
  /** How long a peer's addresses are kept unseen (libp2p's default is an hour, too short to redial after a night off). */
  maxAddressAgeMs?: number;
  connectionGater?: ConnectionGater;
  /** Federation over relayed ("limited") connections: only once the relay is ours and lifts the limits. */
  runOnLimitedConnection?: boolean;
  /**
   * Run a circuit relay v2 server for other peers (browsers take reservations here and
   * signal WebRTC through it), with libp2p's limits (2 min, 128 KiB per relayed
   * connection) lifted, so connections through it are not "limited".
   */
  relay?: boolean;
  /**
   * Prefer direct WebRTC links: dial a peer's `/webrtc` address when we reach it only
   * through a relay (on discovery, and before each federation request). For hosts with
   * the WebRTC transport: the page.
   */
  preferWebRTC?: boolean;
  onPeerConnected?(serverName: string): void;
  onPeerDisconnected?(serverName: string): void;
  /** A peer's addresses became known (discovery or a first connection): it can be dialled by server name now. */
  onPeerDiscovered?(serverName: string): void;
  log?(message: string, error?: unknown): void;
  /** Watch for another copy of this identity online (twin.ts); off unless asked (`npm run serve` asks). */
  detectTwins?: boolean;
  /** Another copy of this identity was seen online (a report), or no longer is (undefined): see twin.ts. */
  onTwin?(report: TwinReport | undefined): void;
  /** How often a twin asks its witness again whether the other copy is still there (default 30 s). */
  twinRecheckMs?: number;
  /** When a connection with a request outstanding is taken for stalled, and how the peer is redialled (stall-watch.ts). */
  stalls?: Omit<StallWatchOptions, 'log'>;
}

export interface P2PNode {
  readonly peerId: string;
  readonly serverName: string;
  /** Our own addresses, each ending in /p2p/<peer id>. */
  multiaddrs(): string[];
  /** Peers connected now, with the addresses we are connected to them over. */
  peers(): PeerStatus[];
  status(): HearthStatus;
  /** Carries outbound federation requests to a server name. */
  readonly transport: FederationTransport;
  /** Connects to a multiaddr; resolves with the remote server name. */
  dial(address: string): Promise<string>;
  /** The libp2p node itself, for tests and benchmarks that look at its connections. */
  readonly libp2p: Libp2p;
  /** Resolves once every peer redialled at start (those we were connected to before) has been tried. */
  readonly redialed: Promise<void>;
  stop(): Promise<void>;
}

export async function createP2PNode(options: P2PNodeOptions): Promise<P2PNode> {
  const log = options.log ?? (() => {});
  // A failed dial is an everyday event: one line per peer, not a stack trace each time.
  const logDialFailure = dialFailureLogger(log);
  const bootstrapList = options.bootstrap ?? [];
  const maxAddressAge = options.maxAddressAgeMs ?? 30 * DAY;

  const discovery = hearthDiscovery({ intervalMs: options.announceIntervalMs ?? 10_000 });
  const libp2p = await createLibp2p({
    privateKey: await privateKeyFromSeed(options.seed),
    addresses: { listen: options.listen ?? [], ...(options.announce?.length ? { announce: options.announce } : {}) },
    transports: options.transports,
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    connectionGater: options.connectionGater,
    connectionManager: {
      inboundConnectionThreshold: options.inboundConnectionThreshold ?? 100,
      // A WebRTC dial is a relayed dial, signalling, ICE, DTLS and Noise: on a busy machine it outlasts
      // libp2p's 6 s per address (seen in tests), and a half-made link is worse than a slow one.
      ...(options.preferWebRTC ? { addressDialTimeout: 20_000, dialTimeout: 30_000 } : {}),
    },
    datastore: options.datastore,
    peerStore: { maxAddressAge, maxPeerAge: maxAddressAge },
    peerDiscovery: [
      discovery.peerDiscovery,
      ...(bootstrapList.length > 0 ? [bootstrap({ list: bootstrapList, timeout: 0 })] : []),
    ],
    services: {
      identify: identify(),
      // Our new addresses (a relay reservation, the WebRTC address it brings) reach the peers we are connected to
      // at once, over the connection they already have: without it they learnt them only from the next discovery
      // announcement, which floodsub may drop, and a page that had identified us too early never dialled WebRTC.
      identifyPush: identifyPush(),
      pubsub: discovery.pubsub,
      // Loaded only on a relay host (~0.5 MiB of heap, ~35 ms to load).
      ...(options.relay
        ? {
            relay: (await import('@libp2p/circuit-relay-v2')).circuitRelayServer({
              // No default limit: relayed connections carry federation and last as long as the peers want.
              reservations: { maxReservations: RELAY_MAX_RESERVATIONS, applyDefaultLimit: false },
            }),
          }
        : {}),
    },
    start: false,
  });
  let stopped = false;

  const self = serverNameFromPeerId(libp2p.peerId)!;
  const known = (peerId: PeerId, callback?: (serverName: string) => void) => {
    const serverName = serverNameFromPeerId(peerId);
    if (serverName !== undefined) callback?.(serverName);
  };

  libp2p.addEventListener('peer:discovery', ({ detail }) => {
    // A peer new to us may not know us yet either: tell it where we are.
    discovery.announce();
    if (detail.multiaddrs.length > 0) known(detail.id, options.onPeerDiscovered);
    void ensureDirect(detail.id);
  });
  // A new relay reservation or WebRTC address: peers dial us by these, so tell them now rather than an interval later.
  libp2p.addEventListener('self:peer:update', () => discovery.announce());
  libp2p.addEventListener('peer:connect', ({ detail: peerId }) => {
    if (serverNameFromPeerId(peerId) === undefined) return;
    libp2p.peerStore.merge(peerId, { tags: { [KNOWN_PEER_TAG]: { value: 50 } } }).catch((error) => log(`could not tag peer ${peerId}`, error));
    void ensureDirect(peerId);
  });
  // Every new connection, not only a peer's first (peer:connect): one made while an older one lingers,
  // stalled by a network that dropped, is the sign the network is back (stall-watch.ts), and whatever
  // waits for the peer goes now, in either direction of the dial. An identify is one more such sign.
  libp2p.addEventListener('connection:open', ({ detail: connection }) => known(connection.remotePeer, options.onPeerConnected));
  libp2p.addEventListener('peer:identify', ({ detail }) => known(detail.peerId, options.onPeerConnected));
  // A WebRTC link lost while the relay still joins us: make another.
  libp2p.addEventListener('connection:close', ({ detail: connection }) => {
    if (connection.remoteAddr.toString().includes('/webrtc')) void ensureDirect(connection.remotePeer);
  });
  libp2p.addEventListener('peer:disconnect', ({ detail: peerId }) => {
    known(peerId, options.onPeerDisconnected);
    keepBootstrapPeer(peerId);
  });

  /**
   * libp2p's own reconnect queue gives up after five tries (about half a minute): a relay
   * restarted after longer would never be seen again by a page, which no peer can dial
   * back. So a lost bootstrap peer is redialled until it answers: after 1 s, doubling up to 10 s (one failed dial per 10 s is cheap).
   */
  const bootstrapPeers = new Map(bootstrapList.flatMap((address) => {
    const peer = multiaddr(address).getComponents().findLast((c) => c.name === 'p2p')?.value;
    return peer ? [[peer, address] as const] : [];
  }));
  const redialing = new Set<string>();
  const redialTimers = new Set<ReturnType<typeof setTimeout>>();
  function keepBootstrapPeer(peerId: PeerId): void {
    const key = peerId.toString();
    const address = bootstrapPeers.get(key);
    if (address === undefined || redialing.has(key)) return;
    redialing.add(key);
    const attempt = (delay: number) => {
      if (stopped) return;
      const timer = setTimeout(() => {
        redialTimers.delete(timer);
        if (stopped || libp2p.getConnections(peerId).length > 0) return void redialing.delete(key);
        libp2p.dial(multiaddr(address)).then(
          () => redialing.delete(key),
          () => attempt(Math.min(delay * 2, 10_000)),
        );
      }, delay);
      redialTimers.add(timer);
    };
    attempt(1000);
  }

  /**
   * Dials the peer's WebRTC addresses when every connection to it goes through a relay.
   * libp2p itself, dialling by peer ID, reuses an unlimited relayed connection and never
   * tries WebRTC; we want the direct link, so federation does not depend on the relay.
   * Only the side with the lower peer ID dials (on discovery, on connection, before its sends,
   * when a link drops): two pages dialling each other at once made two half-open links that
   * both died (seen in the e2e test); the other side's sends meanwhile take the relayed connection.
   */
  const directDials = new Map<string, Promise<void>>();
  const identifiedAt = new WeakMap<Connection, number>();
  // What the node last said of each peer's direct link, so that the sweep says it again only when it changes.
  const said = new Map<string, string>();
  const sayOfPeer = (peerId: PeerId, line: string) => {
    if (said.get(peerId.toString()) === line) return;
    said.set(peerId.toString(), line);
    log(line);
  };
  const webrtcAddresses = async (peerId: PeerId) =>
    webrtcDialAddresses(((await libp2p.peerStore.get(peerId).catch(() => undefined))?.addresses ?? []).map((a) => a.multiaddr), peerId.toString());
  function ensureDirect(peerId: PeerId, signal?: AbortSignal): Promise<void> {
    if (!options.preferWebRTC || stopped || !(libp2p.peerId.toString() < peerId.toString())) return Promise.resolve();
    const open = libp2p.getConnections(peerId).filter((c) => c.status === 'open');
    const direct = open.find((c) => !isRelayedAddress(c.remoteAddr.toString()));
    if (direct) {
      sayOfPeer(peerId, `holds a direct connection to ${peerId} (${direct.remoteAddr.toString()}): no WebRTC dial`);
      return Promise.resolve();
    }
    const key = peerId.toString();
    const pending = directDials.get(key);
    if (pending) return pending;
    const dialing = (async () => {
      let addresses = await webrtcAddresses(peerId);
      // The identify that libp2p runs on a new connection fails silently now and then (seen across NATs: two
      // pages, each knowing only the other's relayed address, never tried WebRTC), or ran before the peer had its
      // relay reservation. Ask again, at most every IDENTIFY_AGAIN_MS per connection (the sweep comes every 5 s).
      const relayed = open.find((c) => Date.now() - (identifiedAt.get(c) ?? 0) >= IDENTIFY_AGAIN_MS);
      if (addresses.length === 0 && relayed) {
        identifiedAt.set(relayed, Date.now());
        // Bounded: an identify that never settled would hold this peer's entry in directDials, and every sweep after it.
        const bounded = AbortSignal.any([AbortSignal.timeout(IDENTIFY_TIMEOUT_MS), ...(signal ? [signal] : [])]);
        await libp2p.services.identify.identify(relayed, { signal: bounded }).catch((error: unknown) => logDialFailure('could not learn the addresses of', peerId, error));
        addresses = await webrtcAddresses(peerId);
        if (addresses.length === 0) sayOfPeer(peerId, `knows no WebRTC address of ${peerId} yet: reached through a relay only`);
      }
      for (const address of addresses) {
        try {
          const link = await libp2p.dial(address, { signal });
          // A WebRTC dial that times out can resolve with the relayed connection libp2p already held (seen in
          // across-nats' symmetric case, after 20 s): only a direct link to this peer is what was asked for.
          if (link.remotePeer.equals(peerId) && !isRelayedAddress(link.remoteAddr.toString())) return;
          throw new DialError(`the dial gave back the connection over ${link.remoteAddr}, not a WebRTC link`);
        } catch (error) {
          logDialFailure('could not open a WebRTC link to', `${peerId} over ${address}`, error);
        }
      }
    })().finally(() => directDials.delete(key));
    directDials.set(key, dialing);
    return dialing;
  }

  /**
   * A peer we hold no address for yet (a page that opened a moment ago, whose record discovery has not
   * brought yet) is waited for, up to DISCOVERY_WAIT_MS, rather than failed at once: an invite sent in
   * the first second after the other page opened failed with "no valid addresses" (seen across NATs).
   */
  async function untilKnown(peerId: PeerId, signal: AbortSignal): Promise<void> {
    const known = async () => libp2p.getConnections(peerId).length > 0 || ((await libp2p.peerStore.get(peerId).catch(() => undefined))?.addresses.length ?? 0) > 0;
    if (await known()) return;
    // Others answer a new record with theirs (discovery.ts): ours tells the network we are looking.
    discovery.announce();
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        libp2p.removeEventListener('peer:discovery', onPeer);
        libp2p.removeEventListener('peer:connect', onConnect);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const onPeer = ({ detail }: CustomEvent<{ id: PeerId }>) => detail.id.equals(peerId) && done();
      const onConnect = ({ detail }: CustomEvent<PeerId>) => detail.equals(peerId) && done();
      const timer = setTimeout(done, DISCOVERY_WAIT_MS);
      libp2p.addEventListener('peer:discovery', onPeer);
      libp2p.addEventListener('peer:connect', onConnect);
      signal.addEventListener('abort', done);
    });
  }

  // A WebRTC dial that failed (now and then one stalls until its timeout) is not retried by any event:
  // libp2p reports a peer as discovered only the first time, and the relayed connection stays open. So
  // every few seconds the peers reached only through a relay get another try (ensureDirect dials at most
  // once at a time per peer, and only from the lower peer ID).
  const directSweep = options.preferWebRTC
    ? setInterval(() => {
        for (const peerId of new Set(libp2p.getConnections().map((c) => c.remotePeer))) {
          if (serverNameFromPeerId(peerId) !== undefined) void ensureDirect(peerId);
        }
      }, DIRECT_SWEEP_MS)
    : undefined;

  // While another copy of this identity is online, federation is off both ways (twin.ts): what waits stays queued.
  let twin: TwinReport | undefined;
  const twins = options.detectTwins ? await watchForTwins(libp2p, {
    recheckMs: options.twinRecheckMs,
    log,
    onTwin: (report) => {
      twin = report;
      log(report ? `${twinSentence(report)}` : 'the other copy of this homeserver is gone: federating again');
      options.onTwin?.(report);
    },
  }) : undefined;
  const inbound: InboundFederationHandler = (request, remote) =>
    twin ? Promise.resolve(Response.json({ errcode: 'M_UNKNOWN', error: twinSentence(twin) }, { status: 503 })) : options.handler(request, remote);
  const stalls = await watchForStalls(libp2p, { ...options.stalls, log });
  await libp2p.handle(HTTP_PROTOCOL, serveHttp(inbound, { localServerName: self, limits: options.limits, log }), {
    runOnLimitedConnection: options.runOnLimitedConnection,
  });
  // Before start, so nothing learnt since is lost: forget the peers no one can dial again (pages known
  // only by relay and WebRTC addresses), then redial the rest in the background, a few at a time.
  const { toRedial } = await forgetUndialablePeers(libp2p, { tag: KNOWN_PEER_TAG, log });
  try {
    await libp2p.start();
  } catch (error) {
    // A listen address that cannot be had (a port in use): leave nothing running behind.
    stopped = true;
    clearInterval(directSweep);
    stalls.stop();
    await Promise.resolve(libp2p.stop()).catch(() => {});
    throw error;
  }
  // A restarted node catches up without --bootstrap: dial whoever we were connected to before.
  const redialed = redialInBackground(libp2p, toRedial, { isStopped: () => stopped, onDialFailed: (peer, error) => logDialFailure('could not redial', peer, error) });

  const connectedPeers = (): PeerStatus[] => {
    const byPeer = new Map<string, { peerId: PeerId; connections: Connection[] }>();
    for (const connection of libp2p.getConnections()) {
      const key = connection.remotePeer.toString();
      const entry = byPeer.get(key) ?? { peerId: connection.remotePeer, connections: [] };
      entry.connections.push(connection);
      byPeer.set(key, entry);
    }
    return [...byPeer.values()].flatMap(({ peerId, connections }) => {
      const serverName = serverNameFromPeerId(peerId);
      if (serverName === undefined) return [];
      const addresses = connections.map((c) => c.remoteAddr.toString());
      const via = addresses.some((address) => !isRelayedAddress(address)) ? 'direct' : 'relayed';
      return [{ peer_id: peerId.toString(), server_name: serverName, multiaddrs: addresses, via }];
    });
  };
  const multiaddrs = () => libp2p.getMultiaddrs().map(String);
  // Before a request, the lower side tries for a direct link; but with a connection open already (through a relay
  // of ours, unlimited) the request goes over it now rather than wait for that dial, which runs to its 20 s timeout
  // where no hole can be punched (a symmetric NAT): an invite then took 20 s per request. The link, once up, carries the next.
  const beforeDial = async (peerId: PeerId, signal: AbortSignal): Promise<void> => {
    const usable = libp2p.getConnections(peerId).some((c) => c.status === 'open' && (c.limits === undefined || options.runOnLimitedConnection === true));
    if (usable) return void ensureDirect(peerId);
    await untilKnown(peerId, signal);
    return ensureDirect(peerId, signal);
  };
  const outbound = createHttpTransport(libp2p, { limits: options.limits, runOnLimitedConnection: options.runOnLimitedConnection, beforeDial, track: stalls.track });

  return {
    peerId: libp2p.peerId.toString(),
    serverName: self,
    multiaddrs,
    peers: connectedPeers,
    status: () => ({ server_name: self, peer_id: libp2p.peerId.toString(), multiaddrs: multiaddrs(), peers: connectedPeers(), ...(twin ? { twin } : {}) }),
    transport: {
      send: (destination, request, sendOptions) => (twin ? Promise.reject(new FederationUnreachable(destination, twinSentence(twin))) : outbound.send(destination, request, sendOptions)),
    },
    async dial(address) {
      const connection = await libp2p.dial(multiaddr(address));
      const serverName = serverNameFromPeerId(connection.remotePeer);
      if (serverName === undefined) throw new Error(`${address} is not a Hearth peer`);
      return serverName;
    },
    libp2p,
    redialed,
    async stop() {
      stopped = true;
      for (const timer of redialTimers) clearTimeout(timer);
      clearInterval(directSweep);
      stalls.stop();
      await twins?.stop();
      await libp2p.stop();
    },
  };
}
