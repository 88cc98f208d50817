import type { Page, Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRoomThroughUi, pageFetch, sendThroughUi, storedSession } from './hearth-page.ts';
import { meetInEncryptedDm, startPagePair, type PagePair } from './page-pair.ts';

// Issue 38, read markers: "a 'new since you last read' line, and a jump to the first unread". Ana and Ben share an
// encrypted DM across two browser homeservers (sliding sync, the page's default). Ben reads, goes to another room,
// and Ana writes: opening the DM, Ben finds a "New" line right before her first message since, and his fully-read
// marker (`m.fully_read` on his homeserver) moves to the newest once he has seen it, never while he is elsewhere
// or the tab is hidden. A reload then shows no line, and after more messages it shows the line in its new place. When the first unread
// message is above what shows, "Jump to first unread" takes him there, loading the history back to it when it is
// older than what the room's subscription brought.

let pair: PagePair;
let pageA: Page;
let pageB: Page;
let roomId: string;
/** The `m.fully_read` of each POST /read_markers Ben's page made, in order (Chromium's request log, through the service worker). */
const benMarkerPosts: string[] = [];
const isMarkerPost = (request: Request) => request.method() === 'POST' && new URL(request.url()).pathname.endsWith('/read_markers');

/** Lets the test say Ben's tab is hidden or shown (document.visibilityState and its event), as a browser would. */
function visibilityForTests(): void {
  let hidden = false;
  Object.assign(globalThis, {
    testSetHidden(value: boolean) {
      hidden = value;
      document.dispatchEvent(new Event('visibilitychange'));
    },
  });
  Object.defineProperty(Document.prototype, 'visibilityState', { configurable: true, get: () => (hidden ? 'hidden' : 'visible') });
  Object.defineProperty(Document.prototype, 'hidden', { configurable: true, get: () => hidden });
}
const setHidden = (page: Page, hidden: boolean) => page.evaluate((value) => (globalThis as any).testSetHidden(value), hidden);

const timeline = (page: Page) => page.getByRole('list', { name: 'Timeline' });
const newLine = (page: Page) => timeline(page).getByRole('separator', { name: 'New since you last read' });
const jump = (page: Page) => page.getByRole('button', { name: /^Jump to first unread/ });
const dm = (page: Page) => page.getByRole('list', { name: 'Direct chats' }).locator('.room-item');
const elsewhere = (page: Page) => page.getByRole('list', { name: 'Rooms' }).locator('.room-item', { hasText: 'Elsewhere' });
/** A message on `page` once the homeserver has it and the page has decrypted it. */
const message = (page: Page, text: string) => timeline(page).locator('.event[data-event-id]').filter({ has: page.locator('.body', { hasText: new RegExp(`^${text}$`) }) });

async function eventIdOf(page: Page, text: string): Promise<string> {
  await message(page, text).waitFor({ timeout: 30_000 });
  return (await message(page, text).getAttribute('data-event-id'))!;
}

/** Ben's `m.fully_read` in the DM, as his homeserver keeps it (GET room account data). */
async function benMarker(): Promise<string | undefined> {
  const { userId, accessToken } = await storedSession(pageB);
  const path = `/_matrix/client/v3/user/${encodeURIComponent(userId)}/rooms/${encodeURIComponent(roomId)}/account_data/m.fully_read`;
  const answer = await pageFetch(pageB, 'GET', path, { token: accessToken });
  return answer.status === 200 ? (answer.body as { event_id?: string }).event_id : undefined;
}

/** Ana sends each line; Ben's room list has the last (the DM is not open on his page). */
async function anaSaysWhileBenIsAway(lines: string[]): Promise<void> {
  for (const line of lines) await sendThroughUi(pageA, line);
  await dm(pageB).locator('.preview', { hasText: `: ${lines.at(-1)}` }).waitFor({ timeout: 60_000 });
}

/** Where the "New" line sits: the event items right before and after it. */
function aroundLine(page: Page): Promise<{ before: string | undefined; after: string | undefined }> {
  return newLine(page).evaluate((line) => ({
    before: (line.previousElementSibling as HTMLElement | null)?.dataset.eventId,
    after: (line.nextElementSibling as HTMLElement | null)?.dataset.eventId,
  }));
}

/** Whether the element is wholly inside the timeline's visible box. */
const isInView = (page: Page, selector: string): Promise<boolean> =>
  timeline(page).evaluate((list, selector) => {
    const item = list.querySelector(selector);
    if (!item) return false;
    const box = list.getBoundingClientRect();
    const rect = item.getBoundingClientRect();
    return rect.top >= box.top - 1 && rect.bottom <= box.bottom + 1;
  }, selector);

/**
 * Resolves once the element is wholly in the timeline's visible box: checked now, at each scroll of the timeline and at
 * each change of its items (a decryption, older messages); fails after 30 s with where the element was.
 */
const inView = (page: Page, selector: string): Promise<void> =>
  timeline(page).evaluate(
    (list, selector) =>
      new Promise<void>((resolve, reject) => {
        const where = () => {
          const item = list.querySelector(selector);
          if (!item) return 'absent';
          const box = list.getBoundingClientRect();
          const rect = item.getBoundingClientRect();
          return rect.top >= box.top - 1 && rect.bottom <= box.bottom + 1 ? 'in view' : `at ${rect.top}..${rect.bottom}, the timeline ${box.top}..${box.bottom}`;
        };
        const observer = new MutationObserver(() => check());
        const done = () => {
          list.removeEventListener('scroll', check);
          observer.disconnect();
          clearTimeout(failure);
        };
        const check = () => {
          if (where() !== 'in view') return;
          done();
          resolve();
        };
        const failure = setTimeout(() => {
          done();
          reject(new Error(`${selector} never came into view: ${where()}`));
        }, 30_000);
        list.addEventListener('scroll', check);
        observer.observe(list, { childList: true, subtree: true, characterData: true });
        check();
      }),
    selector,
  );

async function reloadBen(): Promise<void> {
  await pageB.reload();
  await pageB.waitForFunction(() => document.body.dataset.homeserver === 'ready', undefined, { timeout: 30_000 });
  await dm(pageB).click({ timeout: 60_000 });
}

beforeAll(async () => {
  pair = await startPagePair(inject('hearthDist'), 'unread');
  ({ pageA, pageB } = pair);
  const contextB = pair.contexts[1]!;
  await contextB.addInitScript(visibilityForTests);
  contextB.on('request', (request) => void (isMarkerPost(request) && benMarkerPosts.push(request.postDataJSON()['m.fully_read'])));
  await pageB.reload();
  roomId = await meetInEncryptedDm(pair);
}, 180_000);

afterAll(async () => {
  await pair?.close();
});

describe('read markers', () => {
  it('a "New" line right before the first message since Ben last read; read, a reload shows none, and later the line where he left off', async () => {
    // Ben has the DM open, visible, at its end: what Ana says is read, and his marker follows it.
    await sendThroughUi(pageA, 'Read already');
    const read = await eventIdOf(pageB, 'Read already');
    await expect.poll(benMarker, { timeout: 30_000 }).toBe(read);
    expect(await newLine(pageB).count()).toBe(0);

    // Away in another room, Ben reads nothing: the marker stays.
    await createRoomThroughUi(pageB, 'Elsewhere');
    await anaSaysWhileBenIsAway(['Unread 1', 'Unread 2', 'Unread 3']);
    expect(await benMarker()).toBe(read);

    await dm(pageB).click();
    const first = await eventIdOf(pageB, 'Unread 1');
    const newest = await eventIdOf(pageB, 'Unread 3');
    await newLine(pageB).waitFor({ timeout: 30_000 });
    expect(await aroundLine(pageB)).toEqual({ before: read, after: first });
    // Seen to the newest: the marker moves there, and the line stays while the room is open.
    await expect.poll(benMarker, { timeout: 30_000 }).toBe(newest);
    expect(await newLine(pageB).count()).toBe(1);

    // Reloaded: nothing is new.
    await reloadBen();
    await message(pageB, 'Unread 3').waitFor({ timeout: 60_000 });
    expect(await newLine(pageB).count()).toBe(0);

    // Ana writes while Ben is elsewhere; he reloads and the page opens the DM: the line sits after what he read.
    await elsewhere(pageB).click();
    await pageB.locator('.room-title', { hasText: 'Elsewhere' }).waitFor();
    await anaSaysWhileBenIsAway(['Later 1', 'Later 2']);
    await reloadBen();
    const later = await eventIdOf(pageB, 'Later 1');
    await newLine(pageB).waitFor({ timeout: 30_000 });
    expect(await aroundLine(pageB)).toEqual({ before: newest, after: later });
  }, 180_000);

  it('while the tab is hidden the marker stays; shown again, what came meanwhile is under the line', async () => {
    // Ben has the DM open at its end from the test before: read up to Ana's last.
    const seen = await eventIdOf(pageB, 'Later 2');
    await expect.poll(benMarker, { timeout: 30_000 }).toBe(seen);
    const since = benMarkerPosts.length;
    await setHidden(pageB, true);
    await sendThroughUi(pageA, 'While hidden 1');
    await sendThroughUi(pageA, 'While hidden 2');
    const first = await eventIdOf(pageB, 'While hidden 1');
    const newest = await eventIdOf(pageB, 'While hidden 2');
    const moved = pair.contexts[1]!.waitForEvent('request', { predicate: (request) => isMarkerPost(request) && request.postDataJSON()['m.fully_read'] === newest, timeout: 30_000 });
    await setHidden(pageB, false);
    await moved;
    // Not one move while hidden: the first since is the one made once shown.
    expect(benMarkerPosts.slice(since)).toEqual([newest]);
    await newLine(pageB).waitFor();
    expect(await aroundLine(pageB)).toEqual({ before: seen, after: first });
    await expect.poll(benMarker, { timeout: 30_000 }).toBe(newest);
  }, 120_000);

  it('"Jump to first unread" shows while the first unread message is above what shows, and brings it into view', async () => {
    await pageB.setViewportSize({ width: 1000, height: 560 });
    await elsewhere(pageB).click();
    await pageB.locator('.room-title', { hasText: 'Elsewhere' }).waitFor();
    const lines = Array.from({ length: 14 }, (_, i) => `Many ${i + 1}`);
    await anaSaysWhileBenIsAway(lines);

    await dm(pageB).click();
    const first = await eventIdOf(pageB, 'Many 1');
    await message(pageB, 'Many 14').waitFor({ timeout: 30_000 });
    await newLine(pageB).waitFor({ timeout: 30_000 });
    // Opened at the newest: the line and Ana's first message are above what shows, and the jump says so.
    await jump(pageB).waitFor({ timeout: 30_000 });
    expect(await isInView(pageB, `[data-event-id="${first}"]`)).toBe(false);
    await jump(pageB).click();
    await inView(pageB, `[data-event-id="${first}"]`);
    expect(await isInView(pageB, '.read-marker')).toBe(true);
    await jump(pageB).waitFor({ state: 'hidden' });
  }, 180_000);

  it('when the first unread message is older than what was loaded, the jump loads the history back to it', async () => {
    const seen = await eventIdOf(pageB, 'Many 14');
    await elsewhere(pageB).click();
    await pageB.locator('.room-title', { hasText: 'Elsewhere' }).waitFor();
    // More than the open room's subscription brings (50 events); Ben comes back to a fresh page (a reload), which holds
    // only those: his marker is older than all of them.
    const lines = Array.from({ length: 55 }, (_, i) => `Old news ${i + 1}`);
    await anaSaysWhileBenIsAway(lines);
    await reloadBen();
    // The room's subscription is in (a list brings one event): Ana's last 50 messages.
    await message(pageB, 'Old news 10').waitFor({ timeout: 30_000 });
    await message(pageB, 'Old news 55').waitFor({ timeout: 30_000 });
    await jump(pageB).waitFor({ timeout: 30_000 });
    expect(await message(pageB, 'Old news 1').count()).toBe(0);
    await jump(pageB).click();
    const first = await eventIdOf(pageB, 'Old news 1');
    await newLine(pageB).waitFor({ timeout: 60_000 });
    expect(await aroundLine(pageB)).toEqual({ before: seen, after: first });
    await inView(pageB, `[data-event-id="${first}"]`);
    await jump(pageB).waitFor({ state: 'hidden' });
  }, 300_000);
});
