// Durable storage: commit cost against database size, in Node (fake-indexeddb
// and files with fdatasync) and in Chromium (real IndexedDB), with the naive
// "export the whole image and store it on every commit" as the baseline; plus
// snapshot and replay costs, which set the snapshot policy.
import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { wrap, type IDBPDatabase } from 'idb';
import { mkdir, mkdtemp, open, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import initSqlJs from 'sql.js';
import { openFilePersistence } from '../src/node/file-persistence.ts';
import { DEFAULT_SNAPSHOT_POLICY } from '../src/storage/durable-database.ts';
import { openIndexedDbPersistence } from '../src/storage/indexeddb-persistence.ts';
import { launchChromium } from '../test/e2e/chromium.ts';
import { startFixtureServer } from '../test/e2e/fixture-server.ts';
import { report, type Row } from './harness.ts';
import { benchReplay, benchSizes, buildImage, type BenchTarget, type SizeResult } from './storage-workload.ts';

const SIZES_MB = (process.env.HEARTH_BENCH_STORAGE_SIZES ?? '1,10,28,100').split(',').map(Number);
const COMMITS = 300;
const naiveCommits = (mb: number): number => (mb >= 28 ? 3 : 10);
const MB = 1024 * 1024;

function fakeIndexedDbTarget(): BenchTarget {
  const factory = new IDBFactory();
  let naive: Promise<IDBPDatabase> | undefined;
  return {
    persistence: (name) => openIndexedDbPersistence({ name, indexedDB: factory, locks: null }),
    reset: (name) => wrap(factory.deleteDatabase(name)).then(() => undefined),
    async persistWhole(image) {
      naive ??= (async () => {
        const request = factory.open('naive', 1);
        request.onupgradeneeded = () => request.result.createObjectStore('image');
        return (await wrap(request)) as unknown as IDBPDatabase;
      })();
      const tx = (await naive).transaction('image', 'readwrite', { durability: 'strict' });
      await Promise.all([tx.store.put(image, 'image'), tx.done]);
    },
  };
}

async function fileTarget(): Promise<{ target: BenchTarget; cleanup: () => Promise<void> }> {
  const root = await mkdtemp(join(tmpdir(), 'hearth-bench-'));
  return {
    target: {
      persistence: (name) => openFilePersistence({ directory: join(root, name) }),
      async reset(name) {
        await rm(join(root, name), { recursive: true, force: true });
        await mkdir(join(root, name));
      },
      async persistWhole(image) {
        const handle = await open(join(root, 'naive.db'), 'w');
        try {
          await handle.write(image, 0, image.length, 0);
          await handle.datasync();
        } finally {
          await handle.close();
        }
      },
    },
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
}

/** A snapshot's cost spread over the commits between two snapshots under the default policy. */
function snapshotInterval(r: SizeResult): { bytes: number; commits: number } {
  const policy = DEFAULT_SNAPSHOT_POLICY;
  const bytes = Math.max(policy.minLogBytes, Math.min(policy.maxLogBytes, policy.logToImageRatio * r.imageBytes));
  return { bytes, commits: bytes / r.recordBytes };
}

function amortisedSnapshotMs(r: SizeResult): number {
  const s = r.snapshotMs;
  return (s.export + s.checksum + s.store) / snapshotInterval(r).commits;
}

/** Other work on a shared machine inflates every figure: say how busy it was. */
const load = (): string => `load average ${loadavg()[0]!.toFixed(1)}`;

const fmt = (ms: number): string => (ms >= 100 ? ms.toFixed(0) : ms >= 1 ? ms.toFixed(1) : ms.toFixed(2));

function printResults(context: string, results: SizeResult[], replay: { entries: number; logBytes: number; replayMs: number; loadMs: number }): void {
  const rows: Row[] = [];
  for (const r of results) {
    const c = r.commit;
    rows.push([`${r.targetMB} MB commit (mean)`, c.mean, 'ms', `p50 ${fmt(c.p50)}, p95 ${fmt(c.p95)}; ${c.perSecond.toFixed(0)}/s one at a time, ${r.groupedPerSecond.toFixed(0)}/s with 16 writers; ${r.recordBytes.toFixed(0)} B log entry`]);
    rows.push([`${r.targetMB} MB naive export + store`, r.naive.mean, 'ms', `export ${fmt(r.naive.exportMs)} + store ${fmt(r.naive.persistMs)}; ${(r.naive.mean / c.mean).toFixed(0)}× a commit`]);
  }
  const first = results[0]!;
  const largest = results[results.length - 1]!;
  const at28 = results.find((r) => r.targetMB === 28);
  rows.push([`per-commit cost, ${largest.targetMB} MB vs ${first.targetMB} MB`, largest.commit.mean / first.commit.mean, '×', `mean; p50 ${(largest.commit.p50 / first.commit.p50).toFixed(2)}×; target ≤ 1.5`]);
  const withSnapshots = (r: SizeResult): number => r.commit.mean + amortisedSnapshotMs(r);
  rows.push([`  the same, counting amortised snapshots`, withSnapshots(largest) / withSnapshots(first), '×', `${fmt(withSnapshots(first))} → ${fmt(withSnapshots(largest))} ms under the default policy`]);
  if (at28) rows.push(['naive persist vs commit at 28 MB', at28.naive.mean / at28.commit.mean, '×', `mean; vs p50 ${(at28.naive.mean / at28.commit.p50).toFixed(0)}×; target ≥ 20`]);
  report('storage: commit cost vs database size', context, rows);

  const replayMsPerMB = replay.replayMs / (replay.logBytes / MB);
  const snapshotRows: Row[] = [];
  for (const r of results) {
    const s = r.snapshotMs;
    const total = s.export + s.checksum + s.store;
    const { bytes: threshold, commits: commitsPerSnapshot } = snapshotInterval(r);
    const o = r.openTimings;
    snapshotRows.push([`${r.targetMB} MB snapshot`, total, 'ms', `export ${fmt(s.export)} (blocks writes), checksum ${fmt(s.checksum)}, store ${fmt(s.store)}`]);
    snapshotRows.push([`${r.targetMB} MB open (no log)`, r.openMs, 'ms', `load ${fmt(o.loadMs)}, checksum + image ${fmt(o.verifyMs)}, quick_check ${fmt(o.checkMs)}`]);
    snapshotRows.push([`${r.targetMB} MB snapshot amortised per commit`, amortisedSnapshotMs(r), 'ms', `default policy: every ${(threshold / MB).toFixed(1)} MB of log ≈ ${commitsPerSnapshot.toFixed(0)} commits; replaying that log at open ≈ ${fmt((threshold / MB) * replayMsPerMB)} ms`]);
  }
  snapshotRows.push(['replay at open', replayMsPerMB, 'ms/MB', `${replay.entries} entries, ${(replay.logBytes / MB).toFixed(2)} MB in ${fmt(replay.replayMs)} ms (loading them took ${fmt(replay.loadMs)} ms)`]);
  report('storage: snapshots and replay', context, snapshotRows);
}

async function runNode(sqlJs: Awaited<ReturnType<typeof initSqlJs>>): Promise<void> {
  const built = new Map<number, { image: Uint8Array; events: number }>();
  for (const mb of SIZES_MB) built.set(mb, await buildImage(sqlJs, mb * MB));

  const fake = fakeIndexedDbTarget();
  const fakeResults = await benchSizes(sqlJs, fake, SIZES_MB, { commits: COMMITS, naiveCommits, built });
  printResults(`node ${process.version}, fake-indexeddb (in memory: CPU cost only), ${load()}`, fakeResults, await benchReplay(sqlJs, fake, 3000));

  const files = await fileTarget();
  try {
    const fileResults = await benchSizes(sqlJs, files.target, SIZES_MB, { commits: COMMITS, naiveCommits, built });
    printResults(`node ${process.version}, files with fdatasync in ${tmpdir()}, ${load()}`, fileResults, await benchReplay(sqlJs, files.target, 3000));
  } finally {
    await files.cleanup();
  }
}

async function runChromium(): Promise<void> {
  const server = await startFixtureServer();
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    await page.goto(server.url('bench/fixtures/storage-bench.html'));
    await page.waitForFunction(() => (globalThis as { hearthReady?: boolean }).hearthReady === true);
    const version = browser.version();
    const result = await page.evaluate(
      (config) => (globalThis as unknown as { runStorageBench(c: typeof config): Promise<{ sizes: SizeResult[]; replay: { entries: number; logBytes: number; replayMs: number; loadMs: number } }> }).runStorageBench(config),
      { sizes: SIZES_MB, commits: COMMITS, replayEntries: 3000 },
    );
    printResults(`Chromium ${version}, IndexedDB, durability strict, ${load()}`, result.sizes, result.replay);
  } finally {
    await browser.close();
    await server.close();
  }
}

export async function run(): Promise<void> {
  const sqlJs = await initSqlJs();
  const only = process.env.HEARTH_BENCH_STORAGE; // 'node' or 'chromium' to run one half
  if (only !== 'chromium') await runNode(sqlJs);
  if (only !== 'node') await runChromium();
}
