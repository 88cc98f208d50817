import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { serveStatic, type StaticServer } from '../../scripts/static-server.ts';
import { launchChromium } from './chromium.ts';
import { createRoomThroughUi, openHearth, registerThroughUi, sendThroughUi, useHere } from './hearth-page.ts';

// Issue 13, offline-first: the service worker keeps the page itself, so the homeserver
// opens with its file server gone and the browser offline, from IndexedDB, and the
// page picks up a new build once its server answers again.

let dist: string;
let server: StaticServer | undefined;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let url: string;
let config: { bootstrap: string[]; allowPrivateAddresses: boolean };

async function expectMessages(page: Page, ...messages: string[]): Promise<void> {
  await page.waitForFunction(() => document.body.dataset.homeserver === 'ready', undefined, { timeout: 30_000 });
  for (const message of messages) await page.locator('.event:not(.pending) .body', { hasText: message }).waitFor({ timeout: 15_000 });
}

beforeAll(async () => {
  // A copy of the build, so the update step can change it without touching other files' page.
  dist = await mkdtemp(join(tmpdir(), 'hearth-e2e-offline-'));
  await cp(inject('hearthDist'), dist, { recursive: true });
  // A bootstrap peer nobody runs: only its address matters, to see the config kept offline.
  const peerId = peerIdFromPrivateKey(await generateKeyPair('Ed25519'));
  config = { bootstrap: [`/ip4/127.0.0.1/tcp/9/ws/p2p/${peerId}`], allowPrivateAddresses: true };
  server = await serveStatic(dist, 0, '127.0.0.1', { config });
  url = server.url + '/';
  browser = await launchChromium();
  context = await browser.newContext();
  page = await openHearth(context, url);
  await registerThroughUi(page, 'olive');
  await createRoomThroughUi(page, 'Offline');
  await sendThroughUi(page, 'sent while online');
  // The leader read the config through the service worker, which kept it.
  await page.waitForFunction(async () => (await caches.match('/hearth-config.json')) !== undefined);
});

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await server?.close();
  if (dist) await rm(dist, { recursive: true, force: true });
});

describe('offline-first', () => {
  it('opens with no file server and no network: the page from the cache, the core from IndexedDB', async () => {
    await server!.close();
    server = undefined;
    await context.setOffline(true);
    await page.reload();
    await expectMessages(page, 'sent while online');
    // The last bootstrap list known works offline too.
    expect(await page.evaluate(() => (globalThis as any).hearthP2P?.config.bootstrap ?? (document.body.dataset.p2p as string))).toEqual(config.bootstrap);
    // Under Playwright's offline emulation, Debian's Chromium 150 (what apt gave this machine, where 156
    // had been) keeps the network off for the reloaded document but leaves its navigator.onLine true, so
    // the badge read 'no-peers'. Turning the emulation off and on again gives the document the 'offline'
    // event a real loss of network would, which the badge must follow.
    await context.setOffline(false);
    await context.setOffline(true);
    await page.waitForFunction(() => !navigator.onLine && document.body.dataset.offline === 'browser');
    await sendThroughUi(page, 'sent while offline');
    await page.reload();
    await expectMessages(page, 'sent while online', 'sent while offline');
  });

  it('a new tab opens offline as well', async () => {
    const second = await openHearth(context, url);
    // The chat runs in one tab at a time: the new tab takes it (the first takes it back when this one closes).
    await useHere(second);
    await expectMessages(second, 'sent while offline');
    await second.close();
  });

  it('when the server answers again, a reload shows the new build and the new service worker takes over', async () => {
    const index = join(dist, 'index.html');
    await writeFile(index, (await readFile(index, 'utf8')).replace('<head>', '<head>\n    <meta name="hearth-build" content="second" />'));
    // A new build changes the manifest written into sw.js: here, only its version.
    const swPath = join(dist, 'sw.js');
    const sw = await readFile(swPath, 'utf8');
    const oldVersion = /\\"version\\":\\"([0-9a-f]+)\\"/.exec(sw)![1]!;
    const newVersion = 'feed' + oldVersion.slice(4);
    await writeFile(swPath, sw.replace(oldVersion, newVersion));
    expect(await page.evaluate(() => caches.keys())).toEqual([`hearth-page-${oldVersion}`]);
    server = await serveStatic(dist, Number(new URL(url).port), '127.0.0.1', { config });
    await context.setOffline(false);
    await page.reload();
    await expectMessages(page, 'sent while offline');
    expect(await page.locator('meta[name="hearth-build"]').getAttribute('content')).toBe('second');
    // The reload's update check found the new sw.js: it precached the build and dropped the old cache.
    await page.waitForFunction((name) => caches.keys().then((keys) => keys.length === 1 && keys[0] === name), `hearth-page-${newVersion}`, { timeout: 30_000 });
    await sendThroughUi(page, 'sent after the update');
    // The fresh page is what is kept now: offline again, it is still the new one.
    await server.close();
    server = undefined;
    await context.setOffline(true);
    await page.reload();
    await expectMessages(page, 'sent while offline', 'sent after the update');
    expect(await page.locator('meta[name="hearth-build"]').getAttribute('content')).toBe('second');
  });
});
