// Issue 25: the page's chat client (matrix-js-sdk + Rust crypto). (1) Page load → the room list from the
// first sync answer shown (`hearth-rooms-shown`), a signed-in reload with no room and with 100 rooms, on
// sliding sync and (the page told to) on /sync. (2) The cost
// of encryption per message: send through the UI in one browser homeserver → shown in the other's
// timeline, in an encrypted DM and in a plain room, in the same run (two contexts linked through a Node relay).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { buildPage } from '../scripts/build.ts';
import { serveStatic } from '../scripts/static-server.ts';
import { startNodeHost } from '../src/node/node-host.ts';
import { launchChromium } from '../test/e2e/chromium.ts';
import { openHearth, registerThroughUi, storedSession } from '../test/e2e/hearth-page.ts';
import { pageRequest, percentile, report, type Row } from './harness.ts';

const RELOADS = 5;
const SAMPLES = 15;

interface Loads {
  first: number[];
  every: number[];
}

/**
 * Reloads the page RELOADS times on sliding sync and, alternating with it (so that a busy moment of the machine or the
 * core weighs on both), on /sync (`hearth-sync` = `sync`, sliding.ts), taking `measure` after each; then back on
 * sliding sync.
 */
async function afterReloads<T>(page: Page, measure: () => Promise<T>): Promise<{ sliding: T[]; sync: T[] }> {
  const loads = { sliding: [] as T[], sync: [] as T[] };
  for (let i = 0; i < RELOADS; i++) {
    for (const mode of ['sliding', 'sync'] as const) {
      await page.evaluate((mode) => (mode === 'sync' ? localStorage.setItem('hearth-sync', 'sync') : localStorage.removeItem('hearth-sync')), mode);
      await page.reload();
      loads[mode].push(await measure());
    }
  }
  await page.evaluate(() => localStorage.removeItem('hearth-sync'));
  await page.reload();
  return loads;
}

const sorted = (times: number[]) => [...times].sort((a, b) => a - b);

/** Reload → the first room list shown (`hearth-rooms-shown`), and → all of `all` rooms listed (polled each frame). */
async function roomsShownAfterReload(page: Page, all = 0): Promise<{ sliding: Loads; sync: Loads }> {
  const loads = await afterReloads(page, async () => {
    await page.waitForFunction(() => performance.getEntriesByName('hearth-rooms-shown').length > 0, undefined, { timeout: 120_000 });
    const first = await page.evaluate(() => performance.getEntriesByName('hearth-rooms-shown')[0]!.startTime);
    const listed = await page.waitForFunction((all) => document.querySelectorAll('.room-list .room-item').length >= all && performance.now(), all, { timeout: 120_000, polling: 'raf' });
    return { first, every: (await listed.jsonValue()) as number };
  });
  const byMode = (times: Array<{ first: number; every: number }>): Loads => ({ first: sorted(times.map((t) => t.first)), every: sorted(times.map((t) => t.every)) });
  return { sliding: byMode(loads.sliding), sync: byMode(loads.sync) };
}

/**
 * Reload → the newest message (`newest`) of the room the page opens, the one last active, shown in its timeline,
 * decrypted if the room is encrypted: what a person reopening the page reads first. Timed in the page, by a
 * MutationObserver that each load starts before the page's own scripts run: Playwright's wait polls, up to 500 ms
 * apart once the first polls find nothing, and read that late.
 */
async function newestShownAfterReload(page: Page, newest: string): Promise<{ sliding: number[]; sync: number[] }> {
  const mark = `hearth-shown:${newest}`;
  await page.addInitScript(({ text, mark }) => {
    const observer = new MutationObserver(() => {
      if (![...document.querySelectorAll('.timeline .event .body')].some((e) => e.textContent === text)) return;
      observer.disconnect();
      performance.mark(mark);
    });
    observer.observe(document, { childList: true, subtree: true, characterData: true });
  }, { text: newest, mark });
  const loads = await afterReloads(page, async () => {
    const shown = await page.waitForFunction((mark) => performance.getEntriesByName(mark)[0]?.startTime, mark, { timeout: 120_000 });
    return (await shown.jsonValue()) as number;
  });
  return { sliding: sorted(loads.sliding), sync: sorted(loads.sync) };
}

/** Sends `text` through A's composer; resolves with the time until it is in B's timeline (a MutationObserver in B). */
async function sendToShown(a: Page, b: Page, text: string): Promise<number> {
  const shown = b.evaluate(
    (text) =>
      new Promise<number>((resolve) => {
        // No named function here: tsx would wrap it in a helper the page does not have.
        const observer = new MutationObserver(() => {
          if (![...document.querySelectorAll('.timeline .event .body')].some((e) => e.textContent === text)) return;
          observer.disconnect();
          resolve(performance.timeOrigin + performance.now());
        });
        observer.observe(document.body, { childList: true, subtree: true, characterData: true });
      }),
    text,
  );
  await a.getByLabel('Message').fill(text);
  const sentAt = await a.evaluate(() => {
    (document.querySelector('.composer button[type="submit"]') as HTMLButtonElement).click();
    return performance.timeOrigin + performance.now();
  });
  return (await shown) - sentAt;
}

export async function run(): Promise<void> {
  const dist = await mkdtemp(join(tmpdir(), 'hearth-bench-client-'));
  const data = await mkdtemp(join(tmpdir(), 'hearth-bench-client-data-'));
  await buildPage(dist, { quiet: true });
  const relay = await startNodeHost({ dataDir: data, port: 0, listen: ['/ip4/127.0.0.1/tcp/0/ws'], relay: true, rateLimits: false });
  const server = await serveStatic(dist, 0, '127.0.0.1', { config: { bootstrap: relay.p2p.multiaddrs(), iceServers: [], allowPrivateAddresses: true } });
  const browser = await launchChromium();
  const url = server.url + '/';
  try {
    const [contextA, contextB] = [await browser.newContext(), await browser.newContext()];
    const a = await openHearth(contextA, url);
    const b = await openHearth(contextB, url);
    await registerThroughUi(a, 'ana');
    await registerThroughUi(b, 'ben');
    const ben = (await storedSession(b)).userId;
    const anaServer = (await storedSession(a)).userId.split(':')[1];
    await a.waitForFunction((name) => (globalThis as any).hearthP2P.reachable.has(name), ben.split(':')[1], { timeout: 60_000 });
    await b.waitForFunction((name) => (globalThis as any).hearthP2P.reachable.has(name), anaServer, { timeout: 60_000 });

    // Load → room list: no room yet, then 100.
    const none = await roomsShownAfterReload(a);
    const noRooms = none.sliding.first;
    const { accessToken } = await storedSession(a);
    for (let i = 0; i < 100; i++) await pageRequest(a, 'POST', '/_matrix/client/v3/createRoom', accessToken, { name: `Room ${i}`, preset: 'private_chat' });
    const hundred = await roomsShownAfterReload(a, 100);
    // The reloads restarted A's libp2p node: Ben's server must be reachable again before inviting him.
    await a.waitForFunction((name) => (globalThis as any).hearthP2P?.reachable.has(name), ben.split(':')[1], { timeout: 60_000 });

    // Encrypted DM and a plain (public) room between the two, both joined by Ben through the UI.
    const open = async (make: () => Promise<void>) => {
      await make();
      const roomId = (await a.locator('.room-id').getAttribute('data-room-id'))!;
      await b.locator('.invite').first().getByRole('button', { name: 'Accept' }).click({ timeout: 60_000 });
      await b.locator(`.room-id[data-room-id="${roomId}"]`).waitFor({ timeout: 60_000 });
      await a.locator('.timeline .notice', { hasText: 'ben joined' }).waitFor({ timeout: 60_000 });
    };
    await open(async () => {
      await a.getByLabel('Start a direct chat with').fill(ben);
      await a.getByRole('button', { name: 'Start chat' }).click();
      await a.locator('.room-encryption', { hasText: /^Encrypted$/ }).waitFor();
      await a.locator('.room-title', { hasText: 'ben' }).waitFor();
    });
    const encrypted: number[] = [];
    for (let i = 0; i < SAMPLES + 1; i++) encrypted.push(await sendToShown(a, b, `encrypted ${i}`));
    const encryptedShown = await newestShownAfterReload(a, `encrypted ${SAMPLES}`);
    await a.waitForFunction((name) => (globalThis as any).hearthP2P?.reachable.has(name), ben.split(':')[1], { timeout: 60_000 });
    await open(async () => {
      await a.getByLabel('New room name').fill('Plain');
      await a.getByLabel('Public room (not encrypted)').check();
      await a.getByRole('button', { name: 'Create', exact: true }).click();
      await a.locator('.room-title', { hasText: 'Plain' }).waitFor();
      await a.locator('#invite-user-id').fill(ben);
      await a.getByRole('button', { name: 'Invite', exact: true }).click();
    });
    const plain: number[] = [];
    for (let i = 0; i < SAMPLES + 1; i++) plain.push(await sendToShown(a, b, `plain ${i}`));
    // Reload → the newest message of the room the page opens (the one last active) shown.
    const plainShown = await newestShownAfterReload(a, `plain ${SAMPLES}`);
    // The first of each warms up (key sharing for the encrypted one).
    const firstEncrypted = encrypted.shift()!;
    plain.shift();
    encrypted.sort((x, y) => x - y);
    plain.sort((x, y) => x - y);
    const rows: Row[] = [
      ['signed-in reload → room list shown, no rooms, p50 (sliding sync)', percentile(noRooms, 50), 'ms', `${RELOADS} reloads; /sync ${percentile(none.sync.first, 50).toFixed(0)} ms`],
      ['signed-in reload → room list shown, 100 rooms, p50 (sliding sync)', percentile(hundred.sliding.first, 50), 'ms', `${(percentile(hundred.sliding.first, 50) / percentile(noRooms, 50)).toFixed(2)}× the load with none; its first answer holds 20 rooms a list`],
      ['signed-in reload → room list shown, 100 rooms, p50 (/sync)', percentile(hundred.sync.first, 50), 'ms', `sliding sync / (/sync): ${(percentile(hundred.sliding.first, 50) / percentile(hundred.sync.first, 50)).toFixed(2)}×`],
      ['signed-in reload → all 100 rooms listed, p50 (sliding sync)', percentile(hundred.sliding.every, 50), 'ms', 'the lists grown by the next answer'],
      ['signed-in reload → all 100 rooms listed, p50 (/sync)', percentile(hundred.sync.every, 50), 'ms', `sliding sync / (/sync): ${(percentile(hundred.sliding.every, 50) / percentile(hundred.sync.every, 50)).toFixed(2)}×`],
      ['signed-in reload → newest message of the room opened shown, plain room, p50 (sliding sync)', percentile(plainShown.sliding, 50), 'ms', `${RELOADS} reloads, 100 other rooms; /sync ${percentile(plainShown.sync, 50).toFixed(0)} ms`],
      ['signed-in reload → newest message of the room opened shown, encrypted DM, p50 (sliding sync)', percentile(encryptedShown.sliding, 50), 'ms', `decrypted; /sync ${percentile(encryptedShown.sync, 50).toFixed(0)} ms`],
      ['send in A → shown in B, encrypted DM, p50', percentile(encrypted, 50), 'ms', `${SAMPLES} sends; the first (with the room key's sharing) ${firstEncrypted.toFixed(0)} ms`],
      ['send in A → shown in B, plain room, p50', percentile(plain, 50), 'ms', `${SAMPLES} sends`],
      ['encryption cost per message (p50 encrypted / plain)', percentile(encrypted, 50) / percentile(plain, 50), '×'],
      ['send in A → shown in B, encrypted / plain, p95', percentile(encrypted, 95), 'ms', `plain p95 ${percentile(plain, 95).toFixed(0)} ms`],
    ];
    report('the page’s chat client (matrix-js-sdk, Rust crypto)', `Chromium ${browser.version()}, headless; two browser homeservers through a Node relay in the bench process`, rows);
    await contextA.close();
    await contextB.close();
  } finally {
    await browser.close();
    await server.close();
    await relay.close();
    await rm(dist, { recursive: true, force: true });
    await rm(data, { recursive: true, force: true });
  }
}
