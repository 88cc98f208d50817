/**
 * coturn (Debian's `coturn`, the `turnserver` binary) as a test's STUN and TURN server, in a network
 * namespace of the test's own: UDP and TCP on `address:3478`, long-term credentials (`user`), no TLS,
 * its state in a folder of its own. Up once it logs its servers created; `close()` stops it.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Namespace } from './netns.ts';

export const TURNSERVER = process.env.HEARTH_TURNSERVER ?? '/usr/bin/turnserver';

export interface Coturn {
  /** For hearth-config.json's `iceServers`. */
  stun: RTCIceServer;
  turn: RTCIceServer;
  output(): string;
  close(): Promise<void>;
}

export function assertCoturnInstalled(): void {
  if (spawnSync(TURNSERVER, ['--help'], { stdio: 'ignore' }).error) {
    throw new Error(`The across-NATs browser test runs coturn as STUN and TURN, missing at ${TURNSERVER}. Install it with: apt-get install -y coturn`);
  }
}

export async function startCoturn(ns: Namespace, address: string, user = { name: 'hearth', password: 'a test secret' }): Promise<Coturn> {
  assertCoturnInstalled();
  const dir = await mkdtemp(join(tmpdir(), 'hearth-coturn-'));
  const child: ChildProcess = ns.spawn(TURNSERVER, [
    '-n', `--listening-ip=${address}`, '--listening-port=3478', `--relay-ip=${address}`,
    '--lt-cred-mech', `--user=${user.name}:${user.password}`, '--realm=hearth.test', '--fingerprint',
    '--no-tls', '--no-dtls', '--no-cli', `--userdb=${join(dir, 'turndb')}`, `--pidfile=${join(dir, 'turn.pid')}`,
    '--log-file=stdout', '--simple-log',
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (/Total General servers/.test(output)) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then(() => reject(new Error(`turnserver exited before it was up:\n${output}`)));
  });
  return {
    stun: { urls: `stun:${address}:3478` },
    turn: { urls: `turn:${address}:3478?transport=udp`, username: user.name, credential: user.password },
    output: () => output,
    close: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      await rm(dir, { recursive: true, force: true });
    },
  };
}
