/**
 * Stable listen ports (issue 24, peers 1). A listen address that asks for any port
 * (`/tcp/0`, as `npm start`'s peer does) gets one the first time, kept in
 * `<data>/listen.json`; a restart on the same data folder listens there again. Every
 * peer that knew the host redials the address it had (pages dial their bootstrap
 * address until it answers, Node peers the one in their peer store): on a new port
 * none of them would find it again, so no page renewed its reservation, and mail left
 * for a closed page waited where nobody came.
 */
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { writeFileDurably } from './file-persistence.ts';

const ANY_PORT = /^\/(ip4|ip6)\/([^/]+)\/tcp\/0(\/.*)?$/;

export interface StableListen {
  /** The addresses to listen on: the saved ports where there are some, otherwise the ones asked for. */
  addresses: string[];
  /** Whether any address is a saved port (which another program may have taken meanwhile). */
  reused: boolean;
  /** New free ports for every any-port address (when a saved one cannot be had). */
  fresh(): Promise<string[]>;
  /** Keeps these addresses for the next start. */
  save(addresses: string[]): Promise<void>;
}

const keys = (listen: string[]) => listen.map((address, i) => `${address}#${listen.slice(0, i).filter((a) => a === address).length}`);

/** A port free now on `host`, from the OS. */
async function freePort(host: string): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function withFreshPorts(listen: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const address of listen) {
    const match = ANY_PORT.exec(address);
    out.push(match ? `/${match[1]}/${match[2]}/tcp/${await freePort(match[2]!)}${match[3] ?? ''}` : address);
  }
  return out;
}

export async function stableListen(dataDir: string, listen: string[]): Promise<StableListen> {
  const file = join(dataDir, 'listen.json');
  let saved: Record<string, string> = {};
  try {
    const parsed: unknown = JSON.parse(await readFile(file, 'utf8'));
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) saved = parsed as Record<string, string>;
  } catch {
    // None yet, or unreadable: fresh ports, saved anew.
  }
  const names = keys(listen);
  const reusable = (i: number) => ANY_PORT.test(listen[i]!) && typeof saved[names[i]!] === 'string' && /\/tcp\/[1-9]\d*/.test(saved[names[i]!]!);
  // A saved address names its port, so only the others are given fresh ones.
  const addresses = await withFreshPorts(listen.map((address, i) => (reusable(i) ? saved[names[i]!]! : address)));
  return {
    addresses,
    reused: listen.some((_, i) => reusable(i)),
    fresh: () => withFreshPorts(listen),
    async save(chosen) {
      const record = Object.fromEntries(names.flatMap((name, i) => (ANY_PORT.test(listen[i]!) ? [[name, chosen[i]!]] : [])));
      if (Object.keys(record).length === 0) return;
      await writeFileDurably(file, JSON.stringify(record, null, 2) + '\n');
    },
  };
}
