import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startNodeHost, type NodeHost } from '../../src/node/node-host.ts';
import { openHearth, pageServerName, registerThroughUi, sendThroughUi, startSite, storedSession, type HearthSite } from './hearth-page.ts';

// Copy, not move: one browser's export imported into a second browser while the first stays
// open. The relay both pages use sees one identity connected twice, and both pages say that
// federation is paused and why (src/p2p/twin.ts). And the opposite: a page reloaded again and
// again leaves its old node's connections behind for a while, which are no twin; federation
// goes on. Pages watch for twins by default (the site's config does not mention it).

let dir: string;
let relay: NodeHost;
let site: HearthSite;
const contexts: BrowserContext[] = [];
const PASSPHRASE = 'two of a kind';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hearth-e2e-twin-'));
  relay = await startNodeHost({ dataDir: join(dir, 'relay'), port: 0, listen: ['/ip4/127.0.0.1/tcp/0/ws'], relay: true, detectTwins: true, rateLimits: false });
  site = await startSite(inject('hearthDist'), { config: { bootstrap: relay.p2p.multiaddrs(), iceServers: [], allowPrivateAddresses: true } });
});
afterAll(async () => {
  for (const context of contexts) await context.close();
  await site?.close();
  await relay?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function freshPage(): Promise<Page> {
  const context = await site.browser.newContext();
  contexts.push(context);
  // Whether the top bar ever said "federation paused" in this profile, across reloads.
  await context.addInitScript(() => {
    new MutationObserver(() => {
      const status = document.querySelector('.status[data-state="twin"]');
      if (status) localStorage.setItem('test-saw-twin', status.getAttribute('title') ?? 'twin');
    }).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-state'] });
  });
  return openHearth(context, site.server.url + '/');
}

/** Waits until each page's node has the other's homeserver on its list of reachable peers. */
async function bothReachable(a: Page, b: Page): Promise<void> {
  for (const [page, other] of [[a, b], [b, a]] as const) {
    await page.waitForFunction((name) => (globalThis as any).hearthP2P?.reachable.has(name), await pageServerName(other), { timeout: 60_000 });
  }
}

describe('two copies of one homeserver online', () => {
  it('both pages pause federation and say why', async () => {
    const original = await freshPage();
    const serverName = await pageServerName(original);
    await original.locator('button.storage').click();
    const panel = original.getByRole('dialog', { name: 'Storage and backup' });
    await panel.getByLabel('Export passphrase').fill(PASSPHRASE);
    await panel.getByLabel('Repeat the passphrase').fill(PASSPHRASE);
    const download = original.waitForEvent('download');
    await panel.getByRole('button', { name: 'Export', exact: true }).click();
    const file = join(dir, 'copy.hearth');
    await (await download).saveAs(file);
    await panel.getByRole('button', { name: 'Close' }).click();
    await expect.poll(() => relay.p2p.peers().map((p) => p.server_name)).toContain(serverName);

    const copy = await freshPage();
    const card = copy.locator('form.keep-import');
    await card.getByLabel('Homeserver file').setInputFiles(file);
    await card.getByLabel('Archive passphrase').fill(PASSPHRASE);
    await card.getByRole('button', { name: 'Import' }).click();
    await copy.waitForFunction((name) => (globalThis as any).hearthHost?.state.serverName === name && document.body.dataset.homeserver === 'ready', serverName, { timeout: 60_000 });

    for (const page of [original, copy]) {
      await page.locator('.status[data-state="twin"]', { hasText: 'Federation paused: another copy of this homeserver is online' }).waitFor({ timeout: 60_000 });
      expect(await page.locator('.status').getAttribute('title')).toMatch(new RegExp(`^Another copy of this homeserver \\(the same identity\\) is online: ${relay.p2p.peerId} sees it connected from /ip4/127\\.0\\.0\\.1/`));
    }
  }, 180_000);

  it('a page reloaded again and again, fast, is no twin: a direct chat started right after the last reload works', async () => {
    const ana = await freshPage();
    const ben = await freshPage();
    await registerThroughUi(ana, 'ana');
    await registerThroughUi(ben, 'ben');
    await bothReachable(ana, ben);
    const benId = (await storedSession(ben)).userId;
    // Each reload starts a new node (a new nonce) while the old one's connections to the relay and to Ana linger.
    // Each waits for the page's scripts to have run (DOMContentLoaded), long before its node is up: a reload
    // sent the moment the previous one committed was refused by Chromium's DevTools now and then ("Not attached
    // to an active page"), the new document not yet the one its session drives.
    await ben.reload({ waitUntil: 'domcontentloaded' });
    await ben.reload({ waitUntil: 'domcontentloaded' });
    await ben.reload();
    await ben.waitForFunction(() => document.body.dataset.homeserver === 'ready', undefined, { timeout: 30_000 });
    await ben.getByLabel('New room name').waitFor();
    // Ben's new node is back on the relay: the invite can reach it.
    await bothReachable(ana, ben);
    await ana.getByLabel('Start a direct chat with').fill(benId);
    await ana.getByRole('button', { name: 'Start chat' }).click();
    const invite = ben.getByRole('list', { name: 'Direct chats' }).locator('.invite');
    await invite.getByRole('button', { name: 'Accept' }).click({ timeout: 60_000 });
    await ben.locator('.room-encryption', { hasText: /^Encrypted$/ }).waitFor({ timeout: 60_000 });
    await sendThroughUi(ben, 'back after three reloads');
    await ana.getByRole('list', { name: 'Direct chats' }).locator('.room-item').click();
    await ana.locator('.event .body', { hasText: 'back after three reloads' }).waitFor({ timeout: 60_000 });
    // Neither page was ever told it had a twin.
    for (const page of [ana, ben]) {
      expect(await page.evaluate(() => localStorage.getItem('test-saw-twin'))).toBeNull();
      expect(await page.evaluate(() => (globalThis as any).hearthP2P.node.status().twin)).toBeUndefined();
    }
  }, 240_000);
});
