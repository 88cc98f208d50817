// The browser host in Chromium: cold start from page load to /versions answered
// (empty database, and with 10,000 events stored), and the latency from a send
// in one tab to the event showing in another tab's timeline.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { buildPage } from '../scripts/build.ts';
import { serveStatic } from '../scripts/static-server.ts';
import { launchChromium } from '../test/e2e/chromium.ts';
import { pageRequest, percentile, report, type Row } from './harness.ts';

const STORED_EVENTS = Number(process.env.HEARTH_BENCH_EVENTS ?? 10_000);
const LATENCY_SAMPLES = 40;

/** Opens the page and returns when /versions was first answered, in ms since navigation start, and the core's own start time. */
async function coldStart(context: BrowserContext, url: string): Promise<{ page: Page; versionsMs: number; coreStartMs: number | undefined }> {
  const page = await context.newPage();
  await page.goto(url);
  await page.waitForFunction(() => document.body.dataset.homeserver === 'ready', undefined, { timeout: 120_000 });
  const versionsMs = await page.evaluate(() => performance.getEntriesByName('hearth-versions-answered')[0]!.startTime);
  await page.waitForFunction(() => (globalThis as any).hearthHost.state.core === 'running-here', undefined, { timeout: 120_000 });
  const coreStartMs = await page.evaluate(() => (globalThis as any).hearthHost.state.startMs as number | undefined);
  return { page, versionsMs, coreStartMs };
}


/** Sends `count` messages from inside the page, a few at a time, and returns how long it took. */
async function fill(page: Page, token: string, roomId: string, count: number): Promise<number> {
  return page.evaluate(
    async ({ token, roomId, count }) => {
      const started = performance.now();
      let next = 0;
      // (No named functions in here: tsx would wrap them in a helper the page lacks.)
      await Promise.all(Array.from({ length: 8 }, async () => {
        while (next < count) {
          const i = next++;
          const response = await fetch(`/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/fill-${i}`, {
            method: 'PUT',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ msgtype: 'm.text', body: `message ${i}: a line of text about the size of a chat message` }),
          });
          if (!response.ok) throw new Error(`send ${i}: ${response.status} ${await response.text()}`);
        }
      }));
      return performance.now() - started;
    },
    { token, roomId, count },
  );
}

/** Sends from one tab, and times until the other tab's timeline shows the message. */
async function sendToVisible(sender: Page, viewer: Page, token: string, roomId: string, samples: number): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < samples; i++) {
    const text = `latency probe ${i} ${Math.random().toString(36).slice(2)}`;
    const seen = viewer.evaluate(
      (text) =>
        new Promise<number>((resolve) => {
          const observer = new MutationObserver(() => {
            if ([...document.querySelectorAll('.event:not(.pending) .body')].some((el) => el.textContent === text)) {
              observer.disconnect();
              resolve(performance.timeOrigin + performance.now());
            }
          });
          observer.observe(document.body, { childList: true, subtree: true });
        }),
      text,
    );
    // Let the observer attach before sending.
    await viewer.evaluate(() => new Promise((r) => requestAnimationFrame(() => r(null))));
    const sentAt = await sender.evaluate(
      async ({ token, roomId, text, i }) => {
        const at = performance.timeOrigin + performance.now();
        await fetch(`/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/probe-${i}-${at}`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ msgtype: 'm.text', body: text }),
        });
        return at;
      },
      { token, roomId, text, i },
    );
    latencies.push((await seen) - sentAt);
  }
  return latencies.sort((a, b) => a - b);
}

export async function run(): Promise<void> {
  const dist = await mkdtemp(join(tmpdir(), 'hearth-bench-'));
  // Sends are rate limited per device (10/s); storing 10,000 events needs them off.
  process.env.VITE_HEARTH_RATE_LIMITS = 'off';
  await buildPage(dist, { quiet: true });
  delete process.env.VITE_HEARTH_RATE_LIMITS;
  const server = await serveStatic(dist, 0);
  const browser = await launchChromium();
  const url = server.url + '/';
  try {
    // Empty database, first visit: service worker install included.
    const context = await browser.newContext();
    const first = await coldStart(context, url);
    // Empty database, later visit: the service worker is installed.
    await first.page.close();
    const again = await coldStart(context, url);

    const registered = await pageRequest(again.page, 'POST', '/_matrix/client/v3/register', undefined, { username: 'bench', password: 'bench password', auth: { type: 'm.login.dummy' } });
    const token = registered.access_token as string;
    const roomId = (await pageRequest(again.page, 'POST', '/_matrix/client/v3/createRoom', token, { name: 'bench' })).room_id as string;
    const fillMs = await fill(again.page, token, roomId, STORED_EVENTS);

    // 10,000 events stored: close every page, so the core restarts from storage.
    await again.page.close();
    const full = await coldStart(context, url);
    const kept = await full.page.evaluate(async (token) => (await fetch('/_matrix/client/v3/account/whoami', { headers: { authorization: `Bearer ${token}` } })).status === 200, token);

    // Send in one tab, visible in the other (both UIs signed in as the same user).
    // Without durable storage the account is gone after the restart: make it again.
    const session = kept ? registered : await pageRequest(full.page, 'POST', '/_matrix/client/v3/register', undefined, { username: 'bench', password: 'bench password', auth: { type: 'm.login.dummy' } });
    await full.page.evaluate((r) => localStorage.setItem('hearth-session', JSON.stringify({ userId: r.user_id, accessToken: r.access_token, deviceId: r.device_id })), session);
    const latencyRoom = (await pageRequest(full.page, 'POST', '/_matrix/client/v3/createRoom', session.access_token, { name: 'latency' })).room_id as string;
    const viewer = await context.newPage();
    await viewer.goto(url);
    await viewer.waitForFunction(() => document.body.dataset.synced === 'true', undefined, { timeout: 60_000 });
    await viewer.locator('.room-item', { hasText: 'latency' }).click();
    await viewer.locator('.room-title', { hasText: 'latency' }).waitFor();
    const latencies = await sendToVisible(full.page, viewer, session.access_token, latencyRoom, LATENCY_SAMPLES);

    const rows: Row[] = [
      ['cold start, empty database, first visit', first.versionsMs, 'ms', `page load → /versions answered; core start ${first.coreStartMs?.toFixed(0)} ms; includes service worker install`],
      ['cold start, empty database', again.versionsMs, 'ms', `core start ${again.coreStartMs?.toFixed(0)} ms`],
      [
        `cold start, ${STORED_EVENTS} events stored`,
        full.versionsMs,
        'ms',
        kept ? `core start ${full.coreStartMs?.toFixed(0)} ms` : `core start ${full.coreStartMs?.toFixed(0)} ms; NOT MEANINGFUL: storage is in memory, the data was gone`,
      ],
      [`storing ${STORED_EVENTS} events (PUT /send, 8 in flight)`, fillMs / STORED_EVENTS, 'ms/event', `${(fillMs / 1000).toFixed(1)} s in all`],
      ['send in tab A → shown in tab B, median', percentile(latencies, 50), 'ms', `${LATENCY_SAMPLES} sends`],
      ['send in tab A → shown in tab B, p95', percentile(latencies, 95), 'ms'],
    ];
    report('browser host', `Chromium ${browser.version()}, headless`, rows);
    await context.close();
  } finally {
    await browser.close();
    await server.close();
    await rm(dist, { recursive: true, force: true });
  }
}
