import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * A free TCP port on 127.0.0.1 below the kernel's ephemeral range, for a peer that a test stops and
 * starts again at the same address. An OS-chosen port is an ephemeral one: while its peer is down,
 * any outgoing connection (this test's or another file's beside it) may take it as its source port,
 * and the restart then fails to listen (seen in a fresh-clone CI run, three-peers).
 */
export async function restartablePort(): Promise<number> {
  const ephemeralFrom = ephemeralRangeStart();
  for (let tries = 0; tries < 100; tries++) {
    const port = 10_000 + Math.floor(Math.random() * (ephemeralFrom - 10_000));
    if (await isFree(port)) return port;
  }
  throw new Error(`no free port between 10000 and ${ephemeralFrom}`);
}

function ephemeralRangeStart(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 11_000 ? low : 32_768;
  } catch {
    return 32_768; // not Linux: below the IANA ephemeral range (49152) too
  }
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}
