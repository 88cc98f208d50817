import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import type { HearthStatus } from '../../src/p2p/node.ts';
import { launchChromium } from './chromium.ts';
import { openHearth, pageServerName } from './hearth-page.ts';

// `npm start` as a person runs it (scripts/start.ts, on the build the suite made): it serves
// the page and runs a Node peer whose WebSocket address the page learns from /hearth-config.json.

interface Started {
  child: ChildProcess;
  url: string;
  output(): string;
  /** Resolves once the output (stdout and stderr) has a match for `pattern`. */
  waitForOutput(pattern: RegExp): Promise<void>;
  stop(): Promise<number | null>;
}

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function npmStart(args: string[]): Promise<Started> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts', '--no-build', '--dist', inject('hearthDist'), '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const waiters = new Set<{ pattern: RegExp; resolve: () => void }>();
  const heard = () => {
    for (const waiter of waiters) if (waiter.pattern.test(output)) (waiters.delete(waiter), waiter.resolve());
  };
  const waitForOutput = (pattern: RegExp) =>
    new Promise<void>((resolve) => {
      waiters.add({ pattern, resolve });
      heard();
    });
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    return exited;
  };
  cleanups.push(stop);
  return new Promise((resolve, reject) => {
    const onOutput = (chunk: Buffer) => {
      output += chunk.toString();
      heard();
      const url = /served at (http:\/\/\S+?)\/ /.exec(output)?.[1];
      if (url) resolve({ child, url, output: () => output, waitForOutput, stop });
    };
    child.stdout!.on('data', onOutput);
    child.stderr!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      heard();
    });
    void exited.then((code) => reject(new Error(`npm start exited (${code}) before it served:\n${output}`)));
  });
}

async function dataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'hearth-npm-start-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

describe('npm start', () => {
  it('serves the page and a Node peer; the page bootstraps from it over WebSockets; SIGTERM stops both', async () => {
    const started = await npmStart(['--peer-data', await dataDir()]);
    const peerName = /Node peer ([0-9a-f]{64}) /.exec(started.output())![1]!;
    const peerApi = /client API on (http:\/\/\S+?)\)/.exec(started.output())![1]!;
    const config = await (await fetch(`${started.url}/hearth-config.json`)).json();
    expect(config).toEqual({ bootstrap: [expect.stringMatching(/^\/ip4\/127\.0\.0\.1\/tcp\/\d+\/ws\/p2p\/12D3KooW/)], iceServers: [], allowPrivateAddresses: true });

    const browser = await launchChromium();
    cleanups.push(() => browser.close());
    const page = await openHearth(await browser.newContext(), started.url + '/');
    const browserName = await pageServerName(page);
    await page.waitForFunction(() => document.body.dataset.p2p === 'running', undefined, { timeout: 30_000 });
    const peersOfPeer = async () => ((await (await fetch(`${peerApi}/_hearth/status`)).json()) as HearthStatus).peers.map((p) => p.server_name);
    await expect.poll(peersOfPeer, { timeout: 20_000 }).toEqual([browserName]);
    await expect.poll(() => page.evaluate(() => (globalThis as any).hearthP2P.node.peers().map((p: any) => p.server_name))).toEqual([peerName]);

    // The peer says who came and went, one line each: the page reaches it over WebSockets, so directly.
    const short = `${browserName.slice(0, 8)}\u2026${browserName.slice(-4)}`;
    await started.waitForOutput(new RegExp(`^peer joined: ${short} via direct$`, 'm'));
    await page.context().close();
    await started.waitForOutput(new RegExp(`^peer left: ${short}$`, 'm'));
    // Once each: one line per peer, whatever its connections did in between.
    expect(started.output().match(/^peer joined: .*$/gm)).toEqual([`peer joined: ${short} via direct`]);
    expect(started.output().match(/^peer left: .*$/gm)).toEqual([`peer left: ${short}`]);

    expect(await started.stop()).toBe(0);
  });

  it('--no-peer serves files only: no /hearth-config.json, and the page runs its node with no peers', async () => {
    const started = await npmStart(['--no-peer']);
    expect(started.output()).not.toContain('Node peer');
    expect((await fetch(`${started.url}/hearth-config.json`)).status).toBe(404);

    const browser = await launchChromium();
    cleanups.push(() => browser.close());
    const page = await openHearth(await browser.newContext(), started.url + '/');
    await page.waitForFunction(() => document.body.dataset.p2p === 'running', undefined, { timeout: 30_000 });
    expect(await page.evaluate(() => (globalThis as any).hearthP2P.config)).toEqual({ bootstrap: [], iceServers: [], allowPrivateAddresses: false, detectTwins: true });
    expect(await started.stop()).toBe(0);
  });
});
