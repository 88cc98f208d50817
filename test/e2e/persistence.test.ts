import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { coreCensus, createRoomThroughUi, openHearth, pageFetch, registerThroughUi, sendThroughUi, startSite, storedSession, useHere, type HearthSite } from './hearth-page.ts';

// The homeserver's data outlives the page and its Worker: reload, close every
// tab, or close the leader, and the core restarts from IndexedDB with nothing lost.

let site: HearthSite;
let context: BrowserContext;
let page: Page;

beforeAll(async () => {
  site = await startSite(inject('hearthDist'));
  context = await site.browser.newContext();
  page = await openHearth(context, site.server.url + '/');
  await registerThroughUi(page, 'carol');
  await createRoomThroughUi(page, 'Kept');
  await sendThroughUi(page, 'first message');
});

afterAll(async () => {
  await context?.close();
  await site?.close();
});

/** The account still exists, and the UI shows the room and the message. */
async function expectData(page: Page, message: string): Promise<void> {
  await page.waitForFunction(() => document.body.dataset.homeserver === 'ready');
  const whoami = await pageFetch(page, 'GET', '/_matrix/client/v3/account/whoami', { token: (await storedSession(page)).accessToken });
  expect(whoami.status).toBe(200);
  await page.locator('.room-item .name', { hasText: 'Kept' }).waitFor({ timeout: 10_000 });
  await page.locator('.event .body', { hasText: message }).waitFor({ timeout: 10_000 });
}

describe('persistence across restarts of the core', () => {
  it('reload, and the data is there', async () => {
    await page.reload();
    await expectData(page, 'first message');
    await sendThroughUi(page, 'after reload');
  });

  it('close every page and open one again: the core restarts from IndexedDB', async () => {
    await page.close();
    expect(context.pages()).toHaveLength(0);
    page = await openHearth(context, site.server.url + '/');
    await expectData(page, 'first message');
    await sendThroughUi(page, 'after reopening');
  });

  it('when the leader tab closes, the next one takes over and nothing is lost', async () => {
    const follower = await openHearth(context, site.server.url + '/');
    // The chat runs in one tab at a time (issue 25): the follower takes it over; the homeserver stays the leader's.
    await useHere(follower);
    await expectData(follower, 'first message');
    await sendThroughUi(follower, 'sent from the follower');
    await page.close();
    await follower.waitForFunction(() => (globalThis as any).hearthHost.state.core === 'running-here');
    expect(await coreCensus([follower])).toEqual({ roles: ['leader'], coreWorkers: 1 });
    await expectData(follower, 'sent from the follower');
    await sendThroughUi(follower, 'after the takeover');
    page = follower;
  });
});
