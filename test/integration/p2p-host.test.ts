import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { NodeHost } from '../../src/node/node-host.ts';
import type { HearthStatus } from '../../src/p2p/node.ts';
import { spawnHearth, stopAllHearths } from '../support/hearth-process.ts';
import { startNodePeer } from '../support/node-peer.ts';

// The Node host's libp2p side: /_hearth/status over real HTTP, and what `npm run serve` prints.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await stopAllHearths();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function dataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'hearth-p2p-host-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function host(listen: string[], bootstrap: string[] = []): Promise<NodeHost> {
  const started = await startNodePeer({ listen, bootstrap });
  cleanups.push(() => started.close());
  return started;
}

const status = async (url: string): Promise<HearthStatus> => (await fetch(`${url}/_hearth/status`)).json();
const version = (to: NodeHost, from: NodeHost) => from.p2p.transport.send(to.homeserver.serverName, new Request('http://x/_matrix/federation/v1/version'));

describe('the Node host on libp2p', () => {
  it('answers /_hearth/status with who it is and who it is connected to', async () => {
    const a = await host(['/ip4/127.0.0.1/tcp/0']);
    const b = await host(['/ip4/127.0.0.1/tcp/0']);
    await b.p2p.dial(a.p2p.multiaddrs()[0]!);
    // A has surely seen the connection once it has answered B over it.
    expect((await version(a, b)).status).toBe(200);

    const [ofA, ofB] = await Promise.all([status(a.url), status(b.url)]);
    expect(ofA).toMatchObject({ server_name: a.homeserver.serverName, peer_id: a.p2p.peerId, multiaddrs: a.p2p.multiaddrs() });
    expect(ofA.multiaddrs[0]).toMatch(new RegExp(`^/ip4/127\\.0\\.0\\.1/tcp/\\d+/p2p/${a.p2p.peerId}$`));
    expect(ofA.peers).toEqual([{ peer_id: b.p2p.peerId, server_name: b.homeserver.serverName, multiaddrs: [expect.stringMatching(/^\/ip4\/127\.0\.0\.1\/tcp\/\d+/)], via: 'direct' }]);
    expect(ofB.peers.map((p) => p.server_name)).toEqual([a.homeserver.serverName]);
  });

  it('federates over WebSockets too (Node 20 dials them with the ws polyfill)', async () => {
    const a = await host(['/ip4/127.0.0.1/tcp/0/ws']);
    const b = await host([], [a.p2p.multiaddrs()[0]!]);
    expect(a.p2p.multiaddrs()[0]).toMatch(/\/ws\/p2p\//);
    expect((await version(a, b)).status).toBe(200);
    expect((await status(b.url)).multiaddrs).toEqual([]);
  });

  it('with nothing to listen on or dial, starts libp2p at its first federation request, and says who it is before', async () => {
    const a = await host(['/ip4/127.0.0.1/tcp/0']);
    const b = await host([]);
    expect(() => b.p2p.libp2p).toThrow(/has not started/);
    expect(await status(b.url)).toEqual({ server_name: b.homeserver.serverName, peer_id: b.p2p.peerId, multiaddrs: [], peers: [] });
    expect(await b.p2p.dial(a.p2p.multiaddrs()[0]!)).toBe(a.homeserver.serverName);
    expect(b.p2p.libp2p.peerId.toString()).toBe(b.p2p.peerId);
    expect((await version(a, b)).status).toBe(200);
    expect((await status(b.url)).peers.map((p) => p.server_name)).toEqual([a.homeserver.serverName]);
  });

  it('npm run serve prints its peer ID and multiaddrs, and /_hearth/status agrees', async () => {
    const peer = await spawnHearth({ dataDir: await dataDir(), listen: ['/ip4/127.0.0.1/tcp/0'] });
    expect(peer.output()).toContain(`peer ID: ${peer.peerId}`);
    expect(peer.multiaddrs).toHaveLength(1);
    expect(peer.multiaddrs[0]).toMatch(new RegExp(`^/ip4/127\\.0\\.0\\.1/tcp/\\d+/p2p/${peer.peerId}$`));
    expect(await status(peer.url)).toEqual({ server_name: peer.serverName, peer_id: peer.peerId, multiaddrs: peer.multiaddrs, peers: [] });
  });
});
