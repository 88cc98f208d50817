import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import initSqlJs from 'sql.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ComponentSchema, Database } from '../storage/database.ts';
import { openDurableDatabase } from '../storage/durable-database.ts';
import { openFilePersistence } from './file-persistence.ts';
import type { MigrationStep } from './migrate-to-native.ts';
import { openNodeDatabase } from './node-database.ts';

const schema: ComponentSchema = {
  component: 'items',
  migrations: [
    {
      version: 1,
      description: 'items and their full-text index',
      up: (tx) => {
        tx.run('CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, body BLOB)');
        tx.run('CREATE VIRTUAL TABLE items_fts USING fts4(name, tokenize=unicode61)');
      },
    },
  ],
};

let directory: string;
const opened: Database[] = [];
beforeEach(async () => {
  directory = join(await mkdtemp(join(tmpdir(), 'hearth-migrate-')), 'db');
});
afterEach(async () => {
  for (const db of opened.splice(0)) await db.close().catch(() => undefined);
  await rm(join(directory, '..'), { recursive: true, force: true });
});

const legacyFiles = async (): Promise<string[]> => (await readdir(directory)).filter((name) => /^(snapshot-|log-)/.test(name)).sort();

/** A sql.js data folder as the file backend leaves it: a snapshot of 30 rows, then 5 more in the log. */
async function legacyFolder(): Promise<void> {
  const db = await openDurableDatabase({ sqlJs: await initSqlJs(), persistence: await openFilePersistence({ directory }), schemas: [schema] });
  const insert = (i: number) => db.transaction((tx) => {
    tx.run('INSERT INTO items (name, body) VALUES (?, ?)', [`item ${i}`, new Uint8Array(100).fill(i)]);
    tx.run('INSERT INTO items_fts (docid, name) VALUES (?, ?)', [i, `café number ${i}`]);
  });
  for (let i = 1; i <= 30; i++) await insert(i);
  await db.snapshot();
  for (let i = 31; i <= 35; i++) await insert(i);
  await db.close();
}

async function openNative(hooks?: { at(step: MigrationStep): void }): Promise<Database> {
  const db = await openNodeDatabase({ directory, schemas: [schema], migrationHooks: hooks });
  opened.push(db);
  return db;
}

async function expectAllRows(db: Database): Promise<void> {
  expect(await db.get('SELECT count(*) AS n, sum(length(body)) AS bytes FROM items')).toEqual({ n: 35, bytes: 3500 });
  expect(await db.all("SELECT docid FROM items_fts WHERE items_fts MATCH 'cafe' ORDER BY docid LIMIT 2")).toEqual([{ docid: 1 }, { docid: 2 }]);
  expect(await db.get("SELECT version FROM schema_migrations WHERE component = 'items'")).toEqual({ version: 1 });
}

describe('moving a sql.js data folder to native SQLite', () => {
  it('moves every row and index at the first native open, then removes the snapshot and log', async () => {
    await legacyFolder();
    expect(await legacyFiles()).toEqual([expect.stringMatching(/^log-/), expect.stringMatching(/^snapshot-/)]); // the log after the snapshot, and the snapshot
    const db = await openNative();
    await expectAllRows(db);
    expect(await legacyFiles()).toEqual([]);
    await db.transaction((tx) => tx.run("INSERT INTO items (name) VALUES ('native')"));
    await db.close();
    const again = await openNative();
    expect(await again.get('SELECT count(*) AS n FROM items')).toEqual({ n: 36 });
  });

  it.each<MigrationStep>(['migrate:written', 'migrate:verified', 'migrate:renamed'])('interrupted at %s, starts over (or finishes) cleanly at the next open', async (step) => {
    await legacyFolder();
    const before = await legacyFiles();
    const crash = new Error(`the process died at ${step}`);
    await expect(openNative({ at: (reached) => void (reached === step && (() => { throw crash; })()) })).rejects.toThrow(crash.message);
    const names = await readdir(directory);
    if (step === 'migrate:renamed') {
      // Past the commit point: the native file is the database; the old files wait to be removed.
      expect(names).toContain('hearth.sqlite');
    } else {
      // The original stays until the new file is verified and in place.
      expect(await legacyFiles()).toEqual(before);
      expect(names).toContain('hearth.sqlite.migrating');
      expect(names).not.toContain('hearth.sqlite');
    }
    const db = await openNative();
    await expectAllRows(db);
    expect((await readdir(directory)).sort()).toEqual(['LOCK', 'hearth.sqlite', 'hearth.sqlite-wal']);
  });

  it('keeps the original when the new file does not hold what the old one held, and refuses to open: corrupt', async () => {
    await legacyFolder();
    const before = await legacyFiles();
    const tamper = (step: MigrationStep): void => {
      if (step !== 'migrate:written') return;
      const db = new BetterSqlite3(join(directory, 'hearth.sqlite.migrating'));
      db.prepare('DELETE FROM items WHERE id = 7').run();
      db.close();
    };
    await expect(openNative({ at: tamper })).rejects.toMatchObject({ name: 'StorageError', code: 'corrupt', message: expect.stringMatching(/items has 34 rows, not 35/) });
    expect(await legacyFiles()).toEqual(before);
    expect(await readdir(directory)).not.toContain('hearth.sqlite');
    await expectAllRows(await openNative());
  });

  it('leaves a folder with no sql.js data alone, and the sql.js engine refuses a migrated folder', async () => {
    const db = await openNative();
    expect(await db.get('SELECT count(*) AS n FROM items')).toEqual({ n: 0 });
    await db.close();
    await expect(openNodeDatabase({ directory, schemas: [schema], storage: 'sqljs' })).rejects.toThrow(/moved to native SQLite/);
  });
});
