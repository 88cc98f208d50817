import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sendThroughUi } from './hearth-page.ts';
import { meetInEncryptedDm, startPagePair, type PagePair } from './page-pair.ts';
import { png } from './png.ts';

// Issue 38 item 1, "the page people keep": every kind of event renders the same after a reload. Two browser
// homeservers meet through a Node relay; in an encrypted DM Ana and Ben send a message, a reply, a reaction,
// an edit, a thread root with replies (one of them edited), an image with a caption and a deleted message,
// beside the memberships of the room's start. What each page shows (the room's timeline, and the thread's
// pane) is read before; both pages reload, over sliding sync and then over /sync, and each must show the same again.

let pair: PagePair;
let pageA: Page;
let pageB: Page;

/**
 * What a list of events shows a person, item by item: its text without the parts that change with time or
 * with who has read what (receipts, the pending mark, the buttons), and an image as its name and whether it
 * is drawn.
 */
function shown(page: Page, listLabel: string): Promise<string[]> {
  return page.getByRole('list', { name: listLabel, exact: true }).evaluate((list) =>
    [...list.children].map((item) => {
      const copy = item.cloneNode(true) as HTMLElement;
      for (const drop of copy.querySelectorAll('.receipts, .pending-mark, .message-actions, time')) drop.remove();
      for (const img of copy.querySelectorAll('img')) img.replaceWith(`[image ${img.alt}]`);
      const images = [...item.querySelectorAll('img')].map((img) => (img.complete && img.naturalWidth > 0 ? 'drawn' : 'not drawn'));
      const words: string[] = [];
      const walker = document.createTreeWalker(copy, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) if (node.textContent!.trim()) words.push(node.textContent!.replace(/\s+/g, ' ').trim());
      return `${item.className}: ${words.join(' ')}${images.length ? ` (${images.join(', ')})` : ''}`;
    }),
  );
}

const dm = (page: Page) => page.getByRole('list', { name: 'Direct chats' }).locator('.room-item');
const message = (page: Page, text: string) => page.getByRole('list', { name: 'Timeline' }).locator('.event[data-event-id]', { hasText: text });
const threadPane = (page: Page) => page.getByRole('region', { name: 'Thread' });

/** Opens the DM's thread on "Thread root" and reads its replies; then goes Back to the room. */
async function shownThread(page: Page, replies: number): Promise<string[]> {
  await message(page, 'Thread root').locator('.thread-summary').click();
  const pane = threadPane(page);
  await pane.locator('.event[data-event-id]:not(.thread-root)').nth(replies - 1).waitFor({ timeout: 30_000 });
  const seen = await shown(page, 'Thread replies');
  await pane.getByRole('button', { name: 'Back' }).click();
  await pane.waitFor({ state: 'hidden' });
  return seen;
}

/** Both pages' timeline and thread, once every message in them is decrypted. */
async function snapshot(page: Page): Promise<{ timeline: string[]; thread: string[] }> {
  await page.locator('.timeline .event.decrypting').first().waitFor({ state: 'detached', timeout: 30_000 });
  return { timeline: await shown(page, 'Timeline'), thread: await shownThread(page, 2) };
}

/** Reloads the page, opens the DM, and waits until it shows what it showed before (polling the DOM, no sleep). */
async function reloadAndCompare(page: Page, before: { timeline: string[]; thread: string[] }): Promise<void> {
  await page.reload();
  await page.waitForFunction(() => document.body.dataset.homeserver === 'ready', undefined, { timeout: 30_000 });
  await dm(page).click({ timeout: 60_000 });
  await expect.poll(() => shown(page, 'Timeline'), { timeout: 30_000 }).toEqual(before.timeline);
  expect(await shownThread(page, 2)).toEqual(before.thread);
}

/** What the browser refused under the page's Content-Security-Policy (index.html) while the pages ran: nothing, it must be. */
const refused: string[] = [];

beforeAll(async () => {
  pair = await startPagePair(inject('hearthDist'), 'reload');
  ({ pageA, pageB } = pair);
  for (const page of [pageA, pageB]) page.on('console', (message) => void (/Content Security Policy/i.test(message.text()) && refused.push(message.text())));
  await meetInEncryptedDm(pair);
}, 180_000);

afterAll(async () => {
  await pair?.close();
});

describe('after a reload the page shows what it showed before', () => {
  let before: Map<Page, { timeline: string[]; thread: string[] }>;

  it('Ana and Ben send each kind of event in an encrypted DM', async () => {
    // A message, and Ben's reply to it and reaction on it.
    await sendThroughUi(pageA, 'Hello Ben');
    await message(pageB, 'Hello Ben').waitFor({ timeout: 30_000 });
    await message(pageB, 'Hello Ben').getByRole('button', { name: 'Reply', exact: true }).click();
    await sendThroughUi(pageB, 'A reply to you');
    await message(pageB, 'Hello Ben').first().locator('.react-picker summary').click();
    await message(pageB, 'Hello Ben').first().getByRole('button', { name: 'React \u{1F44D}' }).click();
    await message(pageA, 'A reply to you').locator('.reply-quote').waitFor({ timeout: 30_000 });
    await message(pageA, 'Hello Ben').first().locator('.reaction', { hasText: '\u{1F44D} 1' }).waitFor({ timeout: 30_000 });

    // An edit.
    await sendThroughUi(pageA, 'A typo hree');
    await message(pageA, 'A typo hree').getByRole('button', { name: 'Edit' }).click();
    await pageA.getByLabel('Message').fill('A typo here');
    await pageA.getByRole('button', { name: 'Send' }).click();
    await message(pageB, 'A typo here').locator('.edited').waitFor({ timeout: 30_000 });
    // The room list's preview shows the new text (issue 38 item 3), not the edit's "* …" fallback.
    for (const page of [pageA, pageB]) await expect.poll(() => dm(page).locator('.preview').textContent(), { timeout: 30_000 }).toBe('ana: A typo here');

    // A thread: Ana's root, her reply (edited) and Ben's.
    await sendThroughUi(pageA, 'Thread root');
    await message(pageA, 'Thread root').getByRole('button', { name: 'Reply in thread' }).click();
    const threadA = threadPane(pageA);
    await threadA.getByLabel('Thread reply').fill('First in thread, with a tpyo');
    await threadA.getByRole('button', { name: 'Send' }).click();
    const firstReply = threadA.locator('.event[data-event-id]', { hasText: 'First in thread' });
    await firstReply.getByRole('button', { name: 'Edit' }).click();
    await threadA.getByLabel('Thread reply').fill('First in thread, corrected');
    await threadA.getByRole('button', { name: 'Send' }).click();
    await firstReply.locator('.body', { hasText: 'corrected' }).waitFor({ timeout: 30_000 });
    await message(pageB, 'Thread root').locator('.thread-summary').click();
    const threadB = threadPane(pageB);
    await threadB.locator('.event:not(.pending) .body', { hasText: 'First in thread, corrected' }).waitFor({ timeout: 30_000 });
    await threadB.getByLabel('Thread reply').fill('Second in thread');
    await threadB.getByRole('button', { name: 'Send' }).click();
    await threadA.locator('.event:not(.pending) .body', { hasText: 'Second in thread' }).waitFor({ timeout: 30_000 });
    for (const page of [pageA, pageB]) {
      await threadPane(page).getByRole('button', { name: 'Back' }).click();
      await message(page, 'Thread root').locator('.thread-count', { hasText: /^2 replies$/ }).waitFor({ timeout: 30_000 });
    }

    // An image with a caption (sent from its preview), then a message Ana deletes, and the last word.
    const chooser = pageA.waitForEvent('filechooser');
    await pageA.getByRole('button', { name: 'Attach a file' }).click();
    await (await chooser).setFiles([{ name: 'dot.png', mimeType: 'image/png', buffer: await png(6, 4) }]);
    const preview = pageA.getByRole('dialog', { name: 'Send an image' });
    await preview.getByRole('textbox', { name: 'Caption' }).fill('A dot, for the record');
    await preview.getByRole('button', { name: 'Send' }).click();
    await preview.waitFor({ state: 'detached' });
    await sendThroughUi(pageA, 'Never mind this one');
    await message(pageA, 'Never mind this one').getByRole('button', { name: 'Delete' }).click();
    await sendThroughUi(pageB, 'The last word');
    for (const page of [pageA, pageB]) {
      await page.locator('.event.redacted', { hasText: 'Message deleted' }).waitFor({ timeout: 30_000 });
      await message(page, 'The last word').waitFor({ timeout: 30_000 });
      await expect.poll(() => page.locator('img.attachment-thumbnail[alt="dot.png"]').evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth), { timeout: 30_000 }).toBe(6);
    }

    before = new Map();
    for (const page of [pageA, pageB]) before.set(page, await snapshot(page));
    // What is compared holds every kind: memberships, the reply, reaction, edit, thread, image and deletion.
    for (const { timeline, thread } of before.values()) {
      const all = timeline.join('\n');
      for (const expected of ['ben joined', 'In reply to ana Hello Ben', '\u{1F44D} 1', '(edited) A typo here', '2 replies', '[image dot.png] A dot, for the record (drawn)', 'Message deleted', 'The last word']) expect(all).toContain(expected);
      expect(all).not.toContain('A typo hree');
      expect(all).not.toContain('First in thread');
      expect(thread.join('\n')).toContain('(edited) First in thread, corrected');
      expect(thread.join('\n')).toContain('Second in thread');
    }
  }, 240_000);

  it('over sliding sync', async () => {
    for (const page of [pageA, pageB]) await reloadAndCompare(page, before.get(page)!);
  }, 180_000);

  it('over /sync', async () => {
    for (const page of [pageA, pageB]) {
      await page.evaluate(() => localStorage.setItem('hearth-sync', 'sync'));
      await reloadAndCompare(page, before.get(page)!);
    }
  }, 180_000);

  it('all of it (the service worker, the core worker, the crypto\u2019s wasm, media, two reloads) ran under the page\u2019s Content-Security-Policy with nothing refused', () => {
    expect(refused).toEqual([]);
  });
});
