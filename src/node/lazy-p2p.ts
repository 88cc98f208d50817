import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { base58btc } from 'multiformats/bases/base58';
import { identity } from 'multiformats/hashes/identity';
import { publicKeyFromServerName } from '../crypto/identity.ts';
import type { HearthStatus, P2PNode } from '../p2p/node.ts';

/**
 * A libp2p node started only when it is first needed: on a host with nothing to listen on
 * and no one to dial (no --listen, --bootstrap, --relay or --mailbox, and no peer known from
 * before), libp2p has nothing to do until the host sends its first federation request, and
 * loading it costs ~20 MiB of resident memory (its modules, Noise's WASM, the running node).
 * Until then, its addresses and peers are empty, as they would be on the started node.
 */
export function lazyP2PNode(serverName: string, start: () => Promise<P2PNode>): P2PNode & { readonly started: boolean } {
  let node: P2PNode | undefined;
  let starting: Promise<P2PNode> | undefined;
  let stopped = false;
  const started = (): Promise<P2PNode> => {
    if (stopped) return Promise.reject(new Error('the libp2p node is stopped'));
    starting ??= start().then(
      (up) => (node = up),
      (error: unknown) => {
        starting = undefined; // the next request tries again
        throw error;
      },
    );
    return starting;
  };
  const peerId = peerIdOfServerName(serverName);
  return {
    peerId,
    serverName,
    get started() {
      return node !== undefined;
    },
    multiaddrs: () => node?.multiaddrs() ?? [],
    peers: () => node?.peers() ?? [],
    status: (): HearthStatus => node?.status() ?? { server_name: serverName, peer_id: peerId, multiaddrs: [], peers: [] },
    transport: { send: async (destination, request, options) => (await started()).transport.send(destination, request, options) },
    dial: async (address) => (await started()).dial(address),
    get libp2p() {
      if (!node) throw new Error('libp2p has not started on this host: it starts with its first federation request');
      return node.libp2p;
    },
    get redialed() {
      return node?.redialed ?? Promise.resolve();
    },
    async stop() {
      stopped = true;
      const up = await starting?.catch(() => undefined);
      await up?.stop();
    },
  };
}

/**
 * Whether the peer store in `directory` (a datastore-fs folder) holds any peer but this host itself,
 * whose own record libp2p writes at every start: such a host redials its peers at start.
 */
export async function knowsPeers(directory: string): Promise<boolean> {
  const records = await readdir(join(directory, 'peers')).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  return records.filter((name) => name.endsWith('.data')).length > 1;
}

/**
 * The libp2p peer ID of a Hearth server name, as src/p2p/identity.ts's peerIdFromServerName gives it:
 * base58btc of the identity multihash of its Ed25519 key in libp2p's protobuf (`08 01 12 20` + key).
 * Built here from multiformats (checked against libp2p in lazy-p2p.test.ts) so that a host that has
 * not started libp2p can name itself without loading @libp2p/crypto and @libp2p/peer-id (~14 MiB resident).
 */
export function peerIdOfServerName(serverName: string): string {
  const key = publicKeyFromServerName(serverName);
  if (!key) throw new Error(`${serverName} is not a Hearth server name`);
  return base58btc.baseEncode(identity.digest(new Uint8Array([0x08, 0x01, 0x12, 0x20, ...key])).bytes);
}
