import initSqlJs from 'sql.js';
import { describe, expect, it } from 'vitest';
import type { ComponentSchema, WriteTransaction } from './database.ts';
import { StorageError } from './errors.ts';
import { decodeRedoPayload } from './redo-log.ts';
import { openSqlJsDatabase, type CommitSink, type SqlJsDriver } from './sqljs-database.ts';

const schema: ComponentSchema = {
  component: 'test',
  migrations: [
    { version: 1, description: 'items', up: (tx) => void tx.run('CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)') },
  ],
};

describe('sql.js driver', () => {
  it('commits, reads back and rolls back a transaction that throws', async () => {
    const db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [schema] });
    const id = await db.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['a']).lastInsertRowid);
    expect(await db.get('SELECT name FROM items WHERE id = ?', [id])).toEqual({ name: 'a' });
    await expect(
      db.transaction((tx) => {
        tx.run('INSERT INTO items (name) VALUES (?)', ['b']);
        tx.run('INSERT INTO items (name) VALUES (?)', ['a']); // UNIQUE violation
      }),
    ).rejects.toThrow(/UNIQUE/);
    expect(await db.all('SELECT name FROM items ORDER BY name')).toEqual([{ name: 'a' }]);
    await db.close();
  });

  it('records migrations and applies only new ones', async () => {
    const sqlJs = await initSqlJs();
    const first = await openSqlJsDatabase({ sqlJs, schemas: [schema] });
    await first.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['kept']));
    const image = first.db.export();
    await first.close();
    const upgraded: ComponentSchema = {
      component: 'test',
      migrations: [
        ...schema.migrations,
        { version: 2, description: 'colour', up: (tx) => void tx.run("ALTER TABLE items ADD COLUMN colour TEXT NOT NULL DEFAULT 'red'") },
      ],
    };
    const second = await openSqlJsDatabase({ sqlJs, schemas: [upgraded], image });
    expect(await second.all('SELECT name, colour FROM items')).toEqual([{ name: 'kept', colour: 'red' }]);
    expect(await second.all('SELECT version FROM schema_migrations ORDER BY version')).toEqual([{ version: 1 }, { version: 2 }]);
    await second.close();
  });
});

/** A commit sink whose appends the test completes or fails by hand. */
class ManualSink implements CommitSink {
  readonly pending: Array<{ payload: Uint8Array; resolve: () => void; reject: (error: unknown) => void }> = [];
  persist(payload: Uint8Array): Promise<void> {
    return new Promise((resolve, reject) => this.pending.push({ payload, resolve, reject }));
  }
}

const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

async function recordingDriver(): Promise<{ driver: SqlJsDriver; sink: ManualSink }> {
  const driver = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [schema] });
  const sink = new ManualSink();
  driver.setCommitSink(sink);
  return { driver, sink };
}

function state<T>(promise: Promise<T>): { done: boolean; value?: T; error?: unknown } {
  const s: { done: boolean; value?: T; error?: unknown } = { done: false };
  promise.then((value) => Object.assign(s, { done: true, value }), (error: unknown) => Object.assign(s, { done: true, error }));
  return s;
}

describe('sql.js driver write pipeline', () => {
  it('resolves a transaction only after its record is persisted, and keeps it open meanwhile', async () => {
    const { driver, sink } = await recordingDriver();
    const write = state(driver.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['a']).lastInsertRowid));
    await settle();
    expect(sink.pending).toHaveLength(1);
    expect(write.done).toBe(false);
    expect(decodeRedoPayload(sink.pending[0]!.payload)).toEqual([{ sql: 'INSERT INTO items (name) VALUES (?)', params: ['a'], failed: false }]);
    sink.pending.shift()!.resolve();
    await settle();
    expect(write).toEqual({ done: true, value: 1 });
  });

  it('lets a read wait for the in-flight commit but not for writes queued behind it', async () => {
    const { driver, sink } = await recordingDriver();
    const first = state(driver.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['first'])));
    await settle();
    const second = state(driver.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['second'])));
    const read = state(driver.all('SELECT name FROM items'));
    await settle();
    expect(read.done).toBe(false); // must not see 'first' before it is durable
    sink.pending.shift()!.resolve();
    await settle();
    // 'second' is now in flight; the read ran in between and saw only what was committed.
    expect(first.done).toBe(true);
    expect(second.done).toBe(false);
    expect(sink.pending).toHaveLength(1);
    expect(read).toEqual({ done: true, value: [{ name: 'first' }] });
    sink.pending.shift()!.resolve();
    await settle();
    expect(second.done).toBe(true);
  });

  it('rolls back when persisting fails, so memory matches what is stored, and carries on', async () => {
    const { driver, sink } = await recordingDriver();
    const failed = state(driver.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['lost'])));
    await settle();
    sink.pending.shift()!.reject(Object.assign(new Error('disk full'), { code: 'ENOSPC' }));
    await settle();
    expect(failed.error).toBeInstanceOf(StorageError);
    expect((failed.error as StorageError).code).toBe('quota_exceeded');
    expect(await driver.all('SELECT name FROM items')).toEqual([]);
    const ok = state(driver.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['kept'])));
    await settle();
    sink.pending.shift()!.resolve();
    await settle();
    expect(ok.done).toBe(true);
    expect(await driver.all('SELECT name FROM items')).toEqual([{ name: 'kept' }]);
  });

  it('commits writes queued behind an in-flight one as a group: one record, each rolled back on its own', async () => {
    const { driver, sink } = await recordingDriver();
    const head = state(driver.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['head'])));
    await settle();
    const a = state(driver.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['a'])));
    const bad = state(driver.transaction((tx) => {
      tx.run('INSERT INTO items (name) VALUES (?)', ['b']);
      tx.run('INSERT INTO items (name) VALUES (?)', ['a']); // UNIQUE violation: this transaction alone rolls back
    }));
    const c = state(driver.transaction((tx) => {
      try {
        tx.run('INSERT INTO items (name) VALUES (?)', ['head']); // fails, caught: logged as failed for replay
      } catch {
        tx.run('INSERT INTO items (name) VALUES (?)', ['c']);
      }
    }));
    sink.pending.shift()!.resolve();
    await settle();
    expect(head.done).toBe(true);
    expect(sink.pending).toHaveLength(1); // a, bad and c share one record
    expect(decodeRedoPayload(sink.pending[0]!.payload)).toEqual([
      { sql: 'INSERT INTO items (name) VALUES (?)', params: ['a'], failed: false },
      { sql: 'INSERT INTO items (name) VALUES (?)', params: ['head'], failed: true },
      { sql: 'INSERT INTO items (name) VALUES (?)', params: ['c'], failed: false },
    ]);
    expect(bad.error).toBeDefined();
    sink.pending.shift()!.resolve();
    await settle();
    expect([a.done, a.error, c.done, c.error]).toEqual([true, undefined, true, undefined]);
    expect(await driver.all('SELECT name FROM items ORDER BY name')).toEqual([{ name: 'a' }, { name: 'c' }, { name: 'head' }]);
  });

  it('fails every transaction of a group whose record cannot be persisted', async () => {
    const { driver, sink } = await recordingDriver();
    void driver.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['head']));
    await settle();
    const x = state(driver.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['x'])));
    const y = state(driver.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['y'])));
    sink.pending.shift()!.resolve();
    await settle();
    sink.pending.shift()!.reject(new DOMException('quota', 'QuotaExceededError'));
    await settle();
    expect((x.error as StorageError).code).toBe('quota_exceeded');
    expect((y.error as StorageError).code).toBe('quota_exceeded');
    expect(await driver.all('SELECT name FROM items')).toEqual([{ name: 'head' }]);
  });

  it('logs writes made through get/all (RETURNING) but not plain reads', async () => {
    const { driver, sink } = await recordingDriver();
    void driver.transaction((tx) => {
      tx.all('SELECT * FROM items');
      tx.get('INSERT INTO items (name) VALUES (?) RETURNING id', ['r']);
    });
    await settle();
    expect(decodeRedoPayload(sink.pending[0]!.payload).map((s) => s.sql)).toEqual(['INSERT INTO items (name) VALUES (?) RETURNING id']);
  });

  it('refuses async transaction functions, transaction control and leaked handles', async () => {
    const driver = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [schema] });
    await expect(driver.transaction(async (tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['x']))).rejects.toThrow(/synchronous/);
    await expect(driver.transaction((tx) => tx.run('COMMIT'))).rejects.toThrow(/transaction control/);
    let leaked: WriteTransaction | undefined;
    await driver.transaction((tx) => void (leaked = tx));
    expect(() => leaked!.run('INSERT INTO items (name) VALUES (?)', ['late'])).toThrow(/finished/);
    expect(await driver.all('SELECT name FROM items')).toEqual([]);
  });

  it('replays a record to the same state, including a caught failure', async () => {
    const { driver, sink } = await recordingDriver();
    void driver.transaction((tx) => {
      tx.run('INSERT INTO items (name) VALUES (?)', ['one']);
      try {
        tx.run('INSERT INTO items (name) VALUES (?)', ['one']);
      } catch {
        tx.run('INSERT INTO items (name) VALUES ($n)', { $n: 'two' });
      }
    });
    await settle();
    const { payload } = sink.pending[0]!;
    const replica = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [schema] });
    replica.replay([{ payload, seq: 1 }]);
    expect(await replica.all('SELECT id, name FROM items ORDER BY id')).toEqual([{ id: 1, name: 'one' }, { id: 2, name: 'two' }]);
    // A record that does not replay as it first ran is reported, not half-applied.
    const diverged = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [schema] });
    await diverged.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['two']));
    expect(() => diverged.replay([{ payload, seq: 1 }])).toThrow(/diverged/);
    expect(await diverged.all('SELECT name FROM items')).toEqual([{ name: 'two' }]);
  });
});
