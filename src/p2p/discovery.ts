/**
 * Discovery: every Hearth node announces its peer ID and addresses on Hearth's own
 * pubsub topic (@libp2p/pubsub-peer-discovery over @libp2p/floodsub), and every
 * node, bootstrap or not, subscribes (the discovery module does, at start) and relays. A node that shares any peer with
 * another learns its addresses, and libp2p puts them in the peer store.
 */
import { floodsub, type FloodSub, type FloodSubComponents } from '@libp2p/floodsub';
import type { PeerId } from '@libp2p/interface';
import { PubSubPeerDiscovery, type PubSubPeerDiscoveryComponents } from '@libp2p/pubsub-peer-discovery';

/** Hearth's own topic: our network is our own, not the global libp2p one. */
export const DISCOVERY_TOPIC = 'hearth._peer-discovery._p2p._pubsub';

/**
 * The library announces once at start (to nobody yet) and then every interval, so a
 * newcomer would wait a whole interval to be heard of. We also announce the moment a
 * floodsub link to a neighbour works both ways: when the neighbour has told us its
 * subscriptions (its stream to us is open) and our stream to it is open. Announcing on
 * either alone loses messages: floodsub silently drops a send on a stream not yet open.
 * Once the newcomer's record has flooded out, the peers new to it answer with their own
 * (see `announce` on peer discovery in node.ts), over links now known to work.
 */
export function hearthDiscovery(options: { intervalMs: number }) {
  let discovery: PubSubPeerDiscovery | undefined;
  let pubsub: FloodSub | undefined;
  const streamsOpen = new Set<string>();

  let pending = false;
  const announce = () => {
    if (pending) return;
    pending = true;
    setTimeout(() => {
      pending = false;
      try {
        if (discovery?.isStarted()) discovery._broadcast();
      } catch {
        // Stopping: pubsub went first.
      }
    }, 0);
  };

  const announceIfLinked = (peerId: PeerId) => {
    if (streamsOpen.has(peerId.toString()) && pubsub?.getSubscribers(DISCOVERY_TOPIC).some((p) => p.equals(peerId))) announce();
  };

  const createPubsub = (components: FloodSubComponents): FloodSub => {
    const { registrar } = components;
    // floodsub's topology opens its stream to a peer in onConnect; we wrap it to learn when that is done.
    const watched: FloodSubComponents['registrar'] = Object.create(registrar, {
      register: {
        value: (protocol: string, topology: Parameters<typeof registrar.register>[1]) =>
          registrar.register(protocol, {
            ...topology,
            onConnect: async (peerId, connection) => {
              await topology.onConnect?.(peerId, connection);
              streamsOpen.add(peerId.toString());
              announceIfLinked(peerId);
            },
            onDisconnect: async (peerId) => {
              streamsOpen.delete(peerId.toString());
              await topology.onDisconnect?.(peerId);
            },
          }),
      },
    });
    pubsub = floodsub()({ peerId: components.peerId, privateKey: components.privateKey, logger: components.logger, registrar: watched });
    pubsub.addEventListener('subscription-change', ({ detail }) => {
      if (detail.subscriptions.some((s) => s.topic === DISCOVERY_TOPIC && s.subscribe)) announceIfLinked(detail.peerId);
    });
    return pubsub;
  };

  return {
    /** Register as the `pubsub` service. */
    pubsub: createPubsub,
    /** Add to `peerDiscovery`. */
    peerDiscovery: (components: PubSubPeerDiscoveryComponents) => (discovery = new PubSubPeerDiscovery(components, { topics: [DISCOVERY_TOPIC], interval: options.intervalMs })),
    /** Announce ourselves soon (calls within one tick make one announcement). */
    announce,
  };
}
