import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CDPSession, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startNodeHost } from '../../src/node/node-host.ts';
import { exportNodeHomeserver } from '../../src/node/portable.ts';
import { serveStatic, type StaticServer } from '../../scripts/static-server.ts';
import { register } from '../integration/harness.ts';
import { createRoomThroughUi, openHearth, pageFetch, pageServerName, registerThroughUi, storedSession, type FetchResult } from './hearth-page.ts';
import { launchOnTmpfs, type TmpfsProfile } from './tmpfs-profile.ts';

// A full quota, for real (issue 22): Chromium runs with its profile on a 40 MiB tmpfs, so it grants
// the origin 60 % of that, 24 MiB, of which the page's own files take about half. Another database of
// the same origin (not the homeserver's) fills the quota to a little below the brim, the homeserver's
// writes fill the rest, and the browser refuses them with QuotaExceededError. Deleting the filler is the
// space a person frees. The disk itself never fills: a disk that runs out under Chromium has it drop the
// origin's data altogether (seen here: the whole origin gone, persisted or not), which no site can prevent.

const TMPFS_MIB = 40;
/** What the filler leaves of the quota: room for some acknowledged writes before the refusals. */
const HEADROOM = 2.5 * 1024 * 1024;
const FULL = { status: 507, body: { errcode: 'M_RESOURCE_LIMIT_EXCEEDED', error: expect.stringMatching(/^The homeserver's storage is full: nothing of this request was kept\. Free some space and try again/) } };

let server: StaticServer;
let profile: TmpfsProfile;
let files: string;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  server = await serveStatic(inject('hearthDist'), 0, '127.0.0.1');
  profile = await launchOnTmpfs(TMPFS_MIB);
  files = await mkdtemp(join(tmpdir(), 'hearth-quota-e2e-'));
});
afterAll(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
  await profile?.close();
  await server?.close();
  if (files) await rm(files, { recursive: true, force: true });
});

/** The origin's usage and quota as the browser counts them (navigator.storage.estimate() reports a fixed quota instead). */
async function usageAndQuota(cdp: CDPSession, origin: string): Promise<{ usage: number; quota: number }> {
  const { usage, quota } = (await cdp.send('Storage.getUsageAndQuota', { origin })) as { usage: number; quota: number };
  return { usage, quota };
}

/** Writes `bytes` random bytes (IndexedDB compresses what repeats) into the page's filler database; the transaction's outcome. */
const fillerPut = (page: Page, bytes: number): Promise<string> =>
  page.evaluate(async (bytes) => {
    const db = await new Promise<IDBDatabase>((resolve, reject) => {
      const open = indexedDB.open('quota-filler');
      open.onupgradeneeded = () => open.result.createObjectStore('filler');
      open.onsuccess = () => resolve(open.result);
      open.onerror = () => reject(open.error);
    });
    const chunk = new Uint8Array(bytes);
    // 64 KiB at a time: getRandomValues' most.
    for (let at = 0; at < chunk.length; at += 65_536) crypto.getRandomValues(chunk.subarray(at, Math.min(chunk.length, at + 65_536)));
    const outcome = await new Promise<string>((resolve) => {
      const tx = db.transaction('filler', 'readwrite', { durability: 'strict' });
      tx.objectStore('filler').put(chunk.buffer, crypto.randomUUID());
      tx.oncomplete = () => resolve('accepted');
      tx.onabort = () => resolve(tx.error?.name ?? 'aborted');
    });
    db.close();
    return outcome;
  }, bytes);

describe('a full quota, on a small tmpfs profile', () => {
  it('refuses every write with 507 M_RESOURCE_LIMIT_EXCEEDED and a sentence, loses nothing acknowledged across a reload, and works again once space is freed', async () => {
    const page = await openHearth(profile.context, server.url + '/');
    const origin = new URL(server.url).origin;
    const cdp = await profile.context.newCDPSession(page);
    // The browser grants persistent storage to this origin, as a person's browser may: the page asks for it when the account is created.
    await cdp.send('Browser.grantPermissions', { permissions: ['durableStorage'], origin });
    await registerThroughUi(page, 'fay');
    await createRoomThroughUi(page, 'Tight');
    expect(await page.evaluate(() => navigator.storage.persisted())).toBe(true);
    const { accessToken, userId } = await storedSession(page);
    const ask = (method: string, path: string, body?: unknown): Promise<FetchResult> => pageFetch(page, method, path, { token: accessToken, body });
    const roomId = (await ask('GET', '/_matrix/client/v3/joined_rooms')).body.joined_rooms[0] as string;
    const start = await usageAndQuota(cdp, origin);
    // The quota follows the tmpfs: 60 % of its size.
    expect(start.quota).toBe(Math.floor(profile.size * 0.6));

    // Fill the quota to HEADROOM below the brim, 1 MiB at a time.
    for (let i = 0; ; i++) {
      const now = await usageAndQuota(cdp, origin);
      if (now.quota - now.usage < HEADROOM) break;
      expect(i, `the filler never got near the quota: ${JSON.stringify(now)}`).toBeLessThan(30);
      expect(await fillerPut(page, 1024 * 1024)).toBe('accepted');
    }

    // Random text, so IndexedDB cannot compress it away.
    const padding = () => Array.from(crypto.getRandomValues(new Uint8Array(15_000)), (b) => b.toString(16).padStart(2, '0')).join('');
    const send = (txn: string, body: string) => ask('PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/${txn}`, { msgtype: 'm.text', body });
    const acknowledged: string[] = [];
    let refused: FetchResult | undefined;
    for (let i = 0; i < 300 && !refused; i++) {
      const r = await send(`fill${i}`, `fill ${i} ${padding()}`);
      if (r.status === 200) acknowledged.push(`fill ${i}`);
      // The page's homeserver limits a burst of sends: wait as long as it asks (as every client does), then send this one again.
      else if (r.status === 429) await page.waitForTimeout(Number(r.body.retry_after_ms ?? 1_000)), i--;
      else refused = r;
    }
    expect(refused, `the quota was never hit: ${acknowledged.length} sends acknowledged, ${JSON.stringify(await usageAndQuota(cdp, origin))}`).toBeDefined();
    expect(acknowledged.length, 'some writes fit before the quota').toBeGreaterThan(0);
    expect(refused).toMatchObject(FULL);

    // Every other kind of write is refused the same way while the quota is full.
    const upload = await page.evaluate(async (token) => {
      const r = await fetch('/_matrix/media/v3/upload?filename=big.bin', { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' }, body: new Uint8Array(1024 * 1024).fill(7) });
      return { status: r.status, body: await r.json() };
    }, accessToken);
    expect(upload).toMatchObject(FULL);
    const accountData = `/_matrix/client/v3/user/${encodeURIComponent(userId)}/account_data/org.example.quota`;
    expect(await ask('PUT', accountData, { note: padding() })).toMatchObject(FULL);
    expect(await ask('POST', '/_matrix/client/v3/createRoom', { name: 'Never made', topic: padding() })).toMatchObject(FULL);
    const displayName = `/_matrix/client/v3/profile/${encodeURIComponent(userId)}/displayname`;
    const nameBefore = (await ask('GET', displayName)).body.displayname;
    expect(await ask('PUT', displayName, { displayname: `Fay ${padding().slice(0, 900)}` })).toMatchObject(FULL);
    // Reads go on.
    expect((await ask('GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=5`)).status).toBe(200);
    expect((await ask('GET', '/_matrix/client/v3/sync?timeout=0')).status).toBe(200);

    // Space freed: writes go on.
    await page.evaluate(() => new Promise((resolve, reject) => { const r = indexedDB.deleteDatabase('quota-filler'); r.onsuccess = resolve; r.onerror = () => reject(r.error); }));
    expect((await send('after', 'room again')).status).toBe(200);
    const uploaded = await page.evaluate(async (token) => {
      const r = await fetch('/_matrix/media/v3/upload?filename=small.txt', { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' }, body: 'kept after all' });
      return { status: r.status, body: await r.json() };
    }, accessToken);
    expect(uploaded.status, JSON.stringify(uploaded.body)).toBe(200);
    expect((await ask('PUT', accountData, { note: 'kept' })).status).toBe(200);

    // After a reload (the database read back from its snapshot and redo log): every acknowledged write is there, no refused one.
    await page.reload();
    await page.waitForFunction(() => document.body.dataset.homeserver === 'ready');
    const history = await ask('GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=500`);
    const bodies = (history.body.chunk as any[]).filter((e) => e.type === 'm.room.message').map((e) => String(e.content.body).split(' ').slice(0, 2).join(' ')).reverse();
    expect(bodies).toEqual([...acknowledged, 'room again']);
    expect((await ask('GET', '/_matrix/client/v3/joined_rooms')).body.joined_rooms).toEqual([roomId]);
    expect((await ask('GET', accountData)).body).toEqual({ note: 'kept' });
    expect((await ask('GET', displayName)).body.displayname).toBe(nameBefore);
    const media = await page.evaluate(async ({ token, path }) => (await fetch(path, { headers: { authorization: `Bearer ${token}` } })).text(), { token: accessToken, path: `/_matrix/client/v1/media/download/${String(uploaded.body.content_uri).slice(6)}` });
    expect(media).toBe('kept after all');
  }, 240_000);

  it('an import the quota cannot hold stops midway: the page reloads, removes what it wrote, says so, and its own homeserver goes on', async () => {
    // A Node homeserver with 20 MiB of media, exported: more than the 24 MiB quota has left beside the page's own files.
    const dataDir = join(files, 'big-home');
    const host = await startNodeHost({ dataDir, port: 0, rateLimits: false });
    try {
      const hal = await register(host, 'hal');
      for (let i = 0; i < 20; i++) {
        const r = await fetch(`${host.url}/_matrix/media/v3/upload?filename=part${i}.bin`, { method: 'POST', headers: { authorization: `Bearer ${hal.accessToken}`, 'content-type': 'application/octet-stream' }, body: randomBytes(1024 * 1024) });
        expect(r.status).toBe(200);
      }
    } finally {
      await host.close();
    }
    const archive = join(files, 'big.hearth');
    await exportNodeHomeserver({ dataDir, out: archive, passphrase: 'too big to fit' });

    // Its own tmpfs profile: the first test's origin holds most of the other one.
    const own = await launchOnTmpfs(TMPFS_MIB);
    cleanups.push(() => own.close());
    const page = await openHearth(own.context, server.url + '/');
    const before = await pageServerName(page);
    const card = page.locator('form.keep-import');
    await card.getByLabel('Homeserver file').setInputFiles(archive);
    await card.getByLabel('Archive passphrase').fill('too big to fit');
    await card.getByRole('button', { name: 'Import' }).click();
    // The page reloads on its own, and the next start clears what the import wrote.
    await page.locator('form.keep-import [role=alert]', { hasText: 'The last import stopped before it finished' }).waitFor({ timeout: 120_000 });
    expect(await pageServerName(page)).toBe(before);
    const login = await pageFetch(page, 'POST', '/_matrix/client/v3/login', { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'hal' }, password: 'correct horse battery staple' } });
    expect(login.status).toBe(403);
    // Room again: this origin's own homeserver takes an account and a room.
    await registerThroughUi(page, 'ivy');
    await createRoomThroughUi(page, 'Still here');
  }, 240_000);
});
