import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startNodePeer, type NodePeer } from '../support/node-peer.ts';
import { openHearth, openPeersView, registerThroughUi, startSite, useHere, type HearthSite } from './hearth-page.ts';

// Issue 12, the settings of the peers panel (the Peers view, opened from the top bar): bootstrap peers the person adds beyond the
// origin's /hearth-config.json list (here: none), kept in localStorage, dialled at once
// and by every later leader tab; a bad address is refused in words; they can be removed.

let peer: NodePeer;
/** Added from a follower tab: the leader hears of it and dials it. */
let peer2: NodePeer;
let site: HearthSite;
let context: BrowserContext;
let page: Page;

const bootstrapOf = (page: Page) => page.evaluate(() => (globalThis as any).hearthP2P.bootstrap as string[]);

async function nodeRunning(page: Page): Promise<void> {
  await page.waitForFunction(() => document.body.dataset.p2p === 'running', undefined, { timeout: 30_000 });
}

beforeAll(async () => {
  peer = await startNodePeer();
  peer2 = await startNodePeer();
  // No bootstrap list: the only way to the peer is the panel. Loopback ws needs private addresses allowed.
  site = await startSite(inject('hearthDist'), { config: { bootstrap: [], iceServers: [], allowPrivateAddresses: true } });
  context = await site.browser.newContext();
  page = await openHearth(context, site.server.url + '/');
  await registerThroughUi(page, 'bea');
  await nodeRunning(page);
});

afterAll(async () => {
  await context?.close();
  await site?.close();
  await peer?.close();
  await peer2?.close();
});

describe('bootstrap peers added in the panel', () => {
  it('a bad address gets a readable error and is not kept', async () => {
    await openPeersView(page);
    const input = page.getByLabel('Peer address');
    const error = page.locator('.bootstrap-error');
    await input.fill('peer.example.org');
    await page.getByRole('button', { name: 'Add', exact: true }).click();
    await error.filter({ hasText: 'That is not a peer address' }).waitFor();
    await input.fill('/ip4/127.0.0.1/tcp/4001/ws');
    await page.getByRole('button', { name: 'Add', exact: true }).click();
    await error.filter({ hasText: 'must end with /p2p/' }).waitFor();
    await input.fill(`/ip4/127.0.0.1/tcp/4001/p2p/${peer.p2p.peerId}`);
    await page.getByRole('button', { name: 'Add', exact: true }).click();
    await error.filter({ hasText: 'WebSockets' }).waitFor();
    expect(await page.locator('.added-peer').count()).toBe(0);
    expect(await page.evaluate(() => localStorage.getItem('hearth-bootstrap-peers'))).toBeNull();
  });

  it('the Node peer’s ws address is dialled at once, listed under Peers, and kept', async () => {
    const address = peer.p2p.multiaddrs().find((a) => a.includes('/ws/'))!;
    expect(await page.locator(`.peer[data-server-name="${peer.homeserver.serverName}"]`).count()).toBe(0);
    await page.getByLabel('Peer address').fill(address);
    await page.getByRole('button', { name: 'Add', exact: true }).click();
    await page.locator(`.peer[data-server-name="${peer.homeserver.serverName}"]`).waitFor({ timeout: 20_000 });
    await page.locator('.bootstrap-status', { hasText: 'Connected to' }).waitFor();
    await page.locator(`.added-peer[data-address="${address}"]`).waitFor();
    expect(await page.locator('.bootstrap-error').textContent()).toBe('');
  });

  it('added in a follower tab: kept, and the leader tab dials it at once', async () => {
    const address = peer2.p2p.multiaddrs().find((a) => a.includes('/ws/'))!;
    const follower = await openHearth(context, site.server.url + '/');
    await follower.waitForFunction(() => (globalThis as any).hearthHost.state.role === 'follower');
    // Its peers panel is on the chat screen, which runs in one tab at a time (issue 25): the follower takes it; the node stays the leader's.
    await useHere(follower);
    await openPeersView(follower);
    await follower.getByLabel('Peer address').fill(address);
    await follower.getByRole('button', { name: 'Add', exact: true }).click();
    await follower.locator('.bootstrap-status', { hasText: 'Kept.' }).waitFor();
    // Closed, the follower hands the chat back: the leader tab's panel shows the peer its node dialled.
    await follower.close();
    await openPeersView(page);
    await page.locator(`.peer[data-server-name="${peer2.homeserver.serverName}"]`).waitFor({ timeout: 20_000 });
    await page.locator(`.added-peer[data-address="${address}"]`).waitFor();
  });

  it('after a reload the new leader dials them again, from its bootstrap list', async () => {
    const address = peer.p2p.multiaddrs().find((a) => a.includes('/ws/'))!;
    const address2 = peer2.p2p.multiaddrs().find((a) => a.includes('/ws/'))!;
    await page.reload();
    await nodeRunning(page);
    expect(await bootstrapOf(page)).toEqual([address, address2]);
    await openPeersView(page);
    await page.locator(`.peer[data-server-name="${peer2.homeserver.serverName}"]`).waitFor({ timeout: 20_000 });
    await page.locator(`.peer[data-server-name="${peer.homeserver.serverName}"]`).waitFor({ timeout: 20_000 });
    await page.locator(`.added-peer[data-address="${address}"]`).waitFor();
  });

  it('removed, it is no longer dialled by later leaders', async () => {
    const address = peer.p2p.multiaddrs().find((a) => a.includes('/ws/'))!;
    const address2 = peer2.p2p.multiaddrs().find((a) => a.includes('/ws/'))!;
    await openPeersView(page);
    await page.getByRole('button', { name: `Remove ${address}` }).click();
    await page.locator(`.added-peer[data-address="${address}"]`).waitFor({ state: 'detached' });
    await page.getByRole('button', { name: `Remove ${address2}` }).click();
    await page.locator('.added-peer').waitFor({ state: 'detached' });
    await page.reload();
    await nodeRunning(page);
    expect(await bootstrapOf(page)).toEqual([]);
  });
});
