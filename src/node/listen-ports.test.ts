import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startNodeHost } from './node-host.ts';
import { stableListen } from './listen-ports.ts';

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});
const dataDir = async () => {
  const dir = await mkdtemp(join(tmpdir(), 'hearth-listen-'));
  dirs.push(dir);
  return dir;
};

describe('stable listen ports (issue 24, peers 1)', () => {
  it('an any-port address gets a port once and keeps it in the data folder; a fixed one is left alone', async () => {
    const dir = await dataDir();
    const asked = ['/ip4/127.0.0.1/tcp/0/ws', '/ip4/127.0.0.1/tcp/0', '/ip4/127.0.0.1/tcp/0', '/ip4/127.0.0.1/tcp/4999'];
    const first = await stableListen(dir, asked);
    expect(first.reused).toBe(false);
    expect(first.addresses[0]).toMatch(/^\/ip4\/127\.0\.0\.1\/tcp\/[1-9]\d*\/ws$/);
    expect(first.addresses[3]).toBe('/ip4/127.0.0.1/tcp/4999');
    expect(new Set(first.addresses.slice(0, 3)).size).toBe(3);
    await first.save(first.addresses);
    const again = await stableListen(dir, asked);
    expect(again).toMatchObject({ reused: true, addresses: first.addresses });
  });

  it('a host whose saved port another program took meanwhile listens on a new one, and says so in one line', async () => {
    const dir = await dataDir();
    const listen = ['/ip4/127.0.0.1/tcp/0/ws'];
    const first = await startNodeHost({ dataDir: dir, port: 0, listen, rateLimits: false });
    const had = first.p2p.multiaddrs()[0]!;
    await first.close();
    const port = Number(/\/tcp\/(\d+)\//.exec(had)![1]);
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(port, '127.0.0.1', resolve));
    const lines: string[] = [];
    try {
      const second = await startNodeHost({ dataDir: dir, port: 0, listen, rateLimits: false, log: (message) => lines.push(message) });
      const now = second.p2p.multiaddrs()[0]!;
      await second.close();
      expect(now).not.toBe(had);
      expect(lines.filter((l) => l.startsWith('could not listen on'))).toHaveLength(1);
      // And the new port is the one kept for next time.
      expect((await stableListen(dir, listen)).addresses[0]).toBe(now.replace(/\/p2p\/.*$/, ''));
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  });
});
