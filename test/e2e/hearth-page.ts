import { appendFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { startNodeHost, type NodeHost } from '../../src/node/node-host.ts';
import { serveStatic, type StaticServer, type StaticServerOptions } from '../../scripts/static-server.ts';
import { syncPath, type Syncer } from '../support/sync-until.ts';
import { launchChromium } from './chromium.ts';

/** The built page served on 127.0.0.1, and one Chromium to open it in. */
export interface HearthSite {
  server: StaticServer;
  browser: Browser;
  close(): Promise<void>;
}

export async function startSite(dist: string, options: StaticServerOptions = {}): Promise<HearthSite> {
  const server = await serveStatic(dist, 0, '127.0.0.1', options);
  const browser = await launchChromium();
  return {
    server,
    browser,
    close: async () => {
      await browser.close();
      await server.close();
    },
  };
}

/** Two browser homeservers, a context each, that meet through a Node relay in this process (own data folder, port 0); `initScript` runs in each page before its own scripts. */
export interface RelayedPages {
  relay: NodeHost;
  site: HearthSite;
  contexts: BrowserContext[];
  pages: Page[];
  close(): Promise<void>;
}

export async function startRelayedPages(dist: string, name: string, options: { initScript?: () => void } = {}): Promise<RelayedPages> {
  const dir = await mkdtemp(join(tmpdir(), `hearth-e2e-${name}-`));
  const relay = await startNodeHost({ dataDir: dir, port: 0, listen: ['/ip4/127.0.0.1/tcp/0/ws'], relay: true, rateLimits: false });
  const site = await startSite(dist, { config: { bootstrap: relay.p2p.multiaddrs(), iceServers: [], allowPrivateAddresses: true } });
  const contexts = [await site.browser.newContext(), await site.browser.newContext()];
  // Before any page opens: what a test records in each (its WebRTC links, say).
  if (options.initScript) for (const context of contexts) await context.addInitScript(options.initScript);
  const pages: Page[] = [];
  for (const context of contexts) pages.push(await openHearth(context, site.server.url + '/'));
  return {
    relay,
    site,
    contexts,
    pages,
    close: async () => {
      for (const context of contexts) await context.close();
      await site.close();
      await relay.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

let openedPages = 0;

/**
 * Keeps, from now on, what the p2p nodes of `context`'s pages say (`hearth p2p: …` warnings), each line tagged, in
 * `into`: a test shows them when it fails, as CI keeps nothing else. Calls `onLine` with each, for a test that waits for one.
 */
export function collectP2PLog(context: BrowserContext, tag: string, into: string[], onLine?: (line: string) => void): void {
  context.on('console', (message) => {
    const line = message.text();
    if (!line.startsWith('hearth p2p')) return;
    into.push(`${new Date().toISOString()} ${tag}: ${line}`);
    onLine?.(line);
  });
}

/** Opens the page and waits until the service worker controls it and the core answers /versions. */
export async function openHearth(context: BrowserContext, url: string): Promise<Page> {
  const page = await context.newPage();
  page.on('pageerror', (error) => console.error(`[page error] ${error.message}`));
  // HEARTH_E2E_DEBUG='libp2p:webrtc*,libp2p:webrtc:trace' (the `debug` namespaces) writes the page's libp2p log,
  // each line stamped and tagged with the page, to HEARTH_E2E_LOG (default e2e-debug.log): how the stall of issue 24 was found.
  const debug = process.env.HEARTH_E2E_DEBUG;
  if (debug) {
    const tag = `page${++openedPages}`;
    const file = process.env.HEARTH_E2E_LOG ?? 'e2e-debug.log';
    await page.addInitScript((namespaces) => localStorage.setItem('debug', namespaces), debug);
    page.on('console', (message) => appendFileSync(file, `${new Date().toISOString()} ${tag} ${message.text()}\n`));
  }
  await page.goto(url);
  await page.waitForFunction(() => document.body.dataset.homeserver === 'ready', undefined, { timeout: 30_000 });
  return page;
}

export interface FetchResult {
  status: number;
  body: any;
}

/**
 * fetch from inside the page, so the request goes through the service worker as
 * a client's would (Playwright's page.request goes around it).
 */
export function pageFetch(page: Page, method: string, path: string, options: { token?: string; body?: unknown; rawBody?: string } = {}): Promise<FetchResult> {
  return page.evaluate(
    async ({ method, path, token, body, rawBody }) => {
      const headers: Record<string, string> = {};
      if (token) headers['authorization'] = `Bearer ${token}`;
      if (body !== undefined || rawBody !== undefined) headers['content-type'] = 'application/json';
      const response = await fetch(path, { method, headers, body: rawBody ?? (body === undefined ? undefined : JSON.stringify(body)) });
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // not JSON: keep the text
      }
      return { status: response.status, body: parsed };
    },
    { method, path, token: options.token, body: options.body, rawBody: options.rawBody },
  );
}

/** /sync from inside the page (through the service worker), long-polling up to 10 s; `page` may be a getter, read at each poll. */
export function pageSyncer(page: Page | (() => Page), token: string): Syncer {
  return async (since) => {
    const { status, body } = await pageFetch(typeof page === 'function' ? page() : page, 'GET', syncPath(since, 10_000), { token });
    if (status !== 200) throw new Error(`page /sync: ${status} ${JSON.stringify(body)}`);
    return body;
  };
}

/** The server name of the homeserver the page's host runs. */
export const pageServerName = (page: Page): Promise<string> => page.evaluate(() => (globalThis as any).hearthHost.state.serverName as string);

/** A libp2p peer the page's node knows, and how it reaches it. */
export type Peer = { server_name: string; multiaddrs: string[]; via: string };
export const peersOf = (page: Page): Promise<Peer[]> => page.evaluate(() => (globalThis as any).hearthP2P.node.peers());

/** The session the built-in client stored after signing in. */
export async function storedSession(page: Page): Promise<{ userId: string; accessToken: string; deviceId: string }> {
  const raw = await page.evaluate(() => localStorage.getItem('hearth-session'));
  if (!raw) throw new Error('no session stored');
  return JSON.parse(raw);
}

/** Creates an account through the account form, saving its recovery key as the page asks: returns the key. */
export async function registerThroughUi(page: Page, username: string, password = 'correct horse battery staple'): Promise<string | undefined> {
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password', { exact: true }).fill(password);
  // Account creation asks for the password twice.
  await page.getByLabel('Confirm password').fill(password);
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.getByLabel('New room name').waitFor();
  return saveRecoveryKey(page);
}

/**
 * The last step of account creation (issue 38): the modal dialog that shows the new recovery key;
 * confirms it saved and returns it. Undefined when the page's crypto could not start (the dialog goes).
 */
export async function saveRecoveryKey(page: Page): Promise<string | undefined> {
  const key = page.getByRole('dialog', { name: 'Save your recovery key' }).getByLabel('Your recovery key');
  await page.waitForFunction(() => !document.querySelector('dialog.recovery-dialog[open]') || document.querySelector('dialog .recovery-key'), undefined, { timeout: 60_000 });
  if ((await key.count()) === 0) return undefined;
  const text = (await key.textContent())!;
  await page.getByRole('button', { name: 'I have saved my recovery key' }).click();
  await page.getByRole('dialog').waitFor({ state: 'detached' });
  return text;
}

/** Signs out from the top bar, confirming in the dialog that asks first (issue 38), and waits for the sign-in form. */
export async function signOutThroughUi(page: Page): Promise<void> {
  await page.getByRole('banner').getByRole('button', { name: 'Sign out' }).click();
  // "Sign out?", or "Sign out without your recovery key?" with "Sign out anyway".
  await page.getByRole('dialog', { name: /^Sign out/ }).getByRole('button', { name: /^Sign out/ }).click();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
}

/** A tab opened while another runs the chat client: it says so, and "Use here" moves the chat to it (issue 25). */
export async function useHere(page: Page): Promise<void> {
  await page.getByRole('heading', { name: 'Hearth is open in another tab' }).waitFor({ timeout: 30_000 });
  await page.getByRole('button', { name: 'Use here' }).click();
  await page.getByLabel('New room name').waitFor();
}

/**
 * The Peers view (issue 38 item 7: the peer tools have a view of their own, in the room's place): opened, if it is
 * not showing, from the top bar's "Peers · N connected", or on a phone from its Peers tab. Returns the view.
 */
export async function openPeersView(page: Page): Promise<Locator> {
  const view = page.getByRole('region', { name: 'Peers', exact: true });
  if (!(await view.isVisible())) await page.getByRole('button', { name: /^Peers\b/ }).click();
  await view.waitFor();
  return view;
}

/** Settings (your profile, notifications), opened from the top bar if it is not showing. Returns the view. */
export async function openSettingsView(page: Page): Promise<Locator> {
  const view = page.getByRole('region', { name: 'Settings', exact: true });
  if (!(await view.isVisible())) await page.getByRole('banner').getByRole('button', { name: 'Settings', exact: true }).click();
  await view.waitFor();
  return view;
}

/** Closes the Peers view or Settings, if one shows, as a person would: Escape, back to the room. */
export async function closeView(page: Page): Promise<void> {
  const open = page.locator('.view-pane:not([hidden])');
  if ((await open.count()) === 0) return;
  await page.keyboard.press('Escape');
  await open.waitFor({ state: 'detached' });
}

export async function createRoomThroughUi(page: Page, name: string): Promise<void> {
  await page.getByLabel('New room name').fill(name);
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  await page.locator('.room-title', { hasText: name }).waitFor();
}

export async function sendThroughUi(page: Page, text: string): Promise<void> {
  await page.getByLabel('Message').fill(text);
  await page.getByRole('button', { name: 'Send' }).click();
  await page.locator('.event:not(.pending) .body', { hasText: text }).waitFor();
}

/** Which role each open page's host has, and how many core workers run across them. */
export async function coreCensus(pages: Page[]): Promise<{ roles: string[]; coreWorkers: number }> {
  const roles: string[] = [];
  for (const page of pages) roles.push(await page.evaluate(() => (globalThis as any).hearthHost?.state.role as string));
  const coreWorkers = pages.reduce((n, page) => n + page.workers().length, 0);
  return { roles, coreWorkers };
}
