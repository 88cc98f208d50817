import { noise } from '@chainsafe/libp2p-noise';
import { yamux } from '@chainsafe/libp2p-yamux';
import { circuitRelayServer, circuitRelayTransport } from '@libp2p/circuit-relay-v2';
import { identify } from '@libp2p/identify';
import { tcp } from '@libp2p/tcp';
import { createLibp2p } from 'libp2p';
import { afterEach, describe, expect, it } from 'vitest';
import { FederationUnreachable } from '../../src/federation/transport.ts';
import type { InboundFederationHandler } from '../../src/p2p/http.ts';
import { peerIdFromServerName } from '../../src/p2p/identity.ts';
import { createP2PNode, type P2PNode, type P2PNodeOptions } from '../../src/p2p/node.ts';

// Issue 12: a Hearth relay lifts libp2p's relay limits, so a connection through it is not
// "limited" and federation (which never runs on limited connections) can use it; through a
// relay with libp2p's defaults it is limited, and federation refuses it rather than have the
// relay cut a request off at 128 KiB. Real libp2p over TCP on 127.0.0.1.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const echo: InboundFederationHandler = async (request, from) => Response.json({ from, body: request.method === 'GET' ? null : await request.json() });

async function node(options: Partial<P2PNodeOptions>): Promise<P2PNode> {
  const started = await createP2PNode({
    seed: crypto.getRandomValues(new Uint8Array(32)),
    transports: [tcp(), circuitRelayTransport()],
    handler: echo,
    inboundConnectionThreshold: Infinity,
    ...options,
  });
  cleanups.push(() => started.stop());
  return started;
}

/** A relay as libp2p ships it: 2 min and 128 KiB per relayed connection. */
async function defaultRelay(): Promise<string> {
  const relay = await createLibp2p({
    addresses: { listen: ['/ip4/127.0.0.1/tcp/0'] },
    transports: [tcp()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    services: { identify: identify(), relay: circuitRelayServer() },
  });
  cleanups.push(async () => {
    await relay.stop();
  });
  return relay.getMultiaddrs()[0]!.toString();
}

/** B takes a reservation on the relay; A dials B through it, knowing only B's circuit address. */
async function throughRelay(relayAddress: string): Promise<{ a: P2PNode; b: P2PNode }> {
  const b = await node({ listen: ['/p2p-circuit'], bootstrap: [relayAddress] });
  await expect.poll(() => b.multiaddrs().some((address) => address.includes('/p2p-circuit')), { timeout: 20_000 }).toBe(true);
  const a = await node({ bootstrap: [relayAddress] });
  await a.dial(b.multiaddrs().find((address) => address.includes('/p2p-circuit'))!);
  return { a, b };
}

const put = (body: unknown) => new Request('http://ignored/_matrix/federation/v1/send/t1', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('circuit relay', () => {
  it('through a Hearth relay (limits lifted) the connection is not limited, and federation runs over it, large bodies too', async () => {
    const relay = await node({ transports: [tcp()], listen: ['/ip4/127.0.0.1/tcp/0'], relay: true });
    const { a, b } = await throughRelay(relay.multiaddrs()[0]!);
    const connections = a.libp2p.getConnections(peerIdFromServerName(b.serverName)!);
    expect(connections.map((c) => c.remoteAddr.toString())).toEqual([expect.stringContaining('/p2p-circuit')]);
    expect(connections[0]!.limits).toBeUndefined();
    expect(a.peers().find((p) => p.server_name === b.serverName)?.via).toBe('relayed');
    // 300 KB each way: libp2p's default relay would have cut this connection at 128 KiB.
    const filler = 'x'.repeat(300_000);
    const response = await a.transport.send(b.serverName, put({ filler }));
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ from: a.serverName, body: { filler } });
  });

  it('through a relay with libp2p’s default limits the connection is limited, and federation refuses it', async () => {
    const { a, b } = await throughRelay(await defaultRelay());
    const connections = a.libp2p.getConnections(peerIdFromServerName(b.serverName)!);
    expect(connections).toHaveLength(1);
    expect(connections[0]!.limits).toBeDefined();
    await expect(a.transport.send(b.serverName, put({ hello: 'limited' }))).rejects.toBeInstanceOf(FederationUnreachable);
  });
});
