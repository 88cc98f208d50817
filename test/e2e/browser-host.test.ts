import { mkdir } from 'node:fs/promises';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { coreCensus, createRoomThroughUi, openHearth, pageFetch, registerThroughUi, sendThroughUi, startSite, storedSession, type HearthSite } from './hearth-page.ts';

// The browser host end to end: the built page served by the static server,
// its service worker, the core in a Web Worker, and the built-in client.
let site: HearthSite;
let context: BrowserContext;
let page: Page;

beforeAll(async () => {
  site = await startSite(inject('hearthDist'));
  context = await site.browser.newContext();
  page = await openHearth(context, site.server.url + '/');
});

afterAll(async () => {
  await context?.close();
  await site?.close();
});

describe('browser host', () => {
  it('the service worker takes control and answers the API; the web server does not', async () => {
    const controlled = await page.evaluate(() => navigator.serviceWorker.controller?.scriptURL);
    expect(controlled).toBe(site.server.url + '/sw.js');
    const versions = await pageFetch(page, 'GET', '/_matrix/client/versions');
    expect(versions.status).toBe(200);
    expect(versions.body.versions).toContain('v1.1');
    const wellKnown = await pageFetch(page, 'GET', '/.well-known/matrix/client');
    expect(wellKnown.body).toEqual({ 'm.homeserver': { base_url: site.server.url } });

    // Straight to the web server (around the service worker): a 404, not the page.
    const direct = await fetch(site.server.url + '/_matrix/client/versions');
    expect(direct.status).toBe(404);
    expect(await direct.json()).toMatchObject({ errcode: 'M_UNRECOGNIZED' });
  });

  it('shows the server name and that the homeserver runs in this tab', async () => {
    const state = await page.evaluate(() => (globalThis as any).hearthHost.state);
    expect(state).toMatchObject({ role: 'leader', core: 'running-here' });
    expect(state.serverName).toMatch(/^[0-9a-f]{64}$/);
    await expect.poll(() => page.locator('.status').textContent()).toBe('Homeserver running in this tab');
    expect(await page.locator('.server-name').getAttribute('title')).toBe(state.serverName);
    await expect.poll(() => page.locator('.storage').textContent()).toMatch(/^Storage: \d/); // what it is, said (issue 25, item 5); it opens the storage panel (keep.test.ts)
  });

  it('registers, creates a room and sends through the UI', async () => {
    await registerThroughUi(page, 'alice');
    const session = await storedSession(page);
    const serverName = await page.evaluate(() => (globalThis as any).hearthHost.state.serverName);
    expect(session.userId).toBe(`@alice:${serverName}`);
    await createRoomThroughUi(page, 'Hearthside');
    await sendThroughUi(page, 'Hello from the built-in client');
    await expect.poll(() => page.locator('.event .sender').last().textContent()).toBe('alice');
    await expect.poll(() => page.locator('.member-list').textContent()).toContain('alice');
  });

  it('shows another user’s messages, display name, typing and read receipts; sends its own receipts', async () => {
    // Bob uses the API with fetch from the page; alice uses the UI.
    const bobRegistered = await pageFetch(page, 'POST', '/_matrix/client/v3/register', { body: { username: 'bob', password: 'bobs password', auth: { type: 'm.login.dummy' } } });
    expect(bobRegistered.status).toBe(200);
    const bob = { token: bobRegistered.body.access_token as string, userId: bobRegistered.body.user_id as string };
    await pageFetch(page, 'PUT', `/_matrix/client/v3/profile/${encodeURIComponent(bob.userId)}/displayname`, { token: bob.token, body: { displayname: 'Bob Builder' } });

    await page.getByLabel('User ID to invite').fill(bob.userId);
    await page.getByRole('button', { name: 'Invite' }).click();
    const roomId = (await page.locator('.room-id').getAttribute('data-room-id'))!;
    await expect.poll(async () => (await pageFetch(page, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}`, { token: bob.token, body: {} })).status).toBe(200);
    await expect.poll(() => page.locator('.member-list').textContent()).toContain('Bob Builder');

    const aliceEvent = await page.locator('.event[data-event-id]').last().getAttribute('data-event-id');
    const room = `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}`;
    await pageFetch(page, 'PUT', `${room}/send/m.room.message/bob-1`, { token: bob.token, body: { msgtype: 'm.text', body: 'Hi alice, it is bob' } });
    await pageFetch(page, 'POST', `${room}/receipt/m.read/${encodeURIComponent(aliceEvent!)}`, { token: bob.token, body: {} });
    await pageFetch(page, 'PUT', `${room}/typing/${encodeURIComponent(bob.userId)}`, { token: bob.token, body: { typing: true, timeout: 30000 } });

    await expect.poll(() => page.locator('.event', { hasText: 'Hi alice, it is bob' }).locator('.sender').textContent()).toBe('Bob Builder');
    await expect.poll(() => page.locator('.typing').textContent()).toBe('Bob Builder is typing\u2026');
    await expect.poll(() => page.locator(`.event[data-event-id="${aliceEvent}"] .receipts`).textContent()).toBe('Seen by Bob Builder');

    // The UI marked bob's message read on alice's behalf.
    const bobEvent = await page.locator('.event', { hasText: 'Hi alice, it is bob' }).getAttribute('data-event-id');
    await expect
      .poll(async () => {
        const sync = await pageFetch(page, 'GET', '/_matrix/client/v3/sync?timeout=0', { token: bob.token });
        const receipts = sync.body.rooms?.join?.[roomId]?.ephemeral?.events?.find((e: any) => e.type === 'm.receipt');
        return Object.keys(receipts?.content?.[bobEvent!]?.['m.read'] ?? {});
      })
      .toContain((await storedSession(page)).userId);

    await mkdir('test-results', { recursive: true });
    await page.screenshot({ path: 'test-results/ui.png' });
  });

  it('sends with fetch from the page, and the UI shows it', async () => {
    const { accessToken } = await storedSession(page);
    const joined = await pageFetch(page, 'GET', '/_matrix/client/v3/joined_rooms', { token: accessToken });
    const roomId = joined.body.joined_rooms[0];
    const sent = await pageFetch(page, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/fetch-1`, {
      token: accessToken,
      body: { msgtype: 'm.text', body: 'Hello from fetch' },
    });
    expect(sent.status).toBe(200);
    expect(sent.body.event_id).toMatch(/^\$/);
    await page.locator('.event .body', { hasText: 'Hello from fetch' }).waitFor();
  });

  it('a request body that is not JSON gets M_NOT_JSON', async () => {
    const { accessToken } = await storedSession(page);
    const result = await pageFetch(page, 'POST', '/_matrix/client/v3/createRoom', { token: accessToken, rawBody: '{"name": "unterminated' });
    expect(result).toEqual({ status: 400, body: { errcode: 'M_NOT_JSON', error: expect.any(String) } });
  });

  it('a request body over the bound is refused before it reaches the core', async () => {
    const { accessToken } = await storedSession(page);
    const result = await page.evaluate(async (token) => {
      const body = `{"name":"${'x'.repeat(9 * 1024 * 1024)}"}`;
      const response = await fetch('/_matrix/client/v3/createRoom', { method: 'POST', headers: { authorization: `Bearer ${token}` }, body });
      return { status: response.status, body: await response.json() };
    }, accessToken);
    expect(result.status).toBe(413);
    expect(result.body.errcode).toBe('M_TOO_LARGE');
  });

  it('two tabs see the same data at once, and only one core runs', async () => {
    const second = await openHearth(context, site.server.url + '/');
    try {
      const census = await coreCensus([page, second]);
      expect(census.roles.sort()).toEqual(['follower', 'leader']);
      expect(census.coreWorkers).toBe(1);
      await expect.poll(() => second.locator('.status').textContent()).toBe('Homeserver running in another tab');

      // The chat client runs in one tab at a time (issue 25): the second says so; "Use here" moves the
      // session (localStorage) there, which shows what the first sent and sends through the same core.
      await second.getByRole('heading', { name: 'Hearth is open in another tab' }).waitFor();
      await second.getByRole('button', { name: 'Use here' }).click();
      await page.getByRole('heading', { name: 'Hearth is open in another tab' }).waitFor();
      await second.locator('.event .body', { hasText: 'Hello from fetch' }).waitFor();
      await sendThroughUi(second, 'Sent from the second tab');
      // What the second tab sent is in the first tab's homeserver (the one core), read back by the first tab once it takes the chat back.
      await page.getByRole('button', { name: 'Use here' }).click();
      await page.locator('.event .body', { hasText: 'Sent from the second tab' }).waitFor();
    } finally {
      await second.close();
    }
  });

  it('survives the service worker being stopped mid-use', async () => {
    const { accessToken } = await storedSession(page);
    const cdp = await context.newCDPSession(page);
    // A long-poll is in flight (the UI's /sync) when the worker goes.
    await cdp.send('ServiceWorker.enable');
    await cdp.send('ServiceWorker.stopAllWorkers');
    const whoami = await pageFetch(page, 'GET', '/_matrix/client/v3/account/whoami', { token: accessToken });
    expect(whoami.status).toBe(200);
    expect(whoami.body.user_id).toMatch(/^@alice:/);

    // Stopped again, then a burst of requests: all wait for the new port, none is lost.
    await cdp.send('ServiceWorker.stopAllWorkers');
    const results = await page.evaluate(async (token) => {
      const headers = { authorization: `Bearer ${token}` };
      const responses = await Promise.all(Array.from({ length: 10 }, () => fetch('/_matrix/client/v3/account/whoami', { headers })));
      return responses.map((r) => r.status);
    }, accessToken);
    expect(results).toEqual(Array(10).fill(200));

    // The UI's sync loop recovers too.
    await sendThroughUi(page, 'After the service worker restarted');
    await cdp.detach();
  });

  it('keeps its server name across a reload (the seed is kept in IndexedDB)', async () => {
    const before = await page.evaluate(() => (globalThis as any).hearthHost.state.serverName);
    await page.reload();
    await page.waitForFunction(() => document.body.dataset.homeserver === 'ready');
    await page.waitForFunction(() => (globalThis as any).hearthHost.state.core === 'running-here');
    expect(await page.evaluate(() => (globalThis as any).hearthHost.state.serverName)).toBe(before);
  });

  it('when the leader tab closes, another tab takes over and requests meanwhile are answered', async () => {
    const follower = await openHearth(context, site.server.url + '/');
    expect((await coreCensus([page, follower])).roles).toEqual(['leader', 'follower']);
    const serverName = await follower.evaluate(() => (globalThis as any).hearthHost.state.serverName);
    await page.close();
    // Sent while the old core is gone and the new one may not be up yet: it waits, then is answered.
    const versions = await pageFetch(follower, 'GET', '/_matrix/client/versions');
    expect(versions.status).toBe(200);
    await follower.waitForFunction(() => (globalThis as any).hearthHost.state.core === 'running-here');
    expect(await coreCensus([follower])).toEqual({ roles: ['leader'], coreWorkers: 1 });
    expect(await follower.evaluate(() => (globalThis as any).hearthHost.state.serverName)).toBe(serverName);
    await expect.poll(() => follower.locator('.status').textContent()).toBe('Homeserver running in this tab');
    page = follower;
  });
});
