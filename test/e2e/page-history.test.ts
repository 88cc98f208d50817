import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startNodeHost, type NodeHost } from '../../src/node/node-host.ts';
import { api, register, type Account } from '../integration/harness.ts';
import { openHearth, pageServerName, registerThroughUi, startSite, type HearthSite } from './hearth-page.ts';

// Issue 25, what a newcomer saw go wrong (2): a room joined over federation showed only "ana joined" and
// "Load earlier messages", though it held the inviter's messages. The page fills the screen from /messages
// on join and on open. A Node peer in this process (127.0.0.1, OS-chosen ports) is the inviter's server.

let dir: string;
let peer: NodeHost;
let site: HearthSite;
let context: BrowserContext;
let page: Page;
let bob: Account;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hearth-e2e-history-'));
  peer = await startNodeHost({ dataDir: dir, port: 0, listen: ['/ip4/127.0.0.1/tcp/0/ws'], rateLimits: false });
  site = await startSite(inject('hearthDist'), { config: { bootstrap: peer.p2p.multiaddrs(), iceServers: [], allowPrivateAddresses: true } });
  context = await site.browser.newContext();
  page = await openHearth(context, site.server.url + '/');
  await registerThroughUi(page, 'ana');
  bob = await register(peer, 'bob');
}, 60_000);

afterAll(async () => {
  await context?.close();
  await site?.close();
  await peer?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('a room joined over federation', () => {
  it('shows the history before the join, without asking for it', async () => {
    const ana = `@ana:${await pageServerName(page)}`;
    await page.waitForFunction((name) => (globalThis as any).hearthP2P.reachable.has(name), peer.homeserver.serverName, { timeout: 30_000 });
    const created = await api(peer, 'POST', '/_matrix/client/v3/createRoom', { token: bob.accessToken, body: { name: 'Bob’s history', preset: 'private_chat' } });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const roomId = created.body.room_id as string;
    const history = ['one', 'two', 'three', 'four', 'five'].map((n) => `Before you came: ${n}`);
    for (const [i, body] of history.entries()) {
      const sent = await api(peer, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/h${i}`, { token: bob.accessToken, body: { msgtype: 'm.text', body } });
      expect(sent.status).toBe(200);
    }
    expect((await api(peer, 'POST', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/invite`, { token: bob.accessToken, body: { user_id: ana } })).status).toBe(200);

    const invite = page.locator('.room-list .invite', { hasText: 'Bob’s history' });
    await invite.waitFor({ timeout: 30_000 });
    await invite.getByRole('button', { name: 'Accept' }).click();
    await page.locator('.room-title', { hasText: 'Bob’s history' }).waitFor({ timeout: 30_000 });
    // Every message from before the join, in order, and the room's start: nothing left to load.
    for (const body of history) await page.locator('.event .body', { hasText: body }).waitFor({ timeout: 30_000 });
    expect(await page.locator('.timeline .event .body').allTextContents()).toEqual(history);
    await page.locator('.timeline .notice', { hasText: 'bob created the room' }).waitFor({ timeout: 30_000 });
    expect(await page.getByRole('button', { name: 'Load earlier messages' }).count()).toBe(0);
    // Made without m.room.encryption on the other server: the header says so.
    expect(await page.locator('.room-encryption').textContent()).toBe('Not encrypted');
  }, 120_000);
});
