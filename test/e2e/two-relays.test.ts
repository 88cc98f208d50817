import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startNodePeer, type NodePeer } from '../support/node-peer.ts';
import { openHearth, pageServerName, peersOf, startSite, type HearthSite } from './hearth-page.ts';

// Issue 12: the page works with several relays. Two Node relays are the origin's bootstrap
// peers; the first is down before either page opens. The pages still find each other through
// the second, link directly by WebRTC, and each holds a reservation on the relay that is up.

let down: NodePeer | undefined;
let up: NodePeer;
let site: HearthSite;
const contexts: BrowserContext[] = [];
const pages: Page[] = [];
const names: string[] = [];

const startRelay = () => startNodePeer({ relay: true });

beforeAll(async () => {
  down = await startRelay();
  up = await startRelay();
  const bootstrap = [...down.p2p.multiaddrs(), ...up.p2p.multiaddrs()];
  await down.close();
  down = undefined;
  site = await startSite(inject('hearthDist'), { config: { bootstrap, iceServers: [], allowPrivateAddresses: true } });
  for (let i = 0; i < 2; i++) {
    contexts.push(await site.browser.newContext());
    pages.push(await openHearth(contexts[i]!, site.server.url + '/'));
    names.push(await pageServerName(pages[i]!));
  }
});

afterAll(async () => {
  for (const context of contexts) await context.close();
  await site?.close();
  await up?.close();
  await down?.close();
});


describe('two relays, one of them down', () => {
  it('the pages meet through the relay that is up and link directly', async () => {
    const [a, b] = pages as [Page, Page];
    await a.waitForFunction((name) => (globalThis as any).hearthP2P.reachable.has(name), names[1], { timeout: 30_000 });
    await b.waitForFunction((name) => (globalThis as any).hearthP2P.reachable.has(name), names[0], { timeout: 30_000 });
    // As in browser-to-browser.test.ts: generous, for a loaded machine.
    for (const [page, other] of [[a, names[1]], [b, names[0]]] as const) {
      await expect.poll(async () => (await peersOf(page)).find((p) => p.server_name === other)?.via, { timeout: 80_000 }).toBe('direct');
    }
    // Each reserved on the relay that answers; the one that is down is simply not among the peers.
    for (const page of pages) {
      const peers = (await peersOf(page)).map((p) => p.server_name);
      expect(peers).toContain(up.homeserver.serverName);
      const addresses: string[] = await page.evaluate(() => (globalThis as any).hearthP2P.node.multiaddrs());
      expect(addresses.some((address) => address.includes(`/p2p/${up.p2p.peerId}/p2p-circuit`))).toBe(true);
    }
  }, 180_000);
});
