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
  /** A fresh, empty persistence (the same one each call after the first: reopen). */
  persistence(): Promise<Persistence>;
  /** The naive store: persist a whole image durably. */
  persistWhole(image: Uint8Array): Promise<void>;
  /** Called between sizes. */
  reset(): Promise<void>;
}

const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

export async function benchSize(sqlJs: SqlJsStatic, target: BenchTarget, targetMB: number, options: { commits: number; naiveCommits: number; built?: { image: Uint8Array; events: number } }): Promise<SizeResult> {
  const { image, events } = options.built ?? (await buildImage(sqlJs, targetMB * 1024 * 1024));
  await target.reset();

  // Seed the store with the image as its first snapshot, as if the database had grown to this size.
  const seed = await target.persistence();
  await seed.load();
  await seed.writeSnapshot({ coversSeq: 0, image, checksum: crc32(image) });
  await seed.close();

  const openStart = performance.now();
  const db: DurableDatabase = await openDurableDatabase({ sqlJs, persistence: await target.persistence(), schemas: [eventsSchema], snapshotPolicy: { minLogBytes: Number.MAX_SAFE_INTEGER, idleMinLogBytes: Number.MAX_SAFE_INTEGER } });
  const openMs = performance.now() - openStart;
  const openTimings = db.stats().openTimings;

  await timeCommits(db, events, 20); // warm-up
  const samples = await timeCommits(db, events + 20, options.commits);
  const recordBytes = db.stats().logBytes / db.stats().logEntries;
  const groupedPerSecond = await groupedThroughput(db, events + 20 + options.commits, options.commits, 16);

  // What a snapshot of this database costs, step by step.
  await db.snapshot();
  const snapshot = db.stats().lastSnapshot!;
  await db.close();

  // The naive store: after each commit, export the whole image and persist it.
  const naive = await openSqlJsDatabase({ sqlJs, schemas: [eventsSchema], image });
  const naiveSamples: number[] = [];
  const exportSamples: number[] = [];
  for (let k = 0; k < options.naiveCommits; k++) {
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
  const naiveMean = naiveSamples.reduce((a, b) => a + b, 0) / naiveSamples.length;
  const naiveExport = exportSamples.reduce((a, b) => a + b, 0) / exportSamples.length;

  return {
    targetMB,
    imageBytes: image.length,
    commit: summarise(samples),
    groupedPerSecond,
    recordBytes,
    naive: { mean: naiveMean, exportMs: naiveExport, persistMs: naiveMean - naiveExport },
    snapshotMs: { export: snapshot.exportMs, checksum: snapshot.checksumMs, store: snapshot.storeMs },
    openMs,
    openTimings,
  };
}

/** Start-up replay speed: reopen a small database with `entries` log entries after its snapshot. */
export async function benchReplay(sqlJs: SqlJsStatic, target: BenchTarget, entries: number): Promise<{ entries: number; logBytes: number; replayMs: number; loadMs: number }> {
  await target.reset();
  const policy = { minLogBytes: Number.MAX_SAFE_INTEGER, idleMinLogBytes: Number.MAX_SAFE_INTEGER };
  const first = await openDurableDatabase({ sqlJs, persistence: await target.persistence(), schemas: [eventsSchema], snapshotPolicy: policy });
  await first.snapshot();
  await groupedThroughput(first, 0, entries, 1);
  const logBytes = first.stats().logBytes;
  await first.close();
  const second = await openDurableDatabase({ sqlJs, persistence: await target.persistence(), schemas: [eventsSchema], snapshotPolicy: policy });
  const { replayMs, loadMs } = second.stats().openTimings;
  await second.close();
  return { entries, logBytes, replayMs, loadMs };
}
