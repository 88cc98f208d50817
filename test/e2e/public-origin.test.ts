import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startNodeHost, type NodeHost } from '../../src/node/node-host.ts';
import { serveStatic, type StaticServer } from '../../scripts/static-server.ts';
import { PROJECT_ROOT } from '../../scripts/build.ts';
import { spawnHearth, stopAllHearths } from '../support/hearth-process.ts';
import { freePort } from '../support/node-peer.ts';
import { startNginx } from '../support/nginx.ts';
import { createTestCa, type TestCa } from '../support/test-ca.ts';
import { openHearth, openPeersView, pageServerName, peersOf, registerThroughUi } from './hearth-page.ts';
import { launchTrustingChromium, type TrustingChromium } from './trusting-chromium.ts';

// Issue 40, "Deploy it": the built page as any HTTPS static host serves it, under a path prefix, with a
// certificate from a CA of the test's own that Chromium trusts as a person's system would (an NSS
// database), under names (hearth.test, peer.hearth.test) rather than 127.0.0.1; and the public Node peer
// reached the way a page served over HTTPS may reach one: secure WebSockets by name, with the config
// saying nothing about private addresses (the browser's own gater stays on). The peer is reached two ways:
// listening on /wss itself with --tls-cert/--tls-key, and behind a reverse proxy that ends TLS, a plain /ws
// listener announcing the proxy's /dns4/…/wss address (--announce).

const PREFIX = '/apps/hearth';
let ca: TestCa;
let leaf: { cert: string; key: string };
let chromium: TrustingChromium;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  ca = createTestCa();
  leaf = ca.issue(['hearth.test', 'peer.hearth.test']);
  chromium = await launchTrustingChromium({ caFile: ca.certFile, hosts: { 'hearth.test': '127.0.0.1', 'peer.hearth.test': '127.0.0.1' } });
});
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch((error) => console.error(error));
  await chromium?.close();
  ca?.dispose();
});

async function startPeer(name: string, options: { listen: string[]; announce?: string[]; tls?: { cert: string; key: string } }): Promise<NodeHost> {
  const dataDir = await mkdtemp(join(tmpdir(), `hearth-public-${name}-`));
  const peer = await startNodeHost({ dataDir, port: 0, relay: true, mailbox: true, rateLimits: false, ...options });
  cleanups.push(async () => (await peer.close(), await rm(dataDir, { recursive: true, force: true })));
  return peer;
}

async function startPublicSite(config: unknown | (() => unknown)): Promise<StaticServer> {
  const site = await serveStatic(inject('hearthDist'), 0, '127.0.0.1', { prefix: PREFIX, tls: leaf, publicHost: 'hearth.test', ...(typeof config === 'function' ? { configOf: config as () => unknown } : { config }) });
  cleanups.push(() => site.close());
  return site;
}

/** A person opens the public URL: the service worker takes the page's folder, and the core answers. */
async function openPublicPage(context: BrowserContext, siteUrl: string): Promise<Page> {
  const page = await openHearth(context, `${siteUrl}/`);
  const registration = await page.evaluate(async () => {
    const registration = await navigator.serviceWorker.ready;
    return { scope: registration.scope, script: navigator.serviceWorker.controller?.scriptURL };
  });
  expect(registration).toEqual({ scope: `${siteUrl}/`, script: `${siteUrl}/sw.js` });
  return page;
}

describe('a page served from a public HTTPS origin under a path prefix', () => {
  it('takes the service worker for its folder, creates an account, and reaches a Node peer over wss:// by name', async () => {
    const port = await freePort();
    const peer = await startPeer('wss', { listen: [`/ip4/127.0.0.1/tcp/${port}/wss`], announce: [`/dns4/peer.hearth.test/tcp/${port}/wss`], tls: leaf });
    expect(peer.p2p.multiaddrs()).toEqual([`/dns4/peer.hearth.test/tcp/${port}/wss/p2p/${peer.p2p.peerId}`]);
    const site = await startPublicSite({ bootstrap: peer.p2p.multiaddrs(), iceServers: [] });
    // Nothing of the site is at the origin's root: a page that looked there would not start.
    expect((await fetchStatus(site, '/sw.js'))).toBe(404);

    const context = await chromium.browser.newContext();
    cleanups.push(() => context.close());
    const page = await openPublicPage(context, site.url);
    // An installable app: the browser finds its manifest (icons, start URL, scope: the page's folder) and nothing missing.
    const cdp = await context.newCDPSession(page);
    // (Playwright's contexts are incognito ones, which the browser never installs from; a person's profile is not.)
    const { installabilityErrors } = await cdp.send('Page.getInstallabilityErrors');
    expect(installabilityErrors.filter((error) => error.errorId !== 'in-incognito')).toEqual([]);
    const { url: manifestUrl } = await cdp.send('Page.getAppManifest');
    expect(manifestUrl).toBe(`${site.url}/manifest.webmanifest`);
    await registerThroughUi(page, 'ana');
    // The leader's node dialled the config beside the page, and reached the peer over secure WebSockets.
    await page.waitForFunction((name) => (globalThis as any).hearthP2P?.node.peers().some((p: { server_name: string }) => p.server_name === name), peer.homeserver.serverName, { timeout: 30_000 });
    const reached = (await peersOf(page)).find((p) => p.server_name === peer.homeserver.serverName)!;
    expect(reached.multiaddrs.some((address) => address.includes('/tcp/') && address.includes('/wss'))).toBe(true);
    expect(peer.p2p.peers().map((p) => p.server_name)).toContain(await pageServerName(page));
    expect(await page.evaluate(() => (globalThis as any).hearthP2P.config.bootstrap)).toEqual(peer.p2p.multiaddrs());
    // The invite link names the page where it is, prefix and all.
    expect(await page.getByLabel('Your invite link').inputValue()).toBe(`${site.url}/#invite=@ana:${await pageServerName(page)}`);
  });

  it('tries every bootstrap peer of the config, says in the Peers panel which it reached and how, and remembers the one it met', async () => {
    const port = await freePort();
    const peer = await startPeer('several', { listen: [`/ip4/127.0.0.1/tcp/${port}/wss`], announce: [`/dns4/peer.hearth.test/tcp/${port}/wss`], tls: leaf });
    // A second peer that is down: a port nothing listens on, under a peer ID of a node that never ran.
    const downPort = await freePort();
    const down = `/dns4/peer.hearth.test/tcp/${downPort}/wss/p2p/${peerIdFromPrivateKey(await generateKeyPair('Ed25519'))}`;
    let config: { bootstrap: string[]; iceServers: [] } = { bootstrap: [down, ...peer.p2p.multiaddrs()], iceServers: [] };
    const site = await startPublicSite(() => config);
    const context = await chromium.browser.newContext();
    cleanups.push(() => context.close());
    let page = await openPublicPage(context, site.url);
    await registerThroughUi(page, 'cy');
    await openPeersView(page);
    const reached = page.locator(`.bootstrap-peer[data-reached="true"]`);
    await reached.waitFor({ timeout: 30_000 });
    expect(await page.locator('.bootstrap-summary').textContent()).toBe('Bootstrap peers: 1 of 2 reached');
    expect(await reached.textContent()).toBe(`peer.hearth.test:${port} reached over secure WebSockets`);
    expect(await page.locator(`.bootstrap-peer[data-reached="false"]`).textContent()).toBe(`peer.hearth.test:${downPort} not reached: tried again every few seconds`);
    expect(await page.locator(`.peer[data-server-name="${peer.homeserver.serverName}"] .how`).textContent()).toBe('secure WebSockets');

    // The site's config now lists only the peer that is down: the page still reaches the one it met, from its own peer store.
    config = { bootstrap: [down], iceServers: [] };
    await page.close();
    page = await openPublicPage(context, site.url);
    await page.waitForFunction((name) => (globalThis as any).hearthP2P?.node.peers().some((p: { server_name: string }) => p.server_name === name), peer.homeserver.serverName, { timeout: 30_000 });
    expect(await page.locator('.bootstrap-summary').textContent()).toBe('Bootstrap peers: 0 of 1 reached');
  });

  it('reaches a Node peer over WebRTC-Direct alone: by IP and certificate hash, with no domain and no CA for the peer, at the same address after a restart', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'hearth-public-webrtc-direct-'));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    // `npm run serve` in a process of its own, as a person runs it (from source here): WebRTC-Direct's native
    // module (node-datachannel) once aborted a process that stopped and restarted its listener in place.
    const start = () => spawnHearth({ entry: join(PROJECT_ROOT, 'src/node/serve.ts'), nodeFlags: ['--import', 'tsx'], dataDir, listen: [`/ip4/127.0.0.1/udp/${udpPort}/webrtc-direct`], args: ['--relay'] });
    const udpPort = await freePort();
    let peer = await start();
    cleanups.push(() => stopAllHearths());
    const [address] = peer.multiaddrs;
    expect(address).toMatch(/^\/ip4\/127\.0\.0\.1\/udp\/\d+\/webrtc-direct\/certhash\/[\w-]+\/p2p\//);
    // The page on 127.0.0.1 may dial a loopback address (as `npm start` allows); on the internet the peer's address is public.
    const site = await startPublicSite({ bootstrap: [address], iceServers: [], allowPrivateAddresses: true });
    const context = await chromium.browser.newContext();
    cleanups.push(() => context.close());
    const page = await openPublicPage(context, site.url);
    await registerThroughUi(page, 'dee');
    await openPeersView(page);
    const row = page.locator(`.peer[data-server-name="${peer.serverName}"]`);
    await row.waitFor({ timeout: 30_000 });
    expect(await row.locator('.how').textContent()).toBe('WebRTC-Direct');

    // Restarted on its folder, the peer keeps its certificate, so the address the site's config names still reaches it.
    await peer.stop();
    await row.waitFor({ state: 'detached', timeout: 30_000 });
    peer = await start();
    expect(peer.multiaddrs).toEqual([address]);
    await row.waitFor({ timeout: 30_000 });
  });

  it('served by nginx, reaches a peer behind nginx ending TLS, by the /wss address the peer announces', async () => {
    const [sitePort, proxyPort, wsPort] = [await freePort(), await freePort(), await freePort()];
    const peer = await startPeer('proxied', { listen: [`/ip4/127.0.0.1/tcp/${wsPort}/ws`], announce: [`/dns4/peer.hearth.test/tcp/${proxyPort}/wss`] });
    expect(peer.p2p.multiaddrs()).toEqual([`/dns4/peer.hearth.test/tcp/${proxyPort}/wss/p2p/${peer.p2p.peerId}`]);
    const nginx = await startNginx([
      { serverName: 'hearth.test', port: sitePort, static: { root: inject('hearthDist'), prefix: PREFIX, config: { bootstrap: peer.p2p.multiaddrs(), iceServers: [] } } },
      { serverName: 'peer.hearth.test', port: proxyPort, proxyTo: `127.0.0.1:${wsPort}` },
    ], leaf);
    cleanups.push(() => nginx.close());
    const siteUrl = `https://hearth.test:${sitePort}${PREFIX}`;

    const context = await chromium.browser.newContext();
    cleanups.push(() => context.close());
    const page = await openPublicPage(context, siteUrl);
    await registerThroughUi(page, 'ben');
    await page.waitForFunction((name) => (globalThis as any).hearthP2P?.node.peers().some((p: { server_name: string }) => p.server_name === name), peer.homeserver.serverName, { timeout: 30_000 });
    expect(peer.p2p.peers().map((p) => p.server_name)).toContain(await pageServerName(page));
    // Through the proxy: the page's connection is to the announced address, nginx's port.
    const reached = (await peersOf(page)).find((p) => p.server_name === peer.homeserver.serverName)!;
    expect(reached.multiaddrs, await nginx.log()).toContainEqual(expect.stringContaining(`/tcp/${proxyPort}/wss`));
  });
});

async function fetchStatus(site: StaticServer, path: string): Promise<number> {
  const { request } = await import('node:https');
  const url = new URL(site.url);
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port: url.port, path, servername: 'hearth.test', ca: ca.cert }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    }).on('error', reject).end();
  });
}

