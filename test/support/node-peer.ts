import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startNodeHost, type NodeHost, type NodeHostOptions } from '../../src/node/node-host.ts';

export interface NodePeer extends NodeHost {
  /** The temporary folder its data is kept in. */
  dataDir: string;
}

/**
 * A Node host in this process, as `npm run serve` makes one: on 127.0.0.1 with an
 * OS-chosen HTTP port, libp2p over WebSockets on an OS-chosen port unless `listen`
 * says otherwise, no rate limits, and its data in a new temporary folder.
 * close() stops it and removes the folder.
 */
export async function startNodePeer(options: Partial<Omit<NodeHostOptions, 'dataDir'>> = {}): Promise<NodePeer> {
  const dataDir = await mkdtemp(join(tmpdir(), 'hearth-peer-'));
  // libp2p's peer store may still finish a write into <data>/peers just after the node stopped (a
  // connection closed by a page as the test ends): rm then meets a file it did not list (ENOTEMPTY,
  // once in a fresh-clone run). Node's own retry for that case.
  const removeData = () => rm(dataDir, { recursive: true, force: true, maxRetries: 5 });
  try {
    const host = await startNodeHost({ port: 0, listen: ['/ip4/127.0.0.1/tcp/0/ws'], rateLimits: false, ...options, dataDir });
    return {
      ...host,
      dataDir,
      close: async () => {
        await host.close();
        await removeData();
      },
    };
  } catch (error) {
    await removeData();
    throw error;
  }
}

/** A port the OS gives and takes back: a DNS-named host's server name must name its port before it starts. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
