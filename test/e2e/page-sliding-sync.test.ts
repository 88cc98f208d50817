import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openHearth, pageFetch, registerThroughUi, startSite, storedSession, type HearthSite } from './hearth-page.ts';

// Issue 25: the page's client runs simplified sliding sync (MSC4186) when /versions says the homeserver serves
// it, and /sync only when told to (localStorage `hearth-sync` = `sync`). What it asks for is read from the
// browser's own request log (every request the page makes, answered by the service worker), not the client's state.

const SLIDING = '/_matrix/client/unstable/org.matrix.simplified_msc3575/sync';
const SYNC = '/_matrix/client/v3/sync';

let site: HearthSite;
let context: BrowserContext;
let page: Page;
/** The paths of the page's requests since the last `clear`. */
let paths: string[] = [];

beforeAll(async () => {
  site = await startSite(inject('hearthDist'), { config: { bootstrap: [], iceServers: [], allowPrivateAddresses: true } });
  context = await site.browser.newContext();
  context.on('request', (request) => paths.push(new URL(request.url()).pathname));
  page = await openHearth(context, site.server.url + '/');
  await registerThroughUi(page, 'ana');
  await page.getByRole('button', { name: 'I have saved my recovery key' }).click({ timeout: 60_000 });
}, 90_000);

afterAll(async () => {
  await context?.close();
  await site?.close();
});

const names = (list: string) => page.locator(`${list} .room-item .name`).allTextContents();

describe('the page on sliding sync', () => {
  it('shows a fresh load’s room list from sliding sync, every room, newest first, and no /sync', async () => {
    const { accessToken, userId } = await storedSession(page);
    expect(paths).toContain(SLIDING);
    expect(paths).not.toContain(SYNC);
    // More rooms than a list's first answer holds (20): the lists grow until every room is in.
    const rooms: string[] = [];
    for (let i = 0; i < 25; i++) {
      const created = await pageFetch(page, 'POST', '/_matrix/client/v3/createRoom', { token: accessToken, body: { name: `Room ${i}`, preset: 'private_chat' } });
      expect(created.status).toBe(200);
      rooms.push(created.body.room_id);
    }
    // The oldest room gets the latest message: on top after the reload.
    const sent = await pageFetch(page, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(rooms[0]!)}/send/m.room.message/t1`, { token: accessToken, body: { msgtype: 'm.text', body: 'the latest' } });
    expect(sent.status).toBe(200);

    paths = [];
    await page.reload();
    await page.locator('.room-list .room-item .name', { hasText: /^Room 1$/ }).waitFor({ timeout: 60_000 });
    await page.waitForFunction(() => document.querySelectorAll('.room-list:not(.direct-list) .room-item').length === 25, undefined, { timeout: 60_000 });
    const listed = await names('.room-list:not(.direct-list):not(.left-list)');
    expect(listed[0]).toBe('Room 0');
    expect(listed.slice(1)).toEqual(Array.from({ length: 24 }, (_, i) => `Room ${24 - i}`));
    // The preview is the list's one timeline event.
    await page.locator('.room-item', { hasText: 'Room 0' }).locator('.preview', { hasText: 'the latest' }).waitFor();
    expect(paths.filter((p) => p === SLIDING).length).toBeGreaterThan(1);
    expect(paths).not.toContain(SYNC);

    // Opened, the room is subscribed to: its whole history (the room's start) shows, and the members pane lists ana.
    await page.locator('.room-item', { hasText: /^Room 3/ }).click();
    await page.locator('.timeline .notice', { hasText: 'created the room' }).waitFor({ timeout: 30_000 });
    await page.locator('.members', { hasText: userId.slice(1).split(':')[0]! }).waitFor();
    expect(paths).not.toContain(SYNC);
  }, 180_000);

  it('runs /sync when told to, with the same room list', async () => {
    await page.evaluate(() => localStorage.setItem('hearth-sync', 'sync'));
    paths = [];
    await page.reload();
    await page.waitForFunction(() => document.querySelectorAll('.room-list:not(.direct-list) .room-item').length === 25, undefined, { timeout: 60_000 });
    expect((await names('.room-list:not(.direct-list):not(.left-list)'))[0]).toBe('Room 0');
    expect(paths).toContain(SYNC);
    expect(paths).not.toContain(SLIDING);
    await page.evaluate(() => localStorage.removeItem('hearth-sync'));
  }, 120_000);
});
