import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium } from './chromium.ts';
import { startFixtureServer, type FixtureServer } from './fixture-server.ts';

// The durable database on Chromium's real IndexedDB: what is acknowledged
// survives a page reload, and a second tab cannot open the same database.
let server: FixtureServer;
let browser: Browser;
let context: BrowserContext;
let url: string;

type Api = {
  open(name: string): Promise<{ ok: boolean; code?: string; message?: string }>;
  add(text: string): Promise<void>;
  notes(): Promise<string[]>;
  snapshot(): Promise<void>;
  stats(): { replayedAtOpen: number; snapshotSeq: number; lastSeq: number };
  close(): Promise<void>;
  inWorker(name: string, add?: string): Promise<{ ok: boolean; notes?: string[]; code?: string }>;
};

async function ready(page: Page): Promise<void> {
  await page.waitForFunction(() => (globalThis as { hearthReady?: boolean }).hearthReady === true);
}

beforeAll(async () => {
  server = await startFixtureServer();
  url = server.url('test/e2e/fixtures/storage.html');
  browser = await launchChromium();
  context = await browser.newContext();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

describe('durable storage in Chromium', () => {
  it('reads back after a reload what was acknowledged before it, from the snapshot and the log', async () => {
    const page = await context.newPage();
    await page.goto(url);
    await ready(page);
    const before = await page.evaluate(async () => {
      const s = (globalThis as unknown as { hearthStorage: Api }).hearthStorage;
      const opened = await s.open('reload');
      await s.add('first');
      await s.add('second ✓');
      await s.snapshot();
      await s.add('after the snapshot');
      return { opened, notes: await s.notes() };
    });
    expect(before.opened).toEqual({ ok: true });

    await page.reload(); // no close(): the page just goes away, as a tab does
    await ready(page);
    const after = await page.evaluate(async () => {
      const s = (globalThis as unknown as { hearthStorage: Api }).hearthStorage;
      const opened = await s.open('reload');
      return { opened, notes: await s.notes(), stats: s.stats() };
    });
    expect(after.opened).toEqual({ ok: true });
    expect(after.notes).toEqual(['first|first', 'second ✓|second ✓', 'after the snapshot|after the snapshot']);
    expect(after.notes).toEqual(before.notes);
    expect(after.stats).toMatchObject({ replayedAtOpen: 1, snapshotSeq: 3, lastSeq: 4 });
    await page.close();
  });

  it('refuses the database to a second tab while the first has it open', async () => {
    const [first, second] = [await context.newPage(), await context.newPage()];
    for (const page of [first, second]) {
      await page.goto(url);
      await ready(page);
    }
    const open = (page: Page): Promise<{ ok: boolean; code?: string }> =>
      page.evaluate(() => (globalThis as unknown as { hearthStorage: Api }).hearthStorage.open('two-tabs'));
    expect(await open(first)).toEqual({ ok: true });
    expect(await open(second)).toMatchObject({ ok: false, code: 'locked' });
    await first.evaluate(() => (globalThis as unknown as { hearthStorage: Api }).hearthStorage.close());
    expect(await open(second)).toEqual({ ok: true });
    await first.close();
    await second.close();
  });

  it('has FTS4 with the unicode61 tokenizer in the browser build of sql.js, as search needs', async () => {
    const page = await context.newPage();
    await page.goto(url);
    await ready(page);
    const result = await page.evaluate(() => (globalThis as unknown as { hearthStorage: { search(): Promise<{ found: number[]; words: string[]; tokenizers: string[] }> } }).hearthStorage.search());
    expect(result.found).toEqual([1]);
    expect(result.words).toEqual(['Crème', 'martians']);
    expect(result.tokenizers).toEqual(['simple', 'porter', 'unicode61']);
    await page.close();
  });

  it('works inside a Worker, whose lock the page respects and the other way round', async () => {
    const page = await context.newPage();
    await page.goto(url);
    await ready(page);
    const result = await page.evaluate(async () => {
      const s = (globalThis as unknown as { hearthStorage: Api }).hearthStorage;
      const written = await s.inWorker('worker', 'from the worker');
      const opened = await s.open('worker'); // the worker closed it: the page may open it now
      const notes = await s.notes();
      const whileHeld = await s.inWorker('worker');
      return { written, opened, notes, whileHeld };
    });
    expect(result.written).toEqual({ ok: true, notes: ['from the worker'] });
    expect(result.opened).toEqual({ ok: true });
    expect(result.notes).toEqual(['from the worker|']);
    expect(result.whileHeld).toMatchObject({ ok: false, code: 'locked' });
    await page.close();
  });
});
