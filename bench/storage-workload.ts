// The storage benchmark's workload, shared by the Node run and the Chromium
// page (platform-free): build a database of a given size, then time small
// write transactions (one event row plus its index rows) through the durable
// path and through the naive "export the whole image and store it" path.
import type { SqlJsStatic } from 'sql.js';
import type { ComponentSchema, Database, WriteTransaction } from '../src/storage/database.ts';
import { openDurableDatabase, type DurableDatabase } from '../src/storage/durable-database.ts';
import { crc32 } from '../src/storage/crc32.ts';
import type { Persistence } from '../src/storage/persistence.ts';
import { openSqlJsDatabase } from '../src/storage/sqljs-database.ts';

export const eventsSchema: ComponentSchema = {
  component: 'bench',
  migrations: [
    {
      version: 1,
      description: 'events and their stream',
      up: (tx) => {
        tx.run(`CREATE TABLE events (
          event_nid INTEGER PRIMARY KEY, event_id TEXT NOT NULL UNIQUE, room_id TEXT NOT NULL,
          type TEXT NOT NULL, sender TEXT NOT NULL, origin_ts INTEGER NOT NULL, json TEXT NOT NULL)`);
        tx.run('CREATE INDEX events_by_room_ts ON events (room_id, origin_ts)');
        tx.run('CREATE INDEX events_by_sender ON events (sender)');
        tx.run('CREATE TABLE room_stream (stream_pos INTEGER PRIMARY KEY, room_id TEXT NOT NULL, event_nid INTEGER NOT NULL)');
        tx.run('CREATE INDEX room_stream_by_room ON room_stream (room_id, stream_pos)');
      },
    },
  ],
};

const BODY = 'The quick brown fox jumps over the lazy dog. '.repeat(10);

/** One event (about 700 bytes of JSON) and its stream row: 2 rows, 5 index entries. */
export function insertEvent(tx: WriteTransaction, i: number): void {
  // Event IDs are hashes in Matrix: scatter them so the unique index sees random inserts.
  const scattered = (Math.imul(i + 1, 0x9e3779b1) >>> 0).toString(16).padStart(8, '0');
  const eventId = `$${scattered}${i.toString(36).padStart(8, '0')}${'A'.repeat(27)}`;
  const roomId = `!room${i % 50}:example.org`;
  const sender = `@user${i % 200}:example.org`;
  const ts = 1_700_000_000_000 + i;
  const json = JSON.stringify({
    type: 'm.room.message', room_id: roomId, sender, origin_server_ts: ts, event_id: eventId,
    content: { msgtype: 'm.text', body: `${i} ${BODY}` }, unsigned: { age: 1 },
  });
  const nid = tx.run('INSERT INTO events (event_id, room_id, type, sender, origin_ts, json) VALUES (?, ?, ?, ?, ?, ?)', [
    eventId, roomId, 'm.room.message', sender, ts, json,
  ]).lastInsertRowid;
  tx.run('INSERT INTO room_stream (room_id, event_nid) VALUES (?, ?)', [roomId, nid]);
}

/** An SQLite image of at least targetBytes, and how many events it holds. */
export async function buildImage(sqlJs: SqlJsStatic, targetBytes: number): Promise<{ image: Uint8Array; events: number }> {
  const db = await openSqlJsDatabase({ sqlJs, schemas: [eventsSchema] });
  let events = 0;
  const size = (): number => db.getSync<{ bytes: number }>('SELECT page_count * page_size AS bytes FROM pragma_page_count, pragma_page_size')!.bytes;
  while (size() < targetBytes) {
    const batch = Math.max(100, Math.min(5000, Math.ceil((targetBytes - size()) / 1200)));
    await db.transaction((tx) => {
      for (let k = 0; k < batch; k++) insertEvent(tx, events + k);
    });
    events += batch;
  }
  db.freeStatements();
  const image = db.db.export();
  await db.close();
  return { image, events };
}

export interface Latencies {
  mean: number;
  p50: number;
  p95: number;
  perSecond: number;
}

export function summarise(samples: number[]): Latencies {
  const sorted = [...samples].sort((a, b) => a - b);
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  const at = (p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
  return { mean, p50: at(50), p95: at(95), perSecond: 1000 / mean };
}

/** Sequential commits: each waits for the previous one's acknowledgement. */
export async function timeCommits(db: Database, firstEvent: number, count: number): Promise<number[]> {
  const samples: number[] = [];
  for (let k = 0; k < count; k++) {
    const start = performance.now();
    await db.transaction((tx) => insertEvent(tx, firstEvent + k));
    samples.push(performance.now() - start);
  }
  return samples;
}

/** Commits per second with `writers` transactions always outstanding (they share appends). */
export async function groupedThroughput(db: Database, firstEvent: number, count: number, writers: number): Promise<number> {
  let next = firstEvent;
  const end = firstEvent + count;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: writers }, async () => {
      while (next < end) {
        const i = next++;
        await db.transaction((tx) => insertEvent(tx, i));
      }
    }),
  );
  return (count / (performance.now() - start)) * 1000;
}

export interface SizeResult {
  targetMB: number;
  imageBytes: number;
  commit: Latencies;
  groupedPerSecond: number;
  recordBytes: number;
  naive: { mean: number; exportMs: number; persistMs: number };
  /** Snapshot of this image: export, checksum, store. */
  snapshotMs: { export: number; checksum: number; store: number };
  /** openDurableDatabase on snapshot + empty log: load, checksum, integrity check. */
  openMs: number;
  openTimings: { loadMs: number; verifyMs: number; replayMs: number; checkMs: number };
}

export interface BenchTarget {
  /** The store called `name`: empty after reset(name), then reopened as it was left. */
  persistence(name: string): Promise<Persistence>;
  reset(name: string): Promise<void>;
  /** The naive store: persist a whole image durably. */
  persistWhole(image: Uint8Array): Promise<void>;
}

const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));
const noAutomaticSnapshots = { minLogBytes: Number.MAX_SAFE_INTEGER, idleMinLogBytes: Number.MAX_SAFE_INTEGER };

export interface SizesOptions {
  commits: number;
  naiveCommits: (mb: number) => number;
  /** Images built beforehand (Node builds them once for both backends). */
  built?: Map<number, { image: Uint8Array; events: number }>;
}

/**
 * Opens one durable database per size, all at once, and times commits in
 * interleaved rounds across them, so JIT warm-up and other load on the machine
 * fall on every size alike rather than on whichever ran first.
 */
export async function benchSizes(sqlJs: SqlJsStatic, target: BenchTarget, sizesMB: number[], options: SizesOptions): Promise<SizeResult[]> {
  type Opened = { mb: number; image: Uint8Array; events: number; db: DurableDatabase; openMs: number; openTimings: SizeResult['openTimings']; samples: number[]; next: number };
  const opened: Opened[] = [];
  const open = (name: string): Promise<DurableDatabase> =>
    target.persistence(name).then((persistence) => openDurableDatabase({ sqlJs, persistence, schemas: [eventsSchema], snapshotPolicy: noAutomaticSnapshots }));
  const seeded: Array<{ mb: number; image: Uint8Array; events: number; openMs: number; openTimings: SizeResult['openTimings'] }> = [];
  for (const mb of sizesMB) {
    const { image, events } = options.built?.get(mb) ?? (await buildImage(sqlJs, mb * 1024 * 1024));
    const name = `bench-${mb}`;
    await target.reset(name);
    // Seed the store with the image as its first snapshot, as if the database had grown to this size.
    const seed = await target.persistence(name);
    await seed.load();
    await seed.writeSnapshot({ coversSeq: 0, image, checksum: crc32(image) });
    await seed.close();
    // Time an open with no other database open, as a homeserver opens its one database.
    const start = performance.now();
    const alone = await open(name);
    const openMs = performance.now() - start;
    const openTimings = alone.stats().openTimings;
    await alone.close();
    seeded.push({ mb, image, events, openMs, openTimings });
  }
  for (const size of seeded) {
    const db = await open(`bench-${size.mb}`);
    await timeCommits(db, size.events, 20); // warm-up
    opened.push({ ...size, db, samples: [], next: size.events + 20 });
  }

  const roundSize = 25;
  for (let done = 0; done < options.commits; done += roundSize) {
    for (const size of opened) {
      size.samples.push(...(await timeCommits(size.db, size.next, roundSize)));
      size.next += roundSize;
    }
  }

  const results: SizeResult[] = [];
  for (const size of opened) {
    const { db, image, events } = size;
    const stats = db.stats();
    const recordBytes = stats.logBytes / stats.logEntries;
    const groupedPerSecond = await groupedThroughput(db, size.next, options.commits, 16);
    await db.snapshot();
    const snapshot = db.stats().lastSnapshot!;
    await db.close();

    // The naive store: after each commit, export the whole image and persist it.
    const naive = await openSqlJsDatabase({ sqlJs, schemas: [eventsSchema], image });
    const naiveSamples: number[] = [];
    const exportSamples: number[] = [];
    for (let k = 0; k < options.naiveCommits(size.mb); k++) {
      await yieldToEventLoop();
      const start = performance.now();
      await naive.transaction((tx) => insertEvent(tx, events + 10_000_000 + k));
      naive.freeStatements();
      const whole = naive.db.export();
      const exported = performance.now();
      await target.persistWhole(whole);
      naiveSamples.push(performance.now() - start);
      exportSamples.push(exported - start);
    }
    await naive.close();
    const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
    results.push({
      targetMB: size.mb,
      imageBytes: image.length,
      commit: summarise(size.samples),
      groupedPerSecond,
      recordBytes,
      naive: { mean: mean(naiveSamples), exportMs: mean(exportSamples), persistMs: mean(naiveSamples) - mean(exportSamples) },
      snapshotMs: { export: snapshot.exportMs, checksum: snapshot.checksumMs, store: snapshot.storeMs },
      openMs: size.openMs,
      openTimings: size.openTimings,
    });
    await target.reset(`bench-${size.mb}`);
  }
  return results;
}

/** Start-up replay speed: reopen a small database with `entries` log entries after its snapshot. */
export async function benchReplay(sqlJs: SqlJsStatic, target: BenchTarget, entries: number): Promise<{ entries: number; logBytes: number; replayMs: number; loadMs: number }> {
  const name = 'bench-replay';
  await target.reset(name);
  const first = await openDurableDatabase({ sqlJs, persistence: await target.persistence(name), schemas: [eventsSchema], snapshotPolicy: noAutomaticSnapshots });
  await first.snapshot();
  await groupedThroughput(first, 0, entries, 1);
  const logBytes = first.stats().logBytes;
  await first.close();
  const second = await openDurableDatabase({ sqlJs, persistence: await target.persistence(name), schemas: [eventsSchema], snapshotPolicy: noAutomaticSnapshots });
  const { replayMs, loadMs } = second.stats().openTimings;
  await second.close();
  await target.reset(name);
  return { entries, logBytes, replayMs, loadMs };
}
