import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import initSqlJs from 'sql.js';
import { describe, expect, it, vi } from 'vitest';
import { crc32 } from './crc32.ts';
import { openDurableDatabase } from './durable-database.ts';
import { openIndexedDbPersistence } from './indexeddb-persistence.ts';
import { openDatabaseOwning, openImageSource } from './memfs-image.ts';

const sqlJs = await initSqlJs();
const pageBytes = (db: InstanceType<typeof sqlJs.Database>): number =>
  db.exec('SELECT page_count * page_size FROM pragma_page_count, pragma_page_size')[0]!.values[0]![0] as number;

function filled(): InstanceType<typeof sqlJs.Database> {
  const db = new sqlJs.Database();
  db.exec('PRAGMA journal_mode = MEMORY; PRAGMA locking_mode = EXCLUSIVE; CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)');
  db.exec('BEGIN');
  for (let i = 0; i < 3000; i++) db.run('INSERT INTO t (v) VALUES (?)', [`${i} ${'x'.repeat(300)}`]);
  db.exec('COMMIT');
  return db;
}

describe('copy-on-write image of a sql.js file', () => {
  it('reads, slice by slice, the image as it was at open while writes grow, rewrite and shrink the file', () => {
    const db = filled();
    db.run('DELETE FROM t WHERE k > 2000'); // freed pages at the end of the file, which only a truncation touches
    // The reference: the file read out with no write in between (export() would not do: its backup
    // bumps header fields and rewrites free pages).
    const still = openImageSource(db, pageBytes(db))!;
    const expected = still.read(still.byteLength);
    still.release();
    expect(new sqlJs.Database(expected).exec('SELECT count(*) FROM t')[0]!.values[0]).toEqual([2000]);
    const rowsAtOpen = db.exec('SELECT count(*), sum(length(v)) FROM t')[0]!.values[0];
    const source = openImageSource(db, pageBytes(db));
    expect(source).not.toBeNull();
    const parts: Uint8Array[] = [];
    const writes = [
      () => db.exec('VACUUM'), // rewrites the file and truncates it
      () => db.run("UPDATE t SET v = 'changed' WHERE k % 7 = 0"), // rewrites pages everywhere, also ahead of the reader
      () => db.run('INSERT INTO t (v) SELECT v || v FROM t WHERE k < 500'), // grows the file (MEMFS reallocates it)
      () => db.run('DELETE FROM t WHERE k > 1000'),
      () => db.run('INSERT INTO t (v) VALUES (?)', ['after']),
    ];
    let write = 0;
    while (parts.reduce((n, p) => n + p.length, 0) < source!.byteLength) {
      parts.push(source!.read(10_000)); // not a multiple of the block size
      writes[write++ % writes.length]!();
    }
    const image = new Uint8Array(source!.byteLength);
    let at = 0;
    for (const part of parts) image.set(part, (at += part.length) - part.length);
    expect(Buffer.from(image).equals(Buffer.from(expected))).toBe(true);
    expect(source!.checksum()).toBe(crc32(expected));
    const reopened = new sqlJs.Database(image);
    expect(reopened.exec('PRAGMA integrity_check')[0]!.values[0]![0]).toBe('ok');
    expect(reopened.exec('SELECT count(*), sum(length(v)) FROM t')[0]!.values[0]).toEqual(rowsAtOpen);
    reopened.close();
    source!.release();
    // The database itself went on undisturbed.
    expect(db.exec('PRAGMA integrity_check')[0]!.values[0]![0]).toBe('ok');
    expect(db.exec('SELECT count(*) FROM t')[0]!.values[0]).not.toEqual([rowsAtOpen![0]]);
    db.close();
  });

  it('declines a file whose size is not the one asked for, and a second source on the same file', () => {
    const db = filled();
    expect(openImageSource(db, pageBytes(db) + 1)).toBeNull();
    const first = openImageSource(db, pageBytes(db));
    expect(first).not.toBeNull();
    expect(openImageSource(db, pageBytes(db))).toBeNull();
    first!.release();
    expect(openImageSource(db, pageBytes(db))).not.toBeNull();
    db.close();
  });
});

describe('a durable snapshot over IndexedDB', () => {
  it('is read copy-on-write, not exported, and holds exactly what it covers while commits go on', async () => {
    const indexedDB = new IDBFactory();
    const open = async () => openDurableDatabase({
      sqlJs, schemas: [], snapshotPolicy: { minLogBytes: Infinity, maxLogBytes: Infinity, idleMinLogBytes: Infinity },
      persistence: await openIndexedDbPersistence({ name: 'cow', indexedDB, locks: null, chunkBytes: 64 << 10, chunksPerTransaction: 1 }),
    });
    let db = await open();
    await db.transaction((tx) => tx.run('CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)'));
    for (let batch = 0; batch < 10; batch++) {
      await db.transaction((tx) => {
        for (let i = 0; i < 200; i++) tx.run('INSERT INTO t (v) VALUES (?)', [`${batch}.${i} ${'y'.repeat(200)}`]);
      });
    }
    const exported = vi.spyOn(sqlJs.Database.prototype, 'export');
    let done = false;
    let committed = 0;
    const writers = Array.from({ length: 4 }, async (_, w) => {
      for (let n = 0; !done || n < 3; n++) {
        await db.transaction((tx) => {
          tx.run("UPDATE t SET v = v || 'z' WHERE k % 13 = ?", [n % 13]);
          tx.run('INSERT INTO t (v) VALUES (?)', [`writer ${w} ${n}`]);
          tx.run('DELETE FROM t WHERE k = ?', [n * 7 + w]);
        });
        committed++;
      }
    });
    await db.snapshot();
    done = true;
    await Promise.all(writers);
    expect(exported).not.toHaveBeenCalled();
    expect(db.stats().lastSnapshot?.copyOnWrite).toBe(true);
    exported.mockRestore();
    expect(db.stats().snapshotsTaken).toBe(1);
    expect(committed).toBeGreaterThan(12);
    const before = await db.all('SELECT k, v FROM t ORDER BY k');
    const seq = db.stats();
    await db.close();
    db = await open(); // the snapshot, then the log after what it covers
    expect(db.stats().replayedAtOpen).toBe(seq.lastSeq - seq.snapshotSeq);
    expect(db.stats().replayedAtOpen).toBeGreaterThan(0);
    expect(await db.all('SELECT k, v FROM t ORDER BY k')).toEqual(before);
    expect(await db.get('SELECT * FROM pragma_integrity_check')).toEqual({ integrity_check: 'ok' });
    await db.close();
  });
});

describe('opening a database on an image without copying it', () => {
  it.each([[4096, 'NONE'], [1024, 'FULL'], [16384, 'INCREMENTAL']])('takes the image as its file (page size %i, auto_vacuum %s)', (pageSize, autoVacuum) => {
    const source = new sqlJs.Database();
    source.exec(`PRAGMA page_size = ${pageSize}; PRAGMA auto_vacuum = ${autoVacuum}; CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)`);
    for (let i = 0; i < 500; i++) source.run('INSERT INTO t (v) VALUES (?)', [`${i} ${'w'.repeat(100)}`]);
    const image = source.export();
    source.close();
    const db = openDatabaseOwning(sqlJs.Database, image);
    db.exec('PRAGMA journal_mode = MEMORY; PRAGMA locking_mode = EXCLUSIVE');
    expect(db.exec('PRAGMA integrity_check')[0]!.values[0]![0]).toBe('ok');
    expect(db.exec('SELECT count(*) FROM t, pragma_page_size')[0]!.values[0]).toEqual([500]);
    expect(db.exec('SELECT page_size FROM pragma_page_size')[0]!.values[0]![0]).toBe(pageSize);
    const before = image.slice();
    db.run("UPDATE t SET v = 'changed' WHERE k = 1");
    expect(Buffer.from(image).equals(Buffer.from(before))).toBe(false); // the file is the image: no copy was made
    expect(db.exec('SELECT v FROM t WHERE k = 1')[0]!.values[0]![0]).toBe('changed');
    db.close();
  });
});
