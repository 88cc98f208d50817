import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startNodeHost, type NodeHost } from '../../src/node/node-host.ts';
import { BUSY_DIALLER } from './busy-dialler.ts';
import { collectP2PLog, openHearth, pageServerName, peersOf, startSite, type HearthSite } from './hearth-page.ts';

// Issue 24, the WebRTC dial stall. On a loaded machine the dialling page can be slower than the other:
// by the time it looks at its `init` data channel, the other side has opened it and closed it again,
// and @libp2p/webrtc 6.0.33 waits for an `open` that has already been (worker/webrtc-init-channel.ts).
// BUSY_DIALLER gives every dial in both pages that ordering for certain; the pages must still link
// directly, and the link must be one both sides hold: it carries them once the relay is gone.

let dir: string;
let relay: NodeHost | undefined;
let site: HearthSite;
const contexts: BrowserContext[] = [];
const pages: Page[] = [];
const names: string[] = [];
/** What each page's p2p node said (collectP2PLog): shown if the test fails. */
const p2pLog: string[] = [];

beforeAll(async () => {
  // Its folder is removed at the end, not when it stops mid-test (its peer store may still be writing then).
  dir = await mkdtemp(join(tmpdir(), 'hearth-e2e-stall-'));
  relay = await startNodeHost({ dataDir: dir, port: 0, listen: ['/ip4/127.0.0.1/tcp/0/ws'], relay: true, rateLimits: false });
  site = await startSite(inject('hearthDist'), { config: { bootstrap: relay.p2p.multiaddrs(), iceServers: [], allowPrivateAddresses: true } });
  for (let i = 0; i < 2; i++) {
    const context = await site.browser.newContext();
    await context.addInitScript(BUSY_DIALLER);
    collectP2PLog(context, `page ${i}`, p2pLog);
    contexts.push(context);
    pages.push(await openHearth(context, site.server.url + '/'));
    names.push(await pageServerName(pages[i]!));
  }
});

afterAll(async () => {
  for (const context of contexts) await context.close();
  await site?.close();
  await relay?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const linkTo = async (page: Page, serverName: string) => (await peersOf(page)).find((p) => p.server_name === serverName);
/** The directions of the page's open WebRTC connections (`outbound`: a dial of its own that completed). */
const webrtcDirections = (page: Page): Promise<string[]> =>
  page.evaluate(() =>
    ((globalThis as any).hearthP2P.node.libp2p.getConnections() as any[])
      .filter((c) => c.status === 'open' && c.remoteAddr.toString().includes('/webrtc'))
      .map((c) => c.direction as string),
  );

/** Runs `check`; should it fail, adds what each page's node knew of the other and what the nodes logged. */
async function explainingFailure(of: Page[], check: () => Promise<unknown>): Promise<void> {
  try {
    await check();
  } catch (error) {
    const states = await Promise.all(of.map((page) => page.evaluate(async () => {
      const libp2p = (globalThis as any).hearthP2P.node.libp2p;
      const peers = await libp2p.peerStore.all();
      return {
        connections: (libp2p.getConnections() as any[]).map((c) => `${c.direction} ${c.status} ${c.remoteAddr}`),
        peers: (peers as any[]).map((p) => `${p.id}: ${p.addresses.map((a: any) => a.multiaddr.toString()).join(' ')}`),
      };
    }).catch((cause: unknown) => String(cause))));
    (error as Error).message += `\n${JSON.stringify(states, null, 1)}\n${p2pLog.join('\n')}`;
    throw error;
  }
}

describe('a WebRTC dial from a page slower than the other side', () => {
  it('completes: both pages hold the direct link, and it outlives the relay', async () => {
    const [a, b] = pages as [Page, Page];
    await a.waitForFunction((name) => (globalThis as any).hearthP2P.reachable.has(name), names[1], { timeout: 30_000 });
    await b.waitForFunction((name) => (globalThis as any).hearthP2P.reachable.has(name), names[0], { timeout: 30_000 });
    // A dial completed: one page has it as its outbound connection, the other as inbound. Before the fix
    // each dial waited out its 20 s and each retry stalled the same way; meanwhile the listening side
    // held an inbound link that the dialler then closed.
    const heldByBoth = ([ofA, ofB]: string[][]) => (ofA!.includes('outbound') && ofB!.includes('inbound')) || (ofB!.includes('outbound') && ofA!.includes('inbound'));
    await explainingFailure([a, b], () => expect.poll(async () => [await webrtcDirections(a), await webrtcDirections(b)], { timeout: 30_000 }).toSatisfy(heldByBoth));
    for (const [page, other] of [[a, names[1]!], [b, names[0]!]] as const) {
      await expect.poll(() => linkTo(page, other), { timeout: 30_000 }).toMatchObject({ via: 'direct', multiaddrs: expect.arrayContaining([expect.stringContaining('/webrtc')]) });
    }
    // Not a link only one side counts as open: with the relay gone, each still has the other, directly.
    await relay!.close();
    relay = undefined;
    for (const [page, other] of [[a, names[1]!], [b, names[0]!]] as const) {
      await expect.poll(async () => (await peersOf(page)).map((p) => p.server_name), { timeout: 30_000 }).toEqual([other]);
      expect((await linkTo(page, other))?.multiaddrs.every((address) => address.includes('/webrtc'))).toBe(true);
    }
  }, 120_000);
});
