import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ComponentSchema, WriteTransaction } from '../storage/database.ts';
import { StorageError } from '../storage/errors.ts';
import { searchSchema } from '../search/schema.ts';
import { openNativeDatabase, type NativeDatabase } from './native-database.ts';

const schema: ComponentSchema = {
  component: 'test',
  migrations: [
    { version: 1, description: 'items', up: (tx) => void tx.run('CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, body BLOB)') },
  ],
};

let directory: string;
const opened: NativeDatabase[] = [];
beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), 'hearth-native-'));
});
afterEach(async () => {
  for (const db of opened.splice(0)) await db.close().catch(() => undefined);
  await rm(directory, { recursive: true, force: true });
});

async function open(schemas: ComponentSchema[] = [schema]): Promise<NativeDatabase> {
  const db = await openNativeDatabase({ file: join(directory, 'hearth.sqlite'), schemas, now: () => 1_000 });
  opened.push(db);
  return db;
}

describe('native SQLite driver', () => {
  it('is a WAL database that fsyncs every commit, in exclusive locking mode', async () => {
    const db = await open();
    expect(db.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.db.pragma('synchronous', { simple: true })).toBe(2); // FULL
    expect(db.db.pragma('locking_mode', { simple: true })).toBe('exclusive');
    expect(db.db.pragma('foreign_keys', { simple: true })).toBe(1);
  });

  it('commits, reads back and rolls back a transaction that throws, as the sql.js driver does', async () => {
    const db = await open();
    const id = await db.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['a']).lastInsertRowid);
    expect(await db.get('SELECT name FROM items WHERE id = ?', [id])).toEqual({ name: 'a' });
    await expect(
      db.transaction((tx) => {
        tx.run('INSERT INTO items (name) VALUES (?)', ['b']);
        tx.run('INSERT INTO items (name) VALUES (?)', ['a']); // UNIQUE violation
      }),
    ).rejects.toThrow(/UNIQUE constraint failed/);
    expect(await db.all('SELECT name FROM items ORDER BY name')).toEqual([{ name: 'a' }]);
  });

  it('binds as sql.js does: named parameters with their prefix, booleans, blobs back as plain Uint8Arrays', async () => {
    const db = await open();
    await db.transaction((tx) => tx.run('INSERT INTO items (name, body) VALUES ($n, $b)', { $n: 'named', $b: new Uint8Array([1, 2, 3]) }));
    const row = await db.get<{ body: Uint8Array; yes: number }>('SELECT body, ? AS yes FROM items', [true as unknown as number]);
    expect(row!.body.constructor).toBe(Uint8Array);
    expect([...row!.body]).toEqual([1, 2, 3]);
    expect(row!.yes).toBe(1);
    await expect(db.get('SELECT ?', [undefined as unknown as null])).rejects.toThrow(/undefined/);
  });

  it('runs writes through get and all (RETURNING), reads through run, and statements without rows through get', async () => {
    const db = await open();
    const returned = await db.transaction((tx) => tx.get<{ id: number }>('INSERT INTO items (name) VALUES (?) RETURNING id', ['r']));
    expect(returned).toEqual({ id: 1 });
    const ran = await db.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?) RETURNING id', ['s']));
    expect(ran).toMatchObject({ changes: 1, lastInsertRowid: 2 });
    expect(await db.transaction((tx) => tx.get('UPDATE items SET name = name'))).toBeUndefined();
    expect(await db.transaction((tx) => tx.all('DELETE FROM items WHERE id = 2'))).toEqual([]);
    expect(await db.all('SELECT name FROM items')).toEqual([{ name: 'r' }]);
  });

  it('commits writes queued together as one group, each rolled back on its own', async () => {
    const db = await open();
    const a = db.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['a']));
    const bad = db.transaction((tx) => {
      tx.run('INSERT INTO items (name) VALUES (?)', ['b']);
      tx.run('INSERT INTO items (name) VALUES (?)', ['a']);
    });
    const c = db.transaction((tx) => {
      try {
        tx.run('INSERT INTO items (name) VALUES (?)', ['a']);
      } catch {
        tx.run('INSERT INTO items (name) VALUES (?)', ['c']);
      }
    });
    await expect(bad).rejects.toThrow(/UNIQUE/);
    await a;
    await c;
    expect(await db.all('SELECT name FROM items ORDER BY name')).toEqual([{ name: 'a' }, { name: 'c' }]);
  });

  it('refuses async transaction functions, transaction control and leaked handles', async () => {
    const db = await open();
    await expect(db.transaction(async (tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['x']))).rejects.toThrow(/synchronous/);
    await expect(db.transaction((tx) => tx.run('COMMIT'))).rejects.toThrow(/transaction control/);
    let leaked: WriteTransaction | undefined;
    await db.transaction((tx) => void (leaked = tx));
    expect(() => leaked!.run('INSERT INTO items (name) VALUES (?)', ['late'])).toThrow(/finished/);
    expect(await db.all('SELECT name FROM items')).toEqual([]);
  });

  it('a full disk (SQLITE_FULL) rejects with quota_exceeded, keeps nothing of the write, and later writes work', async () => {
    const db = await open();
    await db.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['small']));
    const pages = db.db.pragma('page_count', { simple: true }) as number;
    db.db.pragma(`max_page_count = ${pages + 2}`);
    const error = await db.transaction((tx) => tx.run('INSERT INTO items (name, body) VALUES (?, ?)', ['big', new Uint8Array(64 << 10)])).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StorageError);
    expect(error).toMatchObject({ code: 'quota_exceeded', status: 507, errcode: 'M_RESOURCE_LIMIT_EXCEEDED' });
    expect(await db.all('SELECT name FROM items')).toEqual([{ name: 'small' }]);
    await db.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['after']));
    expect(await db.all('SELECT name FROM items ORDER BY id')).toEqual([{ name: 'small' }, { name: 'after' }]);
  });

  it('refuses a second opener: StorageError locked', async () => {
    await open();
    await expect(open()).rejects.toMatchObject({ name: 'StorageError', code: 'locked' });
  });

  it('refuses to open a file that is not a database: corrupt', async () => {
    const { writeFile } = await import('node:fs/promises');
    await writeFile(join(directory, 'hearth.sqlite'), new Uint8Array(8192).fill(7));
    await expect(open()).rejects.toMatchObject({ name: 'StorageError', code: 'corrupt' });
    // The failed open released its lock.
    await expect(open()).rejects.toMatchObject({ code: 'corrupt' });
  });

  it("serves the search component's FTS4 index (unicode61, matchinfo) as sql.js does", async () => {
    const events: ComponentSchema = {
      component: 'rooms',
      migrations: [{ version: 1, description: 'events', up: (tx) => void tx.run('CREATE TABLE events (event_nid INTEGER PRIMARY KEY, event_id TEXT, room_id TEXT, sender TEXT, type TEXT, json TEXT, stream_ordering INTEGER, rejected TEXT, outlier INTEGER, soft_failed INTEGER, redacted_by TEXT)') }],
    };
    const db = await open([events, searchSchema]);
    await db.transaction((tx) => tx.run('INSERT INTO search_fts (docid, body, name, topic) VALUES (?, ?, ?, ?)', [1, 'Crème brûlée at Noël', null, null]));
    const rows = await db.all<{ docid: number; mi: Uint8Array }>("SELECT docid, matchinfo(search_fts, 'pcnalx') AS mi FROM search_fts WHERE search_fts MATCH ?", ['creme OR noel']);
    expect(rows.map((r) => r.docid)).toEqual([1]);
    expect(rows[0]!.mi).toBeInstanceOf(Uint8Array);
    expect(new Uint32Array(rows[0]!.mi.slice().buffer)[0]).toBe(2); // p: two phrases
  });
});
