import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { createRoomThroughUi, openHearth, pageFetch, registerThroughUi, startSite, storedSession, type HearthSite } from './hearth-page.ts';

// The page's homeserver answers sliding sync through the service worker, and a connection continues
// after the core restarts (every tab closed, one opened again): its state is in IndexedDB.

let site: HearthSite;
let context: BrowserContext;
let page: Page;

beforeAll(async () => {
  site = await startSite(inject('hearthDist'));
  context = await site.browser.newContext();
  page = await openHearth(context, site.server.url + '/');
  await registerThroughUi(page, 'slider');
  await createRoomThroughUi(page, 'Slid');
});
afterAll(async () => {
  await context?.close();
  await site?.close();
});

const SS = '/_matrix/client/unstable/org.matrix.simplified_msc3575/sync';
// A connection of its own: the page's chat client syncs as the same device, and its new connection
// (once the page is open again) would replace one of the same name (conn_id absent: '').
const body = { conn_id: 'e2e-restart', lists: { rooms: { ranges: [[0, 9]], timeline_limit: 1, required_state: [['m.room.name', '']] } } };

it('answers sliding sync through the service worker, and continues the connection after the core restarts', async () => {
  const { accessToken } = await storedSession(page);
  const versions = await pageFetch(page, 'GET', '/_matrix/client/versions');
  expect(versions.body.unstable_features['org.matrix.simplified_msc3575']).toBe(true);
  const first = await pageFetch(page, 'POST', SS, { token: accessToken, body });
  expect(first.status).toBe(200);
  const [roomId, room] = Object.entries(first.body.rooms as Record<string, any>)[0]!;
  expect(room).toMatchObject({ name: 'Slid', initial: true });

  await page.close();
  page = await openHearth(context, site.server.url + '/');
  const send = await pageFetch(page, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/after`, { token: accessToken, body: { msgtype: 'm.text', body: 'after the restart' } });
  expect(send.status).toBe(200);
  const next = await pageFetch(page, 'POST', `${SS}?pos=${first.body.pos}`, { token: accessToken, body });
  expect(next.status, JSON.stringify(next.body)).toBe(200);
  expect(next.body.rooms[roomId].initial).toBeUndefined();
  expect(next.body.rooms[roomId].timeline.map((e: any) => e.content.body)).toEqual(['after the restart']);
  const unknown = await pageFetch(page, 'POST', `${SS}?pos=123456789`, { token: accessToken, body });
  expect(unknown).toMatchObject({ status: 400, body: { errcode: 'M_UNKNOWN_POS' } });
});
