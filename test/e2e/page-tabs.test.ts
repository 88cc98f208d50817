import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { coreCensus, createRoomThroughUi, openHearth, registerThroughUi, sendThroughUi, startSite, type HearthSite } from './hearth-page.ts';

// Issue 25: one tab of the origin runs the chat client (its Rust crypto on the origin's one IndexedDB
// store, and its sync) at a time, under the Web Lock 'hearth-chat-client'. A second tab says Hearth is
// open in another tab; "Use here" moves the chat there and the first tab says the same. The session's
// encrypted messages still decrypt after each move. The homeserver's own leader election is apart.

let site: HearthSite;
let context: BrowserContext;
let first: Page;
let second: Page;

const notice = (page: Page) => page.getByRole('heading', { name: 'Hearth is open in another tab' });
const readable = (page: Page, text: string) => page.locator('.event:not(.pending):not(.undecryptable) .body', { hasText: text });

beforeAll(async () => {
  site = await startSite(inject('hearthDist'));
  context = await site.browser.newContext();
  first = await openHearth(context, site.server.url + '/');
}, 60_000);

afterAll(async () => {
  await context?.close();
  await site?.close();
});

describe('the chat client in one tab at a time', () => {
  it('a second tab says Hearth is open in another tab, and runs no client', async () => {
    await registerThroughUi(first, 'tess');
    await createRoomThroughUi(first, 'Two tabs');
    await first.locator('.room-encryption', { hasText: /^Encrypted$/ }).waitFor();
    await sendThroughUi(first, 'Written in the first tab');

    second = await openHearth(context, site.server.url + '/');
    await notice(second).waitFor({ timeout: 30_000 });
    expect(await second.getByRole('button', { name: 'Use here' }).isVisible()).toBe(true);
    expect(await second.getByLabel('New room name').count()).toBe(0);
    // Only the first tab holds the chat lock; the homeserver's leader election is its own.
    const held = await second.evaluate(async () => (await navigator.locks.query()).held?.map((l) => l.name));
    expect(held).toEqual(expect.arrayContaining(['hearth-chat-client']));
    expect((await coreCensus([first, second])).roles.sort()).toEqual(['follower', 'leader']);
    // The first tab keeps its chat.
    await sendThroughUi(first, 'Still the first tab');
  }, 120_000);

  it('"Use here" moves the chat: the second tab decrypts the messages, the first says it is open elsewhere', async () => {
    await second.getByRole('button', { name: 'Use here' }).click();
    await notice(first).waitFor({ timeout: 30_000 });
    expect(await first.getByLabel('New room name').count()).toBe(0);
    await second.locator('.room-item', { hasText: 'Two tabs' }).click({ timeout: 30_000 });
    await readable(second, 'Written in the first tab').waitFor({ timeout: 30_000 });
    await readable(second, 'Still the first tab').waitFor();
    await sendThroughUi(second, 'Written in the second tab');
    // One lock holder, and it is not waiting for itself.
    const locks = await second.evaluate(async () => {
      const state = await navigator.locks.query();
      return { held: state.held?.filter((l) => l.name === 'hearth-chat-client').length, pending: state.pending?.filter((l) => l.name === 'hearth-chat-client').length };
    });
    expect(locks).toEqual({ held: 1, pending: 1 });
  }, 90_000);

  it('back in the first tab, everything still decrypts; when that tab closes, the waiting one takes over', async () => {
    await first.getByRole('button', { name: 'Use here' }).click();
    await notice(second).waitFor({ timeout: 30_000 });
    await first.locator('.room-item', { hasText: 'Two tabs' }).click({ timeout: 30_000 });
    await readable(first, 'Written in the second tab').waitFor({ timeout: 30_000 });
    await readable(first, 'Written in the first tab').waitFor();
    await first.close();
    // The lock is free: the tab that waited starts its client without being asked.
    await second.locator('.room-item', { hasText: 'Two tabs' }).click({ timeout: 30_000 });
    await readable(second, 'Written in the second tab').waitFor({ timeout: 30_000 });
    await sendThroughUi(second, 'Alone now');
  }, 90_000);
});
