import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { describe, expect, it } from 'vitest';
import { serverNameFromSeed } from '../crypto/identity.ts';
import { privateKeyFromSeed } from '../p2p/identity.ts';
import type { P2PNode } from '../p2p/node.ts';
import { knowsPeers, lazyP2PNode, peerIdOfServerName } from './lazy-p2p.ts';

describe('a libp2p node started when first needed', () => {
  it('names the peer ID libp2p gives the same seed', async () => {
    for (let i = 0; i < 20; i++) {
      const seed = crypto.getRandomValues(new Uint8Array(32));
      expect(peerIdOfServerName(await serverNameFromSeed(seed))).toBe(peerIdFromPrivateKey(await privateKeyFromSeed(seed)).toString());
    }
  });

  it('starts at the first federation request, once, and answers status before', async () => {
    const serverName = await serverNameFromSeed(new Uint8Array(32).fill(7));
    let starts = 0;
    const sent: string[] = [];
    const node = lazyP2PNode(serverName, async () => {
      starts++;
      return { multiaddrs: () => ['/ip4/127.0.0.1/tcp/1'], peers: () => [], transport: { send: async (destination: string) => (sent.push(destination), new Response('{}')) }, stop: async () => undefined } as unknown as P2PNode;
    });
    expect(node.status()).toEqual({ server_name: serverName, peer_id: node.peerId, multiaddrs: [], peers: [] });
    expect(node.started).toBe(false);
    await Promise.all([node.transport.send('a', new Request('http://a/')), node.transport.send('b', new Request('http://b/'))]);
    expect(starts).toBe(1);
    expect(sent).toEqual(['a', 'b']);
    expect(node.multiaddrs()).toEqual(['/ip4/127.0.0.1/tcp/1']);
    await node.stop();
    await expect(node.transport.send('c', new Request('http://c/'))).rejects.toThrow(/stopped/);
  });

  it('counts a peer store with only its own record as knowing no peers', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'hearth-lazy-p2p-'));
    try {
      expect(await knowsPeers(join(dir, 'missing'))).toBe(false);
      const { FsDatastore } = await import('datastore-fs');
      const { Key } = await import('interface-datastore');
      const store = new FsDatastore(dir);
      await store.open();
      await store.put(new Key('/peers/self'), new Uint8Array(1));
      expect(await knowsPeers(dir)).toBe(false);
      await store.put(new Key('/peers/other'), new Uint8Array(1));
      expect(await knowsPeers(dir)).toBe(true);
      await store.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
