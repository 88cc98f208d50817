/**
 * The leader tab's libp2p node (issue 12, first slice): the page's half of
 * federation. The node runs here, in the window, because WebRTC exists only in
 * windows; the homeserver core stays in the Worker. Requests cross between them
 * through comlink (federation-bridge.ts).
 *
 * - Identity: the core's seed, so the node's peer ID is the server name's key.
 * - Transports: WebSockets (to Node peers), circuit relay v2 (a reservation on each
 *   bootstrap relay, so other browsers can reach us through any of them) and WebRTC
 *   (direct links to other browsers, signalled through a relay). Federation prefers
 *   the WebRTC link (`preferWebRTC`), so it goes on when the relay is gone.
 * - Bootstrap and ICE servers: `hearth-config.json` beside the page; absent,
 *   the node dials nobody until told. No public bootstrap list, no STUN.
 * - Peer store: IndexedDB (peer-datastore.ts), so a new leader redials known peers.
 */
import { circuitRelayTransport } from '@libp2p/circuit-relay-v2';
import type { ConnectionGater } from '@libp2p/interface';
import { webRTC, webRTCDirect } from '@libp2p/webrtc';
import { webSockets } from '@libp2p/websockets';
import * as Comlink from 'comlink';
import { mediaAnswerBytes } from '../src/http/bounded-body.ts';
import { createP2PNode, type P2PNode } from '../src/p2p/node.ts';
import { inboundOverCore, pageSendOver } from './federation-bridge.ts';
import { openPeerDatastore } from './peer-datastore.ts';
import { endLinksOnHangUp } from './webrtc-hang-up.ts';
import { settleInitChannelEvents } from './webrtc-init-channel.ts';
import { loadAddedBootstrap } from './bootstrap-peers.ts';
import type { CoreApi } from './homeserver.worker.ts';
import { MAX_REQUEST_BODY_BYTES } from './protocol.ts';

/** Beside the page (relative to it), so a site under a path prefix has its own. */
export const CONFIG_PATH = 'hearth-config.json';

/** What the serving site tells the page (`hearth-config.json` beside index.html). */
export interface HearthConfig {
  /** Multiaddrs ending in /p2p/<peer id>, dialled at start. */
  bootstrap: string[];
  /** For WebRTC. None by default (host candidates only: LAN and loopback), never the library's public STUN list. */
  iceServers: RTCIceServer[];
  /**
   * Let the node dial private addresses (loopback, LAN) and plain `ws://`, which the
   * browser's default gater refuses. `npm start` turns it on: its peer is on 127.0.0.1.
   */
  allowPrivateAddresses: boolean;
  /**
   * Watch for another copy of this homeserver online (src/p2p/twin.ts). On by default: a reloaded tab's
   * old connections that stay open for a while beside the new node's are not taken for twins, since a
   * witness asks the other connection first and a stopped node does not answer. `false` turns it off.
   */
  detectTwins: boolean;
}

export const NO_CONFIG: HearthConfig = { bootstrap: [], iceServers: [], allowPrivateAddresses: false, detectTwins: true };

/** Reads the origin's config; absent or unreadable, no bootstrap peers. */
export async function loadHearthConfig(log: (message: string, error?: unknown) => void = () => {}): Promise<HearthConfig> {
  let response: Response;
  try {
    response = await fetch(CONFIG_PATH, { cache: 'no-cache' });
  } catch (error) {
    log(`could not fetch ${CONFIG_PATH}`, error);
    return NO_CONFIG;
  }
  if (response.status === 404) return NO_CONFIG;
  try {
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    return parseHearthConfig(await response.json());
  } catch (error) {
    log(`${CONFIG_PATH} is not usable; starting with no bootstrap peers`, error);
    return NO_CONFIG;
  }
}

export function parseHearthConfig(value: unknown): HearthConfig {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TypeError('not a JSON object');
  const { bootstrap = [], iceServers = [], allowPrivateAddresses = false, detectTwins = true } = value as Record<string, unknown>;
  if (!Array.isArray(bootstrap) || !bootstrap.every((a) => typeof a === 'string')) throw new TypeError('bootstrap must be a list of multiaddrs');
  if (!Array.isArray(iceServers) || !iceServers.every((s) => typeof s === 'object' && s !== null && 'urls' in s)) throw new TypeError('iceServers must be a list of RTCIceServer');
  if (typeof allowPrivateAddresses !== 'boolean') throw new TypeError('allowPrivateAddresses must be a boolean');
  if (typeof detectTwins !== 'boolean') throw new TypeError('detectTwins must be a boolean');
  return { bootstrap, iceServers: iceServers as RTCIceServer[], allowPrivateAddresses, detectTwins };
}

export interface PageP2P {
  readonly node: P2PNode;
  readonly config: HearthConfig;
  /** Server names whose addresses the node has learnt (discovery or a connection): they can be dialled by name. */
  readonly reachable: ReadonlySet<string>;
  /** What this node dialled at start: the config's bootstrap list and the peers the person added (bootstrap-peers.ts). */
  readonly bootstrap: readonly string[];
  /** Dials a peer the person added in the panel; resolves with its server name. */
  dial(address: string): Promise<string>;
  /** Called whenever a peer connects, disconnects or is discovered, and whenever a connection opens or closes (how a peer is reached may change): for the page's peers panel. */
  subscribe(listener: () => void): () => void;
  stop(): Promise<void>;
}

/** Starts the leader's node over the core (once the core has started), and attaches it as the core's transport. */
export async function startPageP2P(core: Comlink.Remote<CoreApi>, options: { config?: HearthConfig; log?: (message: string, error?: unknown) => void } = {}): Promise<PageP2P> {
  const log = options.log ?? ((message, error) => console.warn(`hearth p2p: ${message}`, error ?? ''));
  const [config, seed, datastore] = await Promise.all([options.config ?? loadHearthConfig(log), core.p2pSeed(), openPeerDatastore(log)]);
  // The origin's list, then the peers added in the panel (kept in localStorage).
  const bootstrap = [...new Set([...config.bootstrap, ...loadAddedBootstrap()])];
  // Undefined keeps libp2p's browser gater: no private addresses, no insecure WebSockets.
  const connectionGater: ConnectionGater | undefined = config.allowPrivateAddresses ? { denyDialMultiaddr: () => false } : undefined;
  const reachable = new Set<string>();
  const listeners = new Set<() => void>();
  const changed = () => {
    for (const listener of listeners) listener();
  };
  const peerConnected = (serverName: string) => {
    // For the benchmark: page open → the first peer connected or known.
    if (reachable.size === 0) performance.mark('hearth-p2p-first-peer');
    reachable.add(serverName);
    void core.peerConnected(serverName).catch((error) => log(`could not tell the core of ${serverName}`, error));
    changed();
  };
  // WebKitGTK as Debian builds it has no RTCPeerConnection: there the node neither listens for nor dials
  // WebRTC, and reaches other browsers through its relays alone (the peers panel says so).
  const webrtc = typeof RTCPeerConnection === 'function';
  // Before any WebRTC dial: without it a dial from a busy page can hang on its `init` channel (webrtc-init-channel.ts).
  settleInitChannelEvents();
  // A page that closes hangs up its WebRTC links at once: end ours then, not when ICE or a ping finds them dead.
  endLinksOnHangUp();
  const node = await createP2PNode({
    seed,
    // Remote media as large as an upload here (the service worker's request bound) plus its multipart
    // framing crosses to us whole; the default 4 MiB would refuse it.
    limits: { maxResponseBytes: mediaAnswerBytes(MAX_REQUEST_BODY_BYTES) },
    // Always our own ICE list: webRTC() left to itself would use public STUN servers.
    // WebRTC-Direct dials a Node peer by IP and certificate hash (`/udp/…/webrtc-direct/certhash/…`): no domain, no CA.
    transports: [webSockets(), circuitRelayTransport(), ...(webrtc ? [webRTC({ rtcConfiguration: { iceServers: config.iceServers } }), webRTCDirect({ rtcConfiguration: { iceServers: config.iceServers } })] : [])],
    // Node peers reach us over the connections we open. Each '/p2p-circuit' is one reservation on some relay
    // (refilled when that relay goes): one per bootstrap peer, so with one relay down we are still reachable
    // through another. '/webrtc' takes WebRTC dials signalled over those reservations.
    listen: [...Array.from({ length: Math.max(1, bootstrap.length) }, () => '/p2p-circuit'), ...(webrtc ? ['/webrtc'] : [])],
    preferWebRTC: webrtc,
    bootstrap,
    // The peers this origin knew, so the next leader redials them too (peer-datastore.ts).
    datastore,
    connectionGater,
    handler: inboundOverCore((wire, remoteServerName) => core.federationFetch(wire, remoteServerName)),
    onPeerConnected: peerConnected,
    onPeerDiscovered: peerConnected,
    onPeerDisconnected: changed,
    // Another copy of this homeserver online (src/p2p/twin.ts): federation pauses; the top bar says why.
    detectTwins: config.detectTwins,
    onTwin: changed,
    log,
  });
  // How a peer is reached changes without a peer event: a WebRTC link opened to a peer already joined
  // through the relay (relayed → direct), or that link lost while the relay stays (direct → relayed).
  // peer:connect and peer:disconnect fire only for a peer's first and last connection, so each
  // connection's open and close redraws too.
  node.libp2p.addEventListener('connection:open', changed);
  node.libp2p.addEventListener('connection:close', changed);
  await core.attachFederation(Comlink.proxy(pageSendOver(node.transport)));
  // Peers that connected before the core could send through us (bootstrap dials start with the node):
  // their queues may have backed off meanwhile, so wake them now.
  for (const { server_name } of node.peers()) peerConnected(server_name);
  return {
    node,
    config,
    reachable,
    bootstrap,
    dial: (address) => node.dial(address),
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async stop() {
      await core.attachFederation(undefined).catch(() => {});
      await node.stop();
      await datastore.close();
    },
  };
}
