import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { inject } from 'vitest';
import type { Namespace } from './netns.ts';

/** `npm run serve` (its compiled entry) in a child process of its own, as a person would run a peer. */
export interface HearthProcess {
  url: string;
  serverName: string;
  peerId: string;
  /** The libp2p addresses it listens on, each ending in /p2p/<peer id>. */
  multiaddrs: string[];
  child: ChildProcess;
  /** Everything it printed, for failure messages. */
  output(): string;
  /** Ends it with SIGTERM (a clean stop) or SIGKILL (a crash), and waits for it to exit. */
  stop(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
}

const running = new Set<HearthProcess>();

/**
 * Starts a peer on 127.0.0.1 with OS-chosen ports unless `port` or `listen` names one. `args` go
 * to serve as they are (`--server-name`, `--tls-cert`…), `env` to the child's environment
 * (NODE_EXTRA_CA_CERTS for a test CA), and `nodeFlags` to node before the entry (a bench gives
 * scripts/host-flags.ts's, as `npm run serve` runs the host).
 */
export function spawnHearth(options: { dataDir: string; listen?: string[]; bootstrap?: string[]; mailbox?: boolean; port?: number; args?: string[]; env?: Record<string, string>; entry?: string; nodeFlags?: readonly string[]; netns?: Namespace }): Promise<HearthProcess> {
  // The compiled host, as `npm run serve` runs it (test/integration/global-setup.ts builds it; a bench, outside vitest, names its own build as `entry`).
  // `nodeFlags` come before the entry: `['--import', 'tsx']` runs src/node/serve.ts from source, where no compiled host is at hand (the browser tests).
  const args = [options.entry ?? inject('hearthServeEntry'), '--port', String(options.port ?? 0), '--data', options.dataDir, '--no-rate-limits', ...(options.args ?? [])];
  for (const address of options.listen ?? ['/ip4/127.0.0.1/tcp/0']) args.push('--listen', address);
  for (const address of options.bootstrap ?? []) args.push('--bootstrap', address);
  if (options.mailbox) args.push('--mailbox');
  return new Promise((resolve, reject) => {
    const nodeArgs = [...(options.nodeFlags ?? []), ...args];
    const spawnOptions = { stdio: ['ignore', 'pipe', 'pipe'] as ('ignore' | 'pipe')[], ...(options.env ? { env: { ...process.env, ...options.env } } : {}) };
    // In a network namespace of the test's (`ip netns exec` execs node, so the child is node itself).
    const child = options.netns ? options.netns.spawn(process.execPath, nodeArgs, spawnOptions) : spawn(process.execPath, nodeArgs, spawnOptions);
    let output = '';
    const exited = new Promise<void>((done) => child.once('exit', () => done()));
    const onOutput = (chunk: Buffer) => {
      output += chunk.toString();
      // serve prints its data folder last, once everything else is up.
      if (!/^data: /m.test(output)) return;
      const url = /listening on (https?:\S+)/.exec(output)?.[1];
      const serverName = /server name: (\S+)/.exec(output)?.[1];
      const peerId = /peer ID: (\S+)/.exec(output)?.[1];
      if (!url || !serverName || !peerId) return;
      child.stdout!.off('data', onOutput);
      child.stdout!.on('data', (more: Buffer) => (output += more.toString()));
      const handle: HearthProcess = {
        url,
        serverName,
        peerId,
        multiaddrs: [...output.matchAll(/libp2p listening on (\S+)/g)].map((m) => m[1]!),
        child,
        output: () => output,
        stop: async (signal = 'SIGTERM') => {
          running.delete(handle);
          if (process.env['HEARTH_TEST_LOGS']) appendFileSync(process.env['HEARTH_TEST_LOGS'], `\n=== ${serverName.slice(0, 8)} (${signal})\n${output}`);
          if (child.exitCode === null && child.signalCode === null) child.kill(signal);
          await exited;
        },
      };
      running.add(handle);
      resolve(handle);
    };
    child.stdout!.on('data', onOutput);
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code, signal) => reject(new Error(`serve exited (${code ?? signal}) before it was up:\n${output}`)));
  });
}

/** Stops every peer still running (for afterEach). */
export async function stopAllHearths(): Promise<void> {
  await Promise.all([...running].map((p) => p.stop('SIGKILL')));
}
