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

  it('a reload says it is loading until the rooms come, never that there are none, and the open room fills a screen', async () => {
    const { accessToken } = await storedSession(page);
    // A room with more history than a screen holds, the most recent: the page opens it after the reload.
    const created = await pageFetch(page, 'POST', '/_matrix/client/v3/createRoom', { token: accessToken, body: { name: 'Long talk', preset: 'private_chat' } });
    expect(created.status).toBe(200);
    const roomPath = `/_matrix/client/v3/rooms/${encodeURIComponent(created.body.room_id)}/send/m.room.message`;
    for (let i = 1; i <= 40; i++) expect((await pageFetch(page, 'PUT', `${roomPath}/long${i}`, { token: accessToken, body: { msgtype: 'm.text', body: `Line ${i}` } })).status).toBe(200);
    // From the next load on, what the room lists and the room pane say at each change, with how many rooms are listed.
    await page.addInitScript(() => {
      const seen: string[] = ((globalThis as any).listsSeen = []);
      new MutationObserver(() => {
        if (!document.querySelector('.room-list')) return;
        const rooms = document.querySelectorAll('.room-list .room-item').length;
        const words = [...document.querySelectorAll('.room-list .hint, .room .room-title, .room .timeline .notice')].map((e) => e.textContent);
        const line = `${rooms}: ${words.join(' | ')}`;
        if (seen.at(-1) !== line) seen.push(line);
      }).observe(document, { childList: true, subtree: true, characterData: true });
    });
    await page.reload();
    const timeline = page.getByRole('list', { name: 'Timeline' });
    await timeline.locator('.event .body', { hasText: /^Line 40$/ }).waitFor({ timeout: 60_000 });
    const seen: string[] = await page.evaluate(() => (globalThis as any).listsSeen);
    // Before any room was listed the page said it was loading, and never that there were no rooms.
    expect(seen.some((line) => line.startsWith('0: ') && line.includes('Loading'))).toBe(true);
    expect(seen.filter((line) => line.startsWith('0: ') && /No rooms yet|None yet|No room selected|Create a room/.test(line))).toEqual([]);
    expect(seen.filter((line) => line.includes('No rooms yet'))).toEqual([]);
    // The room reopened shows more than a screenful of history, the newest at the bottom, in view.
    const fills = () => timeline.evaluate((list) => list.scrollHeight > list.clientHeight && list.scrollHeight - list.scrollTop - list.clientHeight < 40);
    await expect.poll(fills, { timeout: 30_000 }).toBe(true);
    // And again after another room was open.
    await page.locator('.room-item', { hasText: /^Room 3/ }).click();
    await page.locator('.room-title', { hasText: 'Room 3' }).waitFor();
    await page.locator('.room-item', { hasText: /^Long talk/ }).click();
    await timeline.locator('.event .body', { hasText: /^Line 40$/ }).waitFor();
    await expect.poll(fills, { timeout: 30_000 }).toBe(true);
  }, 120_000);

  it('runs /sync when told to, with the same room list', async () => {
    await page.evaluate(() => localStorage.setItem('hearth-sync', 'sync'));
    paths = [];
    await page.reload();
    await page.waitForFunction(() => document.querySelectorAll('.room-list:not(.direct-list) .room-item').length === 26, undefined, { timeout: 60_000 });
    expect((await names('.room-list:not(.direct-list):not(.left-list)')).slice(0, 2)).toEqual(['Long talk', 'Room 0']);
    // On /sync too: loading, never "no rooms", before the first answer.
    const seen: string[] = await page.evaluate(() => (globalThis as any).listsSeen);
    expect(seen.some((line) => line.startsWith('0: ') && line.includes('Loading'))).toBe(true);
    expect(seen.filter((line) => line.startsWith('0: ') && /No rooms yet|None yet|No room selected|Create a room/.test(line))).toEqual([]);
    expect(paths).toContain(SYNC);
    expect(paths).not.toContain(SLIDING);
    await page.evaluate(() => localStorage.removeItem('hearth-sync'));
  }, 120_000);
});
