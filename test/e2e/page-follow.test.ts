import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sendThroughUi } from './hearth-page.ts';
import { meetInEncryptedDm, startPagePair, type PagePair } from './page-pair.ts';

// Issue 38 item 3: on a phone the timeline follows the conversation. Ben reads an encrypted DM with Ana at
// 390 × 844. At the end, Ana's messages scroll into view, and stay in view when the screen shrinks (a phone's
// keyboard). Scrolled up, Ben is not pulled down by Ana's message: a "New messages" button appears, and takes
// him to it. His own message always scrolls into view, wherever he was.

let pair: PagePair;
let pageA: Page;
let pageB: Page;

const timeline = (page: Page) => page.getByRole('list', { name: 'Timeline' });

/** Whether the message with `text` is wholly inside the timeline's visible box on `page`. */
function inView(page: Page, text: string): Promise<boolean> {
  return timeline(page).evaluate((list, text) => {
    const item = [...list.querySelectorAll('.event')].findLast((e) => e.querySelector('.body')?.textContent === text);
    if (!item) return false;
    const box = list.getBoundingClientRect();
    const rect = item.getBoundingClientRect();
    return rect.top >= box.top - 1 && rect.bottom <= box.bottom + 1;
  }, text);
}

/** Ana sends `text`; waits until Ben's page has it (in view or not). */
async function anaSays(text: string): Promise<void> {
  await sendThroughUi(pageA, text);
  await timeline(pageB).locator('.event[data-event-id] .body', { hasText: text }).waitFor({ timeout: 30_000 });
}

beforeAll(async () => {
  pair = await startPagePair(inject('hearthDist'), 'follow');
  ({ pageA, pageB } = pair);
  await meetInEncryptedDm(pair);
  // Ben's is a phone from here on; his DM is open in the room's place.
  await pageB.setViewportSize({ width: 390, height: 844 });
  await pageB.getByRole('button', { name: 'Send' }).waitFor();
}, 180_000);

afterAll(async () => {
  await pair?.close();
});

describe('on a phone the timeline follows the conversation', () => {
  it('at the end, others\u2019 messages scroll into view, and stay there when the screen shrinks', async () => {
    // More than a screenful.
    for (let i = 1; i <= 25; i++) await anaSays(`Line ${i}`);
    await expect.poll(() => inView(pageB, 'Line 25')).toBe(true);
    // The keyboard opens: the screen is 320 px shorter. The newest is still in view, and the timeline keeps at least
    // half of the screen (the members pane does not squeeze it).
    await pageB.setViewportSize({ width: 390, height: 524 });
    await expect.poll(() => inView(pageB, 'Line 25')).toBe(true);
    await anaSays('Line 26');
    await expect.poll(() => inView(pageB, 'Line 26')).toBe(true);
    expect((await timeline(pageB).boundingBox())!.height).toBeGreaterThanOrEqual(524 / 2);
    expect(await pageB.getByRole('button', { name: /New messages/ }).isVisible()).toBe(false);
    await pageB.setViewportSize({ width: 390, height: 844 });
    await expect.poll(() => inView(pageB, 'Line 26')).toBe(true);
  }, 120_000);

  it('scrolled up, another\u2019s message shows "New messages", which goes to it', async () => {
    await timeline(pageB).evaluate((list) => list.scrollTo({ top: 0 }));
    await expect.poll(() => inView(pageB, 'Line 26')).toBe(false);
    await anaSays('While you read above');
    const pill = pageB.getByRole('button', { name: /New messages/ });
    await pill.waitFor();
    // Not pulled down: where Ben reads stays where it was.
    expect(await inView(pageB, 'While you read above')).toBe(false);
    await pill.click();
    await expect.poll(() => inView(pageB, 'While you read above')).toBe(true);
    await pill.waitFor({ state: 'hidden' });
  }, 60_000);

  it('scrolled up, one\u2019s own message always scrolls into view', async () => {
    await timeline(pageB).evaluate((list) => list.scrollTo({ top: 0 }));
    await expect.poll(() => inView(pageB, 'While you read above')).toBe(false);
    await pageB.getByLabel('Message').fill('My own answer');
    await pageB.getByRole('button', { name: 'Send' }).click();
    await expect.poll(() => inView(pageB, 'My own answer'), { timeout: 30_000 }).toBe(true);
    await timeline(pageB).locator('.event[data-event-id] .body', { hasText: 'My own answer' }).waitFor({ timeout: 30_000 });
    await expect.poll(() => inView(pageB, 'My own answer')).toBe(true);
  }, 60_000);

  it('says who is typing, and stops saying it when they send', async () => {
    const typing = pageB.getByRole('status', { name: 'Who is typing' });
    // fill() types the text at once: one input event, as a paste.
    await pageA.getByLabel('Message').fill('I am writing a long answer');
    await typing.filter({ hasText: /^ana is typing\u2026$/ }).waitFor({ timeout: 30_000 });
    await pageA.getByRole('button', { name: 'Send' }).click();
    await timeline(pageB).locator('.event[data-event-id] .body', { hasText: 'I am writing a long answer' }).waitFor({ timeout: 30_000 });
    await typing.filter({ hasText: /^$/ }).waitFor({ timeout: 30_000 });
  }, 60_000);
});
