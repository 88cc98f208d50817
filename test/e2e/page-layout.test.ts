import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startNodeHost, type NodeHost } from '../../src/node/node-host.ts';
import { createRoomThroughUi, openHearth, registerThroughUi, startSite, type HearthSite } from './hearth-page.ts';

// Issue 38 item 7: "The desktop sidebar reads like a developer panel … Multiaddr inputs share the sidebar with the
// rooms. Move the peer tools into a Peers or settings view." The sidebar holds the rooms and the ways to start or
// join one; the peer tools have a Peers view of their own, opened from the top bar by a button that says how many
// peers are connected (on a phone, from its Peers tab), and your profile a Settings view, opened beside your ID.
// Everything is found as a person finds it: by role and label. A is the page's bootstrap peer; B is a Node peer
// nobody told the page of, added by its address from the Peers view.

let dirA: string;
let dirB: string;
let peerA: NodeHost;
let peerB: NodeHost;
let site: HearthSite;
let context: BrowserContext;
let page: Page;

/** The sidebar: the navigation that holds the room list. */
const sidebar = () => page.getByRole('navigation').filter({ has: page.getByRole('list', { name: 'Rooms', exact: true }) });
const peersView = () => page.getByRole('region', { name: 'Peers', exact: true });
const settingsView = () => page.getByRole('region', { name: 'Settings', exact: true });
/** The top bar's Peers button, whatever count it says. */
const peersButton = () => page.getByRole('banner').getByRole('button', { name: /^Peers · / });
const settingsButton = () => page.getByRole('banner').getByRole('button', { name: 'Settings', exact: true });
const focused = (locator: Locator) => locator.evaluate((element) => element === document.activeElement);

beforeAll(async () => {
  dirA = await mkdtemp(join(tmpdir(), 'hearth-e2e-layout-a-'));
  dirB = await mkdtemp(join(tmpdir(), 'hearth-e2e-layout-b-'));
  peerA = await startNodeHost({ dataDir: dirA, port: 0, listen: ['/ip4/127.0.0.1/tcp/0/ws'], rateLimits: false });
  peerB = await startNodeHost({ dataDir: dirB, port: 0, listen: ['/ip4/127.0.0.1/tcp/0/ws'], rateLimits: false });
  site = await startSite(inject('hearthDist'), { config: { bootstrap: peerA.p2p.multiaddrs(), iceServers: [], allowPrivateAddresses: true } });
  context = await site.browser.newContext({ viewport: { width: 1280, height: 800 } });
  page = await openHearth(context, site.server.url + '/');
  await registerThroughUi(page, 'lena');
  await createRoomThroughUi(page, 'Tea');
}, 90_000);

afterAll(async () => {
  await context?.close();
  await site?.close();
  await Promise.all([peerA?.close(), peerB?.close()]);
  for (const dir of [dirA, dirB]) if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the page’s layout: rooms in the sidebar, peers and settings in views of their own', () => {
  it('the desktop sidebar holds the rooms and the ways to start or join one: no peer tools, no profile', async () => {
    await sidebar().getByRole('list', { name: 'Rooms', exact: true }).waitFor();
    expect(await sidebar().getByRole('list', { name: 'Direct chats' }).isVisible()).toBe(true);
    for (const label of ['New room name', 'Room ID to join', 'Start a direct chat with']) expect(await sidebar().getByLabel(label).isVisible(), label).toBe(true);
    for (const label of ['Peer address', 'Invite to the demo room', 'Your Matrix ID', 'Your invite link', 'Display name', 'Your avatar image', 'Private notifications (no sender, no text)']) {
      expect(await sidebar().getByLabel(label).count(), label).toBe(0);
    }
    expect(await sidebar().getByRole('list', { name: 'Connected peers' }).count()).toBe(0);
    // Nor do they show anywhere else until asked for: the room has the rest of the screen.
    expect(await page.getByLabel('Peer address').isVisible()).toBe(false);
    expect(await page.getByLabel('Display name').isVisible()).toBe(false);
    expect(await page.getByLabel('Message').isVisible()).toBe(true);
  });

  it('the top bar says how many peers are connected, and its button opens the Peers view in the room’s place', async () => {
    await page.getByRole('banner').getByRole('button', { name: 'Peers · 1 connected', exact: true }).waitFor({ timeout: 30_000 });
    expect(await peersButton().getAttribute('aria-expanded')).toBe('false');
    expect(await peersView().isVisible()).toBe(false);
    await peersButton().click();
    await peersView().waitFor();
    expect(await peersButton().getAttribute('aria-expanded')).toBe('true');
    // Its heading has the focus: a screen reader says where the person is.
    expect(await focused(peersView().getByRole('heading', { name: 'Peers', exact: true }))).toBe(true);
    const row = peersView().getByRole('list', { name: 'Connected peers' }).locator(`.peer[data-server-name="${peerA.homeserver.serverName}"]`);
    await row.waitFor();
    expect(await row.getAttribute('data-via')).toBe('direct');
    for (const label of ['Peer address', 'Your Matrix ID', 'Your invite link', 'Invite to the demo room']) expect(await peersView().getByLabel(label).isVisible(), label).toBe(true);
    // The room list stays beside it; the room (its composer, its members) gives way.
    expect(await sidebar().isVisible()).toBe(true);
    expect(await page.getByLabel('Message').isVisible()).toBe(false);
    expect(await page.getByLabel('User ID to invite').isVisible()).toBe(false);
    const [view, list] = [(await peersView().boundingBox())!, (await sidebar().boundingBox())!];
    expect(view.x).toBeGreaterThanOrEqual(list.x + list.width - 1);
    expect(view.x + view.width).toBeLessThanOrEqual(1280);
  });

  it('adding a peer by its address works from the Peers view, and the top bar counts it', async () => {
    const address = peerB.p2p.multiaddrs()[0]!;
    await peersView().getByLabel('Peer address').fill(address);
    await peersView().getByRole('button', { name: 'Add', exact: true }).click();
    await peersView().getByRole('list', { name: 'Connected peers' }).locator(`.peer[data-server-name="${peerB.homeserver.serverName}"]`).waitFor({ timeout: 20_000 });
    await peersView().getByRole('status').filter({ hasText: 'Connected to' }).waitFor();
    await peersView().getByRole('list', { name: 'Peers you added' }).locator(`[data-address="${address}"]`).waitFor();
    await page.getByRole('banner').getByRole('button', { name: 'Peers · 2 connected', exact: true }).waitFor();
    // Taken off the list again (an open connection stays until it drops).
    await peersView().getByRole('button', { name: `Remove ${address}` }).click();
    await peersView().getByRole('list', { name: 'Peers you added' }).locator(`[data-address="${address}"]`).waitFor({ state: 'detached' });
  });

  it('Escape closes it, from a field in it too: the room is back, and the focus on the button that opened it', async () => {
    await peersView().getByLabel('Peer address').focus();
    await page.keyboard.press('Escape');
    await peersView().waitFor({ state: 'hidden' });
    expect(await page.getByLabel('Message').isVisible()).toBe(true);
    expect(await page.locator('.room-title').textContent()).toBe('Tea');
    expect(await peersButton().getAttribute('aria-expanded')).toBe('false');
    expect(await focused(peersButton())).toBe(true);
    // A dialog above the view takes its own Escape: an invite link's question (Escape is "Not now") goes, the view it opened stays.
    await page.goto(`${site.server.url}/#invite=@someone:example.org`);
    const asked = page.getByRole('dialog', { name: 'Start a direct chat?' });
    await asked.waitFor();
    expect(await peersView().isVisible()).toBe(true);
    await page.keyboard.press('Escape');
    await asked.waitFor({ state: 'detached' });
    expect(new URL(page.url()).hash).toBe('');
    expect(await peersView().isVisible()).toBe(true);
    await page.keyboard.press('Escape');
    await peersView().waitFor({ state: 'hidden' });
    // Close does the same; the button itself closes it again; and a room picked in the list is shown in its place.
    await peersButton().click();
    await peersView().getByRole('button', { name: 'Close Peers' }).click();
    await peersView().waitFor({ state: 'hidden' });
    await peersButton().click();
    await peersView().waitFor();
    await peersButton().click();
    await peersView().waitFor({ state: 'hidden' });
    await peersButton().click();
    await createRoomThroughUi(page, 'Biscuits');
    expect(await peersView().isVisible()).toBe(false);
    await sidebar().locator('.room-item', { hasText: 'Tea' }).click();
    await page.locator('.room-title', { hasText: 'Tea' }).waitFor();
  });

  it('Settings opens from the top bar, beside your ID: your profile and the notifications’ privacy; Escape closes it', async () => {
    expect(await settingsButton().getAttribute('aria-expanded')).toBe('false');
    await settingsButton().click();
    await settingsView().waitFor();
    expect(await focused(settingsView().getByRole('heading', { name: 'Settings', exact: true }))).toBe(true);
    // Read from the homeserver as it opens.
    await expect.poll(() => settingsView().getByLabel('Display name').inputValue(), { timeout: 20_000 }).toBe('lena');
    expect(await settingsView().getByLabel('Your avatar image').isVisible()).toBe(true);
    expect(await settingsView().getByLabel('Private notifications (no sender, no text)').isVisible()).toBe(true);
    expect(await page.getByLabel('Message').isVisible()).toBe(false);
    // The Peers button goes from one view to the other; Escape then goes back to the room.
    await peersButton().click();
    await peersView().waitFor();
    expect(await settingsView().isVisible()).toBe(false);
    await settingsButton().click();
    await settingsView().waitFor();
    await page.keyboard.press('Escape');
    await settingsView().waitFor({ state: 'hidden' });
    expect(await page.getByLabel('Message').isVisible()).toBe(true);
    expect(await focused(settingsButton())).toBe(true);
  });

  it('on a phone (390 px) the Peers tab shows the Peers view alone under the tabs, and Settings still opens from the top bar', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForFunction(() => window.innerWidth === 390);
    const tab = page.getByRole('button', { name: 'Peers', exact: true });
    // The tab opens it here: the top bar keeps its offline indicator, not a second Peers button.
    expect(await peersButton().isVisible()).toBe(false);
    await tab.click();
    await peersView().waitFor();
    expect(await tab.getAttribute('aria-pressed')).toBe('true');
    expect(await sidebar().isVisible()).toBe(false);
    expect(await page.getByLabel('Message').isVisible()).toBe(false);
    await peersView().locator(`.peer[data-server-name="${peerA.homeserver.serverName}"]`).waitFor();
    const field = peersView().getByLabel('Peer address');
    await field.scrollIntoViewIfNeeded();
    const box = (await field.boundingBox())!;
    expect(box.x).toBeGreaterThanOrEqual(0);
    expect(box.x + box.width).toBeLessThanOrEqual(390);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    // The Rooms tab goes back to the list.
    await page.getByRole('button', { name: 'Rooms', exact: true }).click();
    await peersView().waitFor({ state: 'hidden' });
    expect(await sidebar().isVisible()).toBe(true);
    // Settings, from the top bar, alone under the tabs too; Escape goes back to the list.
    await settingsButton().click();
    await settingsView().waitFor();
    expect(await sidebar().isVisible()).toBe(false);
    const name = (await settingsView().getByLabel('Display name').boundingBox())!;
    expect(name.x + name.width).toBeLessThanOrEqual(390);
    await page.keyboard.press('Escape');
    await settingsView().waitFor({ state: 'hidden' });
    expect(await sidebar().isVisible()).toBe(true);
  });
});
