import { createServer, type Server, type Socket } from 'node:net';
import { generateKeyPair } from '@libp2p/crypto/keys';
import type { PeerId } from '@libp2p/interface';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { tcp } from '@libp2p/tcp';
import { multiaddr } from '@multiformats/multiaddr';
import { MemoryDatastore } from 'datastore-core';
import { afterEach, describe, expect, it } from 'vitest';
import type { InboundFederationHandler } from '../../src/p2p/http.ts';
import { createP2PNode, type P2PNode } from '../../src/p2p/node.ts';
import { REDIAL_CONCURRENCY } from '../../src/p2p/redial.ts';

// Issue 24, peers 2 and 3: a peer store that has seen many pages (relay and WebRTC addresses only)
// and many peers that no longer answer must not slow a new peer down, nor fill the log.

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const handler: InboundFederationHandler = async () => Response.json({});
const KNOWN_PEER_TAG = 'hearth-peer';
const newPeerId = async (): Promise<PeerId> => peerIdFromPrivateKey(await generateKeyPair('Ed25519'));

async function node(options: { datastore?: MemoryDatastore; listen?: boolean; log?: (message: string, error?: unknown) => void; transport?: ReturnType<typeof tcp> } = {}): Promise<P2PNode> {
  const started = await createP2PNode({
    seed: crypto.getRandomValues(new Uint8Array(32)),
    transports: [options.transport ?? tcp()],
    listen: options.listen ? ['/ip4/127.0.0.1/tcp/0'] : [],
    datastore: options.datastore,
    handler,
    log: options.log,
  });
  cleanups.push(() => started.stop());
  return started;
}

/** Fills the datastore's peer store, as a node that has run a long time leaves it. */
async function fill(datastore: MemoryDatastore, peers: { id: PeerId; addresses: string[] }[]): Promise<void> {
  const writer = await node({ datastore });
  for (const { id, addresses } of peers) {
    await writer.libp2p.peerStore.merge(id, { multiaddrs: addresses.map((a) => multiaddr(a)), tags: { [KNOWN_PEER_TAG]: { value: 50 } } });
  }
  await writer.stop();
}

/** TCP ports that accept and then say nothing, so a dial to them hangs until libp2p gives up. */
async function tarpits(count: number) {
  const servers: Server[] = [];
  const open = new Set<Socket>();
  for (let i = 0; i < count; i++) {
    const server = createServer((socket) => {
      open.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => open.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
  }
  cleanups.push(async () => {
    for (const socket of open) socket.destroy();
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  });
  return { addresses: servers.map((s) => `/ip4/127.0.0.1/tcp/${(s.address() as { port: number }).port}`) };
}

/**
 * libp2p's TCP transport, counting the dials this node makes to `watched` addresses. Counted where
 * the node dials, not where the ports accept: an OS-chosen port may be one another test's peer had,
 * and that test's redials of it then reach the tarpit too (6 at once, seen in a full `npm test`).
 */
function countingTcp(watched: string[]) {
  const counts = { started: 0, settled: 0, mostAtOnce: 0 };
  const transport: ReturnType<typeof tcp> = (components) => {
    const inner = tcp()(components);
    const dial = inner.dial.bind(inner);
    inner.dial = async (address, dialOptions) => {
      if (!watched.includes(address.toString().replace(/\/p2p\/.*$/, ''))) return dial(address, dialOptions);
      counts.started++;
      counts.mostAtOnce = Math.max(counts.mostAtOnce, counts.started - counts.settled);
      try {
        return await dial(address, dialOptions);
      } finally {
        counts.settled++;
      }
    };
    return inner;
  };
  return { transport, counts };
}

describe('the peer store at start', () => {
  it('forgets the peers no one can dial again, and redials the rest a few at a time, so a new peer is reached at once', async () => {
    const datastore = new MemoryDatastore();
    const relay = await newPeerId();
    const relayAddress = `/ip4/127.0.0.1/tcp/9/ws/p2p/${relay}`;
    // 300 pages known only through a relay or by WebRTC, and 120 peers whose ports now say nothing.
    const pages = await Promise.all(Array.from({ length: 300 }, async () => {
      const id = await newPeerId();
      return { id, addresses: [`${relayAddress}/p2p-circuit/p2p/${id}`, `${relayAddress}/p2p-circuit/webrtc/p2p/${id}`] };
    }));
    const silent = await tarpits(120);
    const gone = await Promise.all(silent.addresses.map(async (address) => ({ id: await newPeerId(), addresses: [address] })));
    await fill(datastore, [...pages, ...gone]);

    const newcomer = await node({ listen: true });
    const dials = countingTcp(silent.addresses);
    const restarted = await node({ datastore, transport: dials.transport });
    // The pages are gone from the store; the peers with an address worth trying are kept.
    const stored = new Set((await restarted.libp2p.peerStore.all()).map((p) => p.id.toString()));
    for (const page of pages) expect(stored.has(page.id.toString())).toBe(false);
    for (const peer of gone) expect(stored.has(peer.id.toString())).toBe(true);

    // A new peer is reached while the redials still hang: its dial did not queue behind theirs.
    const connected = new Promise<void>((resolve) =>
      restarted.libp2p.addEventListener('peer:connect', ({ detail }) => void (detail.toString() === newcomer.peerId && resolve())),
    );
    await restarted.dial(newcomer.multiaddrs()[0]!);
    await connected;
    const { started, settled, mostAtOnce } = dials.counts;
    expect(settled, 'no hanging redial had ended yet').toBe(0);
    expect(mostAtOnce).toBeLessThanOrEqual(REDIAL_CONCURRENCY);
    expect(started).toBeGreaterThan(0);
    expect(started).toBeLessThanOrEqual(REDIAL_CONCURRENCY);
  });

  it('a peer that cannot be redialled is one line in the log, with no stack trace', async () => {
    const datastore = new MemoryDatastore();
    // A port that was open and is closed now: the redial is refused.
    const closedPort = (await tarpits(1)).addresses[0]!;
    await cleanups.pop()!();
    const peer = await newPeerId();
    await fill(datastore, [{ id: peer, addresses: [closedPort] }]);
    const lines: [string, unknown][] = [];
    const restarted = await node({ datastore, log: (message, error) => lines.push([message, error]) });
    await restarted.redialed;
    const about = lines.filter(([message]) => message.includes(peer.toString()));
    expect(about).toHaveLength(1);
    expect(about[0]![0]).toMatch(new RegExp(`^could not redial ${peer}: \\w+: `));
    expect(about[0]![0]).not.toContain('\n');
    expect(about[0]![1]).toBeUndefined();
  });
});
