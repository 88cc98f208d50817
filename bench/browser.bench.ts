// The browser host in each engine (issue 39), side by side: Chromium, Firefox and WebKit (WebKitGTK's
// MiniBrowser), driven through the same `Tab` as the cross-engine tests (test/e2e/browsers.ts). For each:
// cold start from page load to /versions answered (empty database, and with 10,000 events stored), one
// durable IndexedDB commit (what every acknowledged write waits for; on a profile on disk, launched with no
// driver), and a send → shown in the page's timeline. HEARTH_BENCH_ENGINES=chromium,firefox picks engines; HEARTH_BENCH_EVENTS the events stored.
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildPage } from '../scripts/build.ts';
import { serveStatic } from '../scripts/static-server.ts';
import { launchBrowserProcess } from '../test/e2e/browser-process.ts';
import { launchEngine, type Engine, type Profile, type Tab } from '../test/e2e/browsers.ts';
import { startXvfb } from '../test/e2e/webkit.ts';
import { percentile } from './harness.ts';

const STORED_EVENTS = Number(process.env.HEARTH_BENCH_EVENTS ?? 10_000);
const ENGINES = (process.env.HEARTH_BENCH_ENGINES ?? 'chromium,firefox,webkit').split(',') as Engine[];
const COMMIT_SAMPLES = 50;
const LATENCY_SAMPLES = 20;

interface Figures {
  version: string;
  firstVisitMs: number;
  emptyMs: number;
  storedMs: number;
  kept: boolean;
  fillMsPerEvent: number;
  latencies: number[];
}

const ready = (tab: Tab) => tab.waitForFunction(() => document.body.dataset.homeserver === 'ready' && (globalThis as any).hearthHost.state.core === 'running-here', undefined, 300_000);

/** When /versions was first answered, in ms since this document's navigation started. */
async function versionsAnsweredMs(tab: Tab): Promise<number> {
  await ready(tab);
  return tab.evaluate(() => performance.getEntriesByName('hearth-versions-answered')[0]!.startTime);
}

/** A client-server call from inside the page; a non-2xx answer throws. */
async function call(tab: Tab, method: string, path: string, token?: string, body?: unknown): Promise<any> {
  const result = await tab.evaluate(
    async ({ method, path, token, body }) => {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (token) headers['authorization'] = `Bearer ${token}`;
      const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: response.status, body: await response.json() };
    },
    { method, path, token, body },
  );
  if (result.status !== 200) throw new Error(`${tab.engine}: ${method} ${path}: ${result.status} ${JSON.stringify(result.body)}`);
  return result.body;
}

/** Sends `count` messages from inside the page, 8 in flight, and returns how long it took. */
function fill(tab: Tab, token: string, roomId: string, count: number): Promise<number> {
  return tab.evaluate(
    async ({ token, roomId, count }) => {
      const started = performance.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < count) {
            const i = next++;
            const response = await fetch(`/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/fill-${i}`, {
              method: 'PUT',
              headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
              body: JSON.stringify({ msgtype: 'm.text', body: `message ${i}: a line of text about the size of a chat message` }),
            });
            if (!response.ok) throw new Error(`send ${i}: ${response.status} ${await response.text()}`);
          }
        }),
      );
      return performance.now() - started;
    },
    { token, roomId, count },
  );
}

/**
 * The page's script that times small IndexedDB writes committed one after another with durability 'strict', as
 * the core commits, and posts their mean (the whole run over the count: Firefox and WebKit round performance.now()
 * to the millisecond) and p95 to /report.
 */
const COMMIT_PROBE = `
  const samples = ${COMMIT_SAMPLES};
  const db = await new Promise((resolve, reject) => {
    const open = indexedDB.open('hearth-bench-commit', 1);
    open.onupgradeneeded = () => open.result.createObjectStore('records');
    open.onsuccess = () => resolve(open.result);
    open.onerror = () => reject(open.error);
  });
  const record = new Uint8Array(1024);
  const times = [];
  const first = performance.now();
  for (let i = 0; i < samples; i++) {
    const started = performance.now();
    await new Promise((resolve, reject) => {
      const tx = db.transaction('records', 'readwrite', { durability: 'strict' });
      tx.objectStore('records').put(record, i);
      tx.oncomplete = () => resolve();
      tx.onerror = () => reject(tx.error);
    });
    times.push(performance.now() - started);
  }
  const mean = (performance.now() - first) / samples;
  times.sort((a, b) => a - b);
  await fetch('/report', { method: 'POST', body: JSON.stringify({ mean, p95: times[Math.ceil(0.95 * times.length) - 1] }) });
`;

/**
 * Durable commits on a profile on disk. Not through the drivers: a Playwright context is off the record and
 * WebKitWebDriver's MiniBrowser ephemeral, both keeping IndexedDB in memory. Each engine is launched as it is
 * (test/e2e/browser-process.ts) on a profile folder of its own, opening a page of this bench's that reports.
 */
async function diskCommits(engine: Engine, display: string): Promise<{ mean: number; p95: number }> {
  let resolveReport!: (figures: { mean: number; p95: number }) => void;
  const reported = new Promise<{ mean: number; p95: number }>((resolve) => (resolveReport = resolve));
  const server = createServer((request, response) => {
    if (request.method === 'POST') {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => (response.writeHead(204).end(), resolveReport(JSON.parse(body))));
    } else response.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><script type="module">${COMMIT_PROBE}</script>`);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const profile = await mkdtemp(join(tmpdir(), `hearth-bench-commit-${engine}-`));
  const browser = await launchBrowserProcess(engine, profile, `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, display);
  try {
    return await reported;
  } finally {
    await browser.killGroup();
    server.close();
    await rm(profile, { recursive: true, force: true });
  }
}

/** Sends from the page with fetch, and times until its own timeline shows the message (synced back to its client). */
async function sendToShown(tab: Tab, token: string, roomId: string, samples: number): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < samples; i++) {
    const text = `latency probe ${i} ${Math.random().toString(36).slice(2)}`;
    latencies.push(
      await tab.evaluate(
        async ({ token, roomId, text, i }) => {
          const shown = new Promise<number>((resolve) => {
            const observer = new MutationObserver(() => {
              if ([...document.querySelectorAll('.event:not(.pending) .body')].some((element) => element.textContent === text)) {
                observer.disconnect();
                resolve(performance.now());
              }
            });
            observer.observe(document.body, { childList: true, subtree: true, characterData: true });
          });
          const at = performance.now();
          await fetch(`/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/probe-${i}-${Date.now()}`, {
            method: 'PUT',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ msgtype: 'm.text', body: text }),
          });
          return (await shown) - at;
        },
        { token, roomId, text, i },
      ),
    );
  }
  return latencies.sort((a, b) => a - b);
}

async function measure(engine: Engine, url: string): Promise<Figures> {
  const browser = await launchEngine(engine);
  let profile: Profile | undefined;
  try {
    profile = await browser.newProfile();
    // Empty database, first visit: the service worker's install included.
    const tab = await profile.newTab(url);
    const version = await tab.evaluate(() => navigator.userAgent);
    const firstVisitMs = await versionsAnsweredMs(tab);
    // Empty database, again: a reload stops the core and starts it anew, the service worker installed.
    await tab.reload();
    const emptyMs = await versionsAnsweredMs(tab);

    const account = await call(tab, 'POST', '/_matrix/client/v3/register', undefined, { username: 'bench', password: 'bench password', auth: { type: 'm.login.dummy' } });
    const token = account.access_token as string;
    const roomId = (await call(tab, 'POST', '/_matrix/client/v3/createRoom', token, { name: 'bench' })).room_id as string;
    const fillMs = await fill(tab, token, roomId, STORED_EVENTS);

    // Events stored: the core starts again from storage. The page's client is signed in this time, on a room of its own for the latency.
    await tab.evaluate((a) => localStorage.setItem('hearth-session', JSON.stringify({ userId: a.user_id, accessToken: a.access_token, deviceId: a.device_id })), account);
    const latencyRoom = (await call(tab, 'POST', '/_matrix/client/v3/createRoom', token, { name: 'latency' })).room_id as string;
    await tab.reload();
    const storedMs = await versionsAnsweredMs(tab);
    const kept = (await tab.evaluate(async (token) => (await fetch('/_matrix/client/v3/account/whoami', { headers: { authorization: `Bearer ${token}` } })).status, token)) === 200;

    await tab.click({ css: '.room-item', text: 'latency' }, 120_000);
    await tab.waitFor({ css: '.room-title', text: 'latency' });
    const latencies = await sendToShown(tab, token, latencyRoom, LATENCY_SAMPLES);
    return { version, firstVisitMs, emptyMs, storedMs, kept, fillMsPerEvent: fillMs / STORED_EVENTS, latencies };
  } finally {
    await profile?.close();
    await browser.close();
  }
}

export async function run(): Promise<void> {
  const dist = await mkdtemp(join(tmpdir(), 'hearth-bench-'));
  // Sends are rate limited per device (10/s); storing 10,000 events needs them off.
  process.env.VITE_HEARTH_RATE_LIMITS = 'off';
  await buildPage(dist, { quiet: true });
  delete process.env.VITE_HEARTH_RATE_LIMITS;
  const server = await serveStatic(dist, 0);
  const figures = new Map<Engine, Figures & { commit: { mean: number; p95: number } }>();
  const display = await startXvfb();
  try {
    // One engine at a time, on one origin: each browser keeps its own storage.
    for (const engine of ENGINES) figures.set(engine, { ...(await measure(engine, server.url + '/')), commit: await diskCommits(engine, display.display) });
  } finally {
    display.process.kill();
    await once(display.process, 'exit');
    await server.close();
    await rm(dist, { recursive: true, force: true });
  }
  const engines = [...figures.keys()];
  const rows: [string, string, (f: Figures & { commit: { mean: number; p95: number } }) => number][] = [
    ['cold start, empty database, first visit (service worker install included)', 'ms', (f) => f.firstVisitMs],
    ['cold start, empty database', 'ms', (f) => f.emptyMs],
    [`cold start, ${STORED_EVENTS} events stored`, 'ms', (f) => f.storedMs],
    [`storing ${STORED_EVENTS} events (PUT /send, 8 in flight)`, 'ms/event', (f) => f.fillMsPerEvent],
    ['one durable commit (IndexedDB, strict, profile on disk), mean', 'ms', (f) => f.commit.mean],
    ['one durable commit (IndexedDB, strict, profile on disk), p95', 'ms', (f) => f.commit.p95],
    ['send → shown in the page, median', 'ms', (f) => percentile(f.latencies, 50)],
    ['send → shown in the page, p95', 'ms', (f) => percentile(f.latencies, 95)],
  ];
  console.log(`\n## browser host, per engine (page load → /versions answered; ${COMMIT_SAMPLES} commits of 1 KiB; ${LATENCY_SAMPLES} sends)`);
  const width = Math.max(...rows.map(([label, unit]) => label.length + unit.length + 3));
  const shown = (value: number) => (value >= 100 ? value.toFixed(0) : value >= 1 ? value.toFixed(2) : value.toFixed(3));
  console.log(`  ${''.padEnd(width)}${engines.map((engine) => engine.padStart(12)).join('')}`);
  for (const [label, unit, value] of rows) console.log(`  ${`${label} (${unit})`.padEnd(width)}${engines.map((engine) => shown(value(figures.get(engine)!)).padStart(12)).join('')}`);
  for (const [engine, f] of figures) {
    console.log(`  ${engine}: ${f.version}${f.kept ? '' : '; NOT MEANINGFUL: the account was gone after the restart'}`);
  }
  console.log(
    '  (Under their drivers Chromium and WebKit keep IndexedDB in memory, a Playwright context being off the record and WebDriver\'s MiniBrowser ephemeral: ' +
      'their cold starts read it from memory, Firefox\'s from disk. The commits were timed on profiles on disk, with no driver.)',
  );
}
