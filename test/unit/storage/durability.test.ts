// The durable database on both persistence backends: restarts, crashes at each
// point of the write and snapshot paths, torn and damaged logs, storage
// failures, migrations, and the single-opener lock. Then the same for the Node
// host's native SQLite file, where SQLite's WAL does what the redo log does.
import initSqlJs from 'sql.js';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ComponentSchema, Database } from '../../../src/storage/database.ts';
import { openDurableDatabase, type DurableDatabase, type SnapshotPolicy } from '../../../src/storage/durable-database.ts';
import { StorageError } from '../../../src/storage/errors.ts';
import { openNativeDatabase, type NativeDatabase } from '../../../src/node/native-database.ts';
import type { Persistence, PersistenceStep } from '../../../src/storage/persistence.ts';
import { backends, fileBackend, type BackendFixture } from './backends.ts';
import { Faults } from './faults.ts';

const sqlJs = await initSqlJs();

const itemsV1: ComponentSchema = {
  component: 'items',
  migrations: [
    { version: 1, description: 'items', up: (tx) => void tx.run('CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, body BLOB)') },
  ],
};
const itemsV2: ComponentSchema = {
  component: 'items',
  migrations: [
    ...itemsV1.migrations,
    {
      version: 2,
      description: 'colour, indexed',
      up: (tx) => {
        tx.run("ALTER TABLE items ADD COLUMN colour TEXT NOT NULL DEFAULT 'red'");
        tx.run('CREATE INDEX items_by_colour ON items (colour)');
      },
    },
  ],
};

/** A foreign key checked only at COMMIT. */
const deferred: ComponentSchema = {
  component: 'deferred',
  migrations: [{
    version: 1,
    description: 'parent and child, deferred foreign key',
    up: (tx) => {
      tx.run('CREATE TABLE parent (id INTEGER PRIMARY KEY)');
      tx.run('CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)');
    },
  }],
};

/** No automatic snapshots unless a test asks for them. */
const manualSnapshots: Partial<SnapshotPolicy> = { minLogBytes: Number.MAX_SAFE_INTEGER, idleMinLogBytes: Number.MAX_SAFE_INTEGER };

interface Opened {
  db: DurableDatabase;
  persistence: Persistence;
}

/** One turn of the event loop: what was going to happen by itself has happened. */
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

function pending<T>(promise: Promise<T>): { settled: boolean } {
  const state = { settled: false };
  promise.then(
    () => (state.settled = true),
    () => (state.settled = true),
  );
  return state;
}

const insert = (db: Database, ...names: string[]): Promise<void> =>
  db.transaction((tx) => {
    for (const name of names) tx.run('INSERT INTO items (name, body) VALUES (?, ?)', [name, new Uint8Array(64).fill(name.length)]);
  });

const names = async (db: Database): Promise<string[]> => (await db.all<{ name: string }>('SELECT name FROM items ORDER BY id')).map((r) => r.name);

describe.each(backends)('durable database on $name', (kind) => {
  let fixture: BackendFixture;
  const open: Array<Opened> = [];

  beforeEach(async () => {
    fixture = await kind.create();
  });

  afterEach(async () => {
    for (const { db } of open.splice(0)) await db.close().catch(() => undefined);
    await fixture.cleanup();
  });

  async function openDb(options: { faults?: Faults; schemas?: ComponentSchema[]; policy?: Partial<SnapshotPolicy> } = {}): Promise<Opened> {
    const persistence = await fixture.open(options.faults);
    const db = await openDurableDatabase({
      sqlJs,
      persistence,
      schemas: options.schemas ?? [itemsV1],
      now: () => 1_000,
      snapshotPolicy: options.policy ?? manualSnapshots,
    });
    const opened = { db, persistence };
    open.push(opened);
    return opened;
  }

  /** The process dies: nothing more is written, and the OS releases handles and the lock. */
  async function crash(opened: Opened): Promise<void> {
    open.splice(open.indexOf(opened), 1);
    await opened.persistence.close();
  }

  async function close(opened: Opened): Promise<void> {
    open.splice(open.indexOf(opened), 1);
    await opened.db.close();
  }

  /** A database with one acknowledged write, closed cleanly, so the next open appends nothing for migrations. */
  async function prepared(): Promise<void> {
    const first = await openDb();
    await insert(first.db, 'a');
    await close(first);
  }

  it('keeps acknowledged writes across restarts, through the log and through snapshots', async () => {
    const first = await openDb();
    await insert(first.db, 'a');
    await insert(first.db, 'b');
    await close(first);

    const second = await openDb();
    expect(await names(second.db)).toEqual(['a', 'b']);
    expect(second.db.stats()).toMatchObject({ replayedAtOpen: 3, lastSeq: 3, snapshotSeq: 0 }); // migration, a, b
    await second.db.snapshot();
    expect(second.db.stats()).toMatchObject({ snapshotSeq: 3, logEntries: 0, logBytes: 0, snapshotsTaken: 1 });
    await insert(second.db, 'c');
    await close(second);

    const third = await openDb();
    expect(await names(third.db)).toEqual(['a', 'b', 'c']);
    expect(third.db.stats()).toMatchObject({ replayedAtOpen: 1, snapshotSeq: 3, lastSeq: 4 });
    await third.db.snapshot();
    await insert(third.db, 'd');
    await close(third);

    const fourth = await openDb();
    expect(await names(fourth.db)).toEqual(['a', 'b', 'c', 'd']);
    expect(fourth.db.stats()).toMatchObject({ replayedAtOpen: 1, snapshotSeq: 4 });
  });

  it('crash before the log append: the unacknowledged transaction leaves nothing', async () => {
    await prepared();
    const faults = new Faults().haltAt('append:start', 2);
    const crashed = await openDb({ faults });
    await insert(crashed.db, 'b');
    const unacknowledged = pending(insert(crashed.db, 'c1', 'c2'));
    expect(await faults.halted).toBe('append:start');
    await settle();
    expect(unacknowledged.settled).toBe(false);
    await crash(crashed);

    const reopened = await openDb();
    expect(await names(reopened.db)).toEqual(['a', 'b']);
    await insert(reopened.db, 'd');
    expect(await names(reopened.db)).toEqual(['a', 'b', 'd']);
  });

  it('crash after the append but before the acknowledgement: the transaction is there in full', async () => {
    await prepared();
    const faults = new Faults().haltAt('append:durable', 2);
    const crashed = await openDb({ faults });
    await insert(crashed.db, 'b');
    // Several transactions queued together share one record: all of them or none.
    const inFlight = pending(insert(crashed.db, 'c'));
    await settle();
    const grouped = [pending(insert(crashed.db, 'd1', 'd2')), pending(insert(crashed.db, 'e'))];
    await faults.halted;
    await settle();
    expect([inFlight, ...grouped].map((p) => p.settled)).toEqual([false, false, false]);
    await crash(crashed);

    const reopened = await openDb();
    // 'c' was durable when the process died; the group behind it never ran.
    expect(await names(reopened.db)).toEqual(['a', 'b', 'c']);
    await insert(reopened.db, 'f');
    expect(await names(reopened.db)).toEqual(['a', 'b', 'c', 'f']);
  });

  // IndexedDB has no such step: its transaction is all or nothing.
  it.skipIf(kind !== fileBackend)('crash after the write but before the flush (files): the entry comes back whole', async () => {
    await prepared();
    const faults = new Faults().haltAt('append:written');
    const crashed = await openDb({ faults });
    void insert(crashed.db, 'b1', 'b2');
    await faults.halted;
    await crash(crashed);
    const reopened = await openDb();
    // The process died, not the machine: the page cache kept the bytes, so the entry is whole.
    expect(await names(reopened.db)).toEqual(['a', 'b1', 'b2']);
    expect(reopened.db.stats().discardedAtOpen).toBe(0);
  });

  it.each<PersistenceStep>(['snapshot:partial', 'snapshot:durable', 'log:drop'])(
    'crash in a snapshot at %s: the previous snapshot and the log stay usable',
    async (step) => {
      const first = await openDb();
      for (let i = 0; i < 40; i++) await insert(first.db, `row ${i}`.padEnd(300, '.')); // a multi-chunk image
      await first.db.snapshot();
      await insert(first.db, 'after first snapshot');
      await close(first);

      const faults = new Faults().haltAt(step);
      const crashed = await openDb({ faults });
      await insert(crashed.db, 'before second snapshot');
      void crashed.db.snapshot();
      expect(await faults.halted).toBe(step);
      await crash(crashed);

      const reopened = await openDb();
      const rows = await names(reopened.db);
      expect(rows).toHaveLength(42);
      expect(rows.slice(-2)).toEqual(['after first snapshot', 'before second snapshot']);
      await insert(reopened.db, 'later');
      await reopened.db.snapshot();
      await close(reopened);

      const last = await openDb();
      expect((await names(last.db)).slice(-3)).toEqual(['after first snapshot', 'before second snapshot', 'later']);
      expect(last.db.stats()).toMatchObject({ replayedAtOpen: 0, discardedAtOpen: 0 });
    },
  );

  it.each([1, 7, 20])('a log entry torn by %i bytes is detected and dropped, never half-applied', async (bytes) => {
    const first = await openDb();
    await insert(first.db, 'a');
    await insert(first.db, 'b1', 'b2', 'b3');
    await close(first);
    await fixture.tearLastEntry(bytes);

    const second = await openDb();
    expect(await names(second.db)).toEqual(['a']);
    expect(second.db.stats().discardedAtOpen).toBe(1);
    await insert(second.db, 'c');
    await close(second);

    // The torn bytes were removed, so the new entry does not follow garbage.
    const third = await openDb();
    expect(await names(third.db)).toEqual(['a', 'c']);
    expect(third.db.stats().discardedAtOpen).toBe(0);
  });

  // IndexedDB stores whole values: there is no "after".
  it.skipIf(kind !== fileBackend)('garbage after the last entry (a file extended but never written) is dropped', async () => {
    const first = await openDb();
    await insert(first.db, 'a');
    await close(first);
    await fixture.appendGarbage!(new Uint8Array(64));
    const second = await openDb();
    expect(await names(second.db)).toEqual(['a']);
    expect(second.db.stats().discardedAtOpen).toBeGreaterThan(0); // zeros parse as several empty frames
    await insert(second.db, 'b');
    await close(second);
    const third = await openDb();
    expect(await names(third.db)).toEqual(['a', 'b']);
  });

  it('refuses to open when an entry before the tail is damaged, rather than drop acknowledged writes', async () => {
    const first = await openDb();
    await insert(first.db, 'a');
    await insert(first.db, 'b');
    await insert(first.db, 'c');
    await close(first);
    await fixture.damageEntry(1);
    await expect(openDb()).rejects.toMatchObject({ name: 'StorageError', code: 'corrupt' });
    // The failed open released its lock: a second attempt reports the same damage, not 'locked'.
    await expect(openDb()).rejects.toMatchObject({ code: 'corrupt' });
  });

  it('a failed append (quota) rejects with StorageError, rolls memory back, and later writes work', async () => {
    await prepared();
    const quota = new DOMException('The quota has been exceeded.', 'QuotaExceededError');
    const faults = new Faults().failAt('append:start', quota, 2);
    const opened = await openDb({ faults });
    await insert(opened.db, 'b');
    const error = await insert(opened.db, 'c').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StorageError);
    expect(error).toMatchObject({ code: 'quota_exceeded' });
    expect(await names(opened.db)).toEqual(['a', 'b']);
    await insert(opened.db, 'd');
    expect(await names(opened.db)).toEqual(['a', 'b', 'd']);
    await close(opened);

    const reopened = await openDb();
    expect(await names(reopened.db)).toEqual(['a', 'b', 'd']);
    expect(reopened.db.stats().discardedAtOpen).toBe(0);
  });

  it('migrates from empty, and upgrades an older-schema database in place', async () => {
    const v1 = await openDb({ schemas: [itemsV1] });
    expect(await v1.db.all('SELECT component, version FROM schema_migrations')).toEqual([{ component: 'items', version: 1 }]);
    await insert(v1.db, 'a');
    await v1.db.snapshot(); // the upgrade must work on a snapshot plus a log
    await insert(v1.db, 'b');
    await close(v1);

    const v2 = await openDb({ schemas: [itemsV2] });
    expect(await v2.db.all('SELECT name, colour FROM items ORDER BY id')).toEqual([{ name: 'a', colour: 'red' }, { name: 'b', colour: 'red' }]);
    expect(await v2.db.all('SELECT version FROM schema_migrations ORDER BY version')).toEqual([{ version: 1 }, { version: 2 }]);
    await v2.db.transaction((tx) => tx.run("INSERT INTO items (name, colour) VALUES ('c', 'blue')"));
    const upgradedAt = v2.db.stats().lastSeq;
    await close(v2);

    const again = await openDb({ schemas: [itemsV2] });
    expect(again.db.stats().lastSeq).toBe(upgradedAt); // nothing re-applied
    expect(await again.db.all("SELECT name FROM items WHERE colour = 'blue'")).toEqual([{ name: 'c' }]);
    expect(await again.db.all("SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'items_by_colour'")).toHaveLength(1);
  });

  it('mirrors at replay a transaction that failed at COMMIT (deferred constraint) after its record was stored', async () => {
    const first = await openDb({ schemas: [itemsV1, deferred] });
    await insert(first.db, 'before');
    await expect(first.db.transaction((tx) => tx.run('INSERT INTO child (parent_id) VALUES (42)'))).rejects.toThrow(/FOREIGN KEY/);
    await insert(first.db, 'after');
    expect(await first.db.all('SELECT * FROM child')).toEqual([]);
    await close(first);

    const second = await openDb({ schemas: [itemsV1, deferred] });
    expect(await names(second.db)).toEqual(['before', 'after']);
    expect(await second.db.all('SELECT * FROM child')).toEqual([]);
  });

  it('refuses a second opener while the first is open', async () => {
    const first = await openDb();
    await expect(fixture.open()).rejects.toMatchObject({ name: 'StorageError', code: 'locked' });
    await close(first);
    const second = await openDb();
    expect(await names(second.db)).toEqual([]);
  });

  it('takes snapshots by log size and when idle, and reopens from them', async () => {
    const bySize = await openDb({ policy: { minLogBytes: 4_000, logToImageRatio: 0, maxLogBytes: 4_000, idleMinLogBytes: Number.MAX_SAFE_INTEGER } });
    for (let i = 0; i < 60; i++) await insert(bySize.db, `row ${i}`);
    // Closing waits for a snapshot still under way and starts none.
    await close(bySize);
    const stats = bySize.db.stats();
    expect(stats.snapshotsTaken).toBeGreaterThanOrEqual(2);
    expect(stats.logBytes).toBeLessThan(4_000 + 400);
    // Both backends store the image as it is read copy-on-write from sql.js's file, never export()ed whole.
    expect(stats.lastSnapshot?.copyOnWrite).toBe(true);
    const observed = new Faults();
    const reopened = await openDb({ faults: observed, policy: { idleMs: 10, idleMinLogBytes: 1 } });
    expect(await names(reopened.db)).toHaveLength(60);
    expect(reopened.db.stats().replayedAtOpen).toBe(stats.logEntries);
    const idleSnapshot = observed.reached('log:drop');
    await insert(reopened.db, 'idle');
    // The snapshot's bookkeeping is done before it drops the log it covers.
    await idleSnapshot;
    expect(reopened.db.stats()).toMatchObject({ snapshotsTaken: 1, logEntries: 0 });
  });

  it.skipIf(kind !== fileBackend)('leaves no temporary snapshot files behind after a crash mid-snapshot', async () => {
    const faults = new Faults().haltAt('snapshot:partial');
    const crashed = await openDb({ faults });
    await insert(crashed.db, 'a');
    void crashed.db.snapshot();
    await faults.halted;
    await crash(crashed);
    const reopened = await openDb();
    expect(await names(reopened.db)).toEqual(['a']);
    expect((await readdir(fixture.directory!)).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });
});

// Native SQLite has no redo log or snapshots of its own (its WAL is SQLite's), so the tests of
// those steps have no counterpart; the crash points are just before and just after COMMIT.
// The kill -9 tests of test/integration/node-host.test.ts kill real processes on it.
describe('database on native SQLite (the Node host)', () => {
  let directory: string;
  const open: NativeDatabase[] = [];

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hearth-native-'));
  });

  afterEach(async () => {
    for (const db of open.splice(0)) await db.close().catch(() => undefined);
    await rm(directory, { recursive: true, force: true });
  });

  async function openDb(options: { faults?: Faults; schemas?: ComponentSchema[] } = {}): Promise<NativeDatabase> {
    const db = await openNativeDatabase({ file: join(directory, 'hearth.sqlite'), schemas: options.schemas ?? [itemsV1], now: () => 1_000, hooks: options.faults });
    open.push(db);
    return db;
  }

  /** The process dies: the file is closed without the COMMIT a hook holds up. */
  async function crash(db: NativeDatabase): Promise<void> {
    open.splice(open.indexOf(db), 1);
    await db.crash();
  }

  async function close(db: NativeDatabase): Promise<void> {
    open.splice(open.indexOf(db), 1);
    await db.close();
  }

  async function prepared(): Promise<void> {
    const first = await openDb();
    await insert(first, 'a');
    await close(first);
  }

  it('keeps acknowledged writes across restarts', async () => {
    const first = await openDb();
    await insert(first, 'a');
    await insert(first, 'b');
    await close(first);
    const second = await openDb();
    expect(await names(second)).toEqual(['a', 'b']);
    await insert(second, 'c');
    await close(second);
    expect(await names(await openDb())).toEqual(['a', 'b', 'c']);
  });

  it('crash before the commit: the unacknowledged transaction leaves nothing', async () => {
    await prepared();
    const faults = new Faults().haltAt('append:start', 2);
    const crashed = await openDb({ faults });
    await insert(crashed, 'b');
    const unacknowledged = pending(insert(crashed, 'c1', 'c2'));
    expect(await faults.halted).toBe('append:start');
    await settle();
    expect(unacknowledged.settled).toBe(false);
    // Reads wait for the open write rather than see what may still roll back.
    const read = pending(crashed.all('SELECT name FROM items'));
    await settle();
    expect(read.settled).toBe(false);
    await crash(crashed);

    const reopened = await openDb();
    expect(await names(reopened)).toEqual(['a', 'b']);
    await insert(reopened, 'd');
    expect(await names(reopened)).toEqual(['a', 'b', 'd']);
  });

  it('crash after the commit but before the acknowledgement: the transaction is there in full', async () => {
    await prepared();
    const faults = new Faults().haltAt('append:durable', 2);
    const crashed = await openDb({ faults });
    await insert(crashed, 'b');
    const inFlight = pending(insert(crashed, 'c'));
    await settle();
    const grouped = [pending(insert(crashed, 'd1', 'd2')), pending(insert(crashed, 'e'))];
    await faults.halted;
    await settle();
    expect([inFlight, ...grouped].map((p) => p.settled)).toEqual([false, false, false]);
    await crash(crashed);

    const reopened = await openDb();
    expect(await names(reopened)).toEqual(['a', 'b', 'c']);
    await insert(reopened, 'f');
    expect(await names(reopened)).toEqual(['a', 'b', 'c', 'f']);
  });

  it('a failed commit (quota) rejects with StorageError, rolls back, and later writes work', async () => {
    await prepared();
    const quota = Object.assign(new Error('no space left on device'), { code: 'ENOSPC' });
    const faults = new Faults().failAt('append:start', quota, 2);
    const opened = await openDb({ faults });
    await insert(opened, 'b');
    const error = await insert(opened, 'c').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StorageError);
    expect(error).toMatchObject({ code: 'quota_exceeded' });
    expect(await names(opened)).toEqual(['a', 'b']);
    await insert(opened, 'd');
    await close(opened);
    expect(await names(await openDb())).toEqual(['a', 'b', 'd']);
  });

  it('migrates from empty, and upgrades an older-schema database in place', async () => {
    const v1 = await openDb({ schemas: [itemsV1] });
    expect(await v1.all('SELECT component, version FROM schema_migrations')).toEqual([{ component: 'items', version: 1 }]);
    await insert(v1, 'a');
    await close(v1);
    const v2 = await openDb({ schemas: [itemsV2] });
    expect(await v2.all('SELECT name, colour FROM items ORDER BY id')).toEqual([{ name: 'a', colour: 'red' }]);
    expect(await v2.all('SELECT version FROM schema_migrations ORDER BY version')).toEqual([{ version: 1 }, { version: 2 }]);
    await close(v2);
    const again = await openDb({ schemas: [itemsV2] });
    expect(await again.all('SELECT version FROM schema_migrations ORDER BY version')).toEqual([{ version: 1 }, { version: 2 }]);
    expect(await again.all("SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'items_by_colour'")).toHaveLength(1);
  });

  it('rolls back a transaction that fails at COMMIT (deferred constraint), and carries on', async () => {
    const first = await openDb({ schemas: [itemsV1, deferred] });
    await insert(first, 'before');
    await expect(first.transaction((tx) => tx.run('INSERT INTO child (parent_id) VALUES (42)'))).rejects.toThrow(/FOREIGN KEY/);
    await insert(first, 'after');
    await close(first);
    const second = await openDb({ schemas: [itemsV1, deferred] });
    expect(await names(second)).toEqual(['before', 'after']);
    expect(await second.all('SELECT * FROM child')).toEqual([]);
  });

  it('refuses a second opener while the first is open', async () => {
    const first = await openDb();
    await expect(openDb()).rejects.toMatchObject({ name: 'StorageError', code: 'locked' });
    await close(first);
    expect(await names(await openDb())).toEqual([]);
  });
});
