import { mkdtemp, rm } from 'node:fs/promises';
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
  const removeData = () => rm(dataDir, { recursive: true, force: true });
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
