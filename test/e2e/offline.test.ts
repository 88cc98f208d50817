import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { serveStatic, type StaticServer } from '../../scripts/static-server.ts';
import { launchEngine, type Engine, type EngineBrowser, type Profile, type Tab } from './browsers.ts';
import { createAccount, createRoom, expectMessages, openHearth, send, useHere } from './page-flows.ts';

// Issue 13, offline-first, in every engine (issue 39): the service worker keeps the page itself, so the
// homeserver opens with its file server gone and the browser offline, from IndexedDB, and the page picks
// up a new build once its server answers again. The same steps drive Chromium (playwright-core), Firefox
// (puppeteer-core over WebDriver BiDi) and WebKitGTK's MiniBrowser (WebDriver), through `Tab`.
//
// "Offline" is real in each: the file server is stopped, and the bootstrap peer is one nobody runs. On top,
// Chromium and Firefox take the network away from the tab by their drivers' emulation, so navigator.onLine
// is false and the top bar must say the browser is offline. WebKit's driver cannot (classic WebDriver has no
// network emulation, and WebKitGTK reads onLine from the system's network monitor, which a test cannot turn
// off without cutting the driver's own loopback connection): there the page is offline from its server and
// every peer, and the top bar must say it has no peers.

const ENGINES: Engine[] = ['chromium', 'firefox', 'webkit'];

for (const engine of ENGINES) describe(`offline-first in ${engine}`, () => {
  let dist: string;
  let server: StaticServer | undefined;
  let browser: EngineBrowser;
  let profile: Profile;
  let tab: Tab;
  let url: string;
  let config: { bootstrap: string[]; allowPrivateAddresses: boolean };

  /** The network gone: the file server stopped, and the tab offline where the driver can say so. */
  async function goOffline(): Promise<void> {
    await server?.close();
    server = undefined;
    await tab.setOffline?.(true);
  }

  /** The top bar says why the page is on its own: the browser is offline, or (WebKit, online to its eyes) no peer answers. */
  async function expectOfflineBadge(): Promise<void> {
    if (tab.setOffline) {
      // Under Playwright's offline emulation, Debian's Chromium 150 keeps the network off for the reloaded
      // document but leaves its navigator.onLine true. Turning the emulation off and on again gives the
      // document the 'offline' event a real loss of network would, which the badge must follow.
      await tab.setOffline(false);
      await tab.setOffline(true);
      await tab.waitForFunction(() => !navigator.onLine && document.body.dataset.offline === 'browser', undefined);
    } else {
      await tab.waitForFunction(() => document.body.dataset.offline === 'no-peers', undefined);
    }
  }

  const buildName = () => tab.evaluate(() => document.querySelector('meta[name="hearth-build"]')?.getAttribute('content') ?? null);

  beforeAll(async () => {
    // A copy of the build, so the update step can change it without touching other files' page.
    dist = await mkdtemp(join(tmpdir(), `hearth-e2e-offline-${engine}-`));
    await cp(inject('hearthDist'), dist, { recursive: true });
    // A bootstrap peer nobody runs: only its address matters, to see the config kept offline.
    const peerId = peerIdFromPrivateKey(await generateKeyPair('Ed25519'));
    config = { bootstrap: [`/ip4/127.0.0.1/tcp/9/ws/p2p/${peerId}`], allowPrivateAddresses: true };
    server = await serveStatic(dist, 0, '127.0.0.1', { config });
    url = server.url + '/';
    browser = await launchEngine(engine);
    profile = await browser.newProfile();
    tab = await openHearth(profile, url);
    await createAccount(tab, 'olive');
    await createRoom(tab, 'Offline');
    await send(tab, 'sent while online');
    // The leader read the config through the service worker, which kept it.
    await tab.waitForFunction(() => caches.match('/hearth-config.json').then((kept) => kept !== undefined), undefined);
  }, 180_000);

  afterAll(async () => {
    await profile?.close();
    await browser?.close();
    await server?.close();
    if (dist) await rm(dist, { recursive: true, force: true });
  });

  it('opens with no file server and no network: the page from the cache, the core from IndexedDB', async () => {
    await goOffline();
    await tab.reload();
    await expectMessages(tab, 'sent while online');
    // The last bootstrap list known works offline too.
    expect(await tab.evaluate(() => (globalThis as any).hearthP2P?.config.bootstrap ?? (document.body.dataset.p2p as string))).toEqual(config.bootstrap);
    await expectOfflineBadge();
    await send(tab, 'sent while offline');
    await tab.reload();
    await expectMessages(tab, 'sent while online', 'sent while offline');
  }, 120_000);

  it('a new tab opens offline as well', async () => {
    // Firefox's emulation is per tab: this one is offline in that the file server is gone.
    const second = await openHearth(profile, url);
    // The chat runs in one tab at a time: the new tab takes it (the first takes it back when this one closes).
    await useHere(second);
    await expectMessages(second, 'sent while offline');
    await second.close();
  }, 120_000);

  it('when the server answers again, a reload shows the new build and the new service worker takes over', async () => {
    const index = join(dist, 'index.html');
    await writeFile(index, (await readFile(index, 'utf8')).replace('<head>', '<head>\n    <meta name="hearth-build" content="second" />'));
    // A new build changes the manifest written into sw.js: here, only its version.
    const swPath = join(dist, 'sw.js');
    const sw = await readFile(swPath, 'utf8');
    const oldVersion = /\\"version\\":\\"([0-9a-f]+)\\"/.exec(sw)![1]!;
    const newVersion = 'feed' + oldVersion.slice(4);
    await writeFile(swPath, sw.replace(oldVersion, newVersion));
    expect(await tab.evaluate(() => caches.keys())).toEqual([`hearth-page-${oldVersion}`]);
    server = await serveStatic(dist, Number(new URL(url).port), '127.0.0.1', { config });
    await tab.setOffline?.(false);
    await tab.reload();
    await expectMessages(tab, 'sent while offline');
    expect(await buildName()).toBe('second');
    // The reload's update check found the new sw.js: it precached the build and dropped the old cache. (Until
    // the engine-neutral Tab, Playwright took the Promise this returns for a truthy answer: never checked in Chromium.)
    // Chromium activates the new worker (skipWaiting) only once the old one has no fetch event in flight, and the
    // page's client keeps a long-poll open through it (up to 60 s, SYNC_TIMEOUT_CAP_MS): seen taking 30 s and more here.
    await tab.waitForFunction((name) => caches.keys().then((keys) => keys.length === 1 && keys[0] === name), `hearth-page-${newVersion}`, 90_000);
    await send(tab, 'sent after the update');
    // The fresh page is what is kept now: offline again, it is still the new one.
    await goOffline();
    await tab.reload();
    await expectMessages(tab, 'sent while offline', 'sent after the update');
    expect(await buildName()).toBe('second');
  }, 180_000);
});
