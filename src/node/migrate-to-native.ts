import { open, readdir, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { openDurableDatabase } from '../storage/durable-database.ts';
import { StorageError, toStorageError } from '../storage/errors.ts';
import type { FileLock } from './file-lock.ts';
import { fsyncDirectory, openFilePersistence } from './file-persistence.ts';
import { configureNative } from './native-database.ts';

/**
 * Moves a database folder of the sql.js file backend (snapshot-*.db + log-*.bin,
 * file-persistence.ts) into the native SQLite file beside them, once, at the first
 * start of a host that runs on native SQLite. Under the folder's lock throughout:
 *
 * 1. the old store is opened as before (newest snapshot, log replayed, torn tail
 *    dropped) and checked with `PRAGMA integrity_check`; its image and the row count
 *    of every table are taken;
 * 2. the image is written to `hearth.sqlite.migrating` and fsynced;
 * 3. that file is opened natively, switched to WAL, checked again (integrity_check,
 *    and every table's row count against step 1) and closed;
 * 4. it is renamed to `hearth.sqlite` (the commit point: directory fsynced);
 * 5. the old snapshot and log files are removed.
 *
 * A crash before 4 leaves the old files whole and a `.migrating` file that the next
 * start deletes before it starts over; a crash after 4 leaves old files that the next
 * start sees are superseded and removes. A failed check (3) throws 'corrupt' and keeps
 * the old files.
 */
export const NATIVE_FILE = 'hearth.sqlite';
const MIGRATING_FILE = `${NATIVE_FILE}.migrating`;
const LEGACY_FILE = /^(snapshot-\d{16}\.db|log-\d{16}\.bin)$/;

export type MigrationStep = 'migrate:written' | 'migrate:verified' | 'migrate:renamed';

export interface MigrationHooks {
  /** Tests: throw, or never settle, to interrupt the migration at that step. */
  at(step: MigrationStep): void | Promise<void>;
}

export interface MigrationResult {
  /** Tables and rows moved (0 when there was nothing to move). */
  tables: number;
  rows: number;
}

type Counts = Map<string, number>;

/** Row counts of every ordinary table (FTS shadow tables included: they are ordinary tables). */
const TABLES_SQL = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name";
const quote = (name: string): string => `"${name.replaceAll('"', '""')}"`;

async function removeIfPresent(path: string): Promise<void> {
  await unlink(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
  });
}

/** Whether the folder holds data of the sql.js file backend. */
export async function hasLegacyFiles(directory: string): Promise<boolean> {
  return (await readdir(directory)).some((name) => LEGACY_FILE.test(name));
}

/** Reads the old store into an image, with its row counts. Leaves the old files as they were (but for a torn log tail, dropped as any open drops it). */
async function readLegacy(directory: string, lock: FileLock): Promise<{ image: Uint8Array; counts: Counts }> {
  const { default: initSqlJs } = await import('sql.js');
  const persistence = await openFilePersistence({ directory, lock });
  const database = await openDurableDatabase({ sqlJs: await initSqlJs(), persistence, schemas: [], integrityCheck: 'full' });
  try {
    const counts: Counts = new Map();
    for (const { name } of await database.all<{ name: string }>(TABLES_SQL)) {
      counts.set(name, (await database.get<{ n: number }>(`SELECT count(*) AS n FROM ${quote(name)}`))!.n);
    }
    return { image: await database.exportImage(), counts };
  } finally {
    await database.close();
  }
}

async function writeDurably(path: string, bytes: Uint8Array): Promise<void> {
  const handle = await open(path, 'wx');
  try {
    for (let done = 0; done < bytes.length; ) done += (await handle.write(bytes, done, bytes.length - done, done)).bytesWritten;
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function syncFile(path: string): Promise<void> {
  const handle = await open(path, 'r+');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Opens the new file natively, makes it a WAL database, and checks it holds what the old store held. */
function verify(path: string, expected: Counts): void {
  const db = new BetterSqlite3(path, { timeout: 0 });
  try {
    configureNative(db, false);
    const problems = (db.pragma('integrity_check') as Array<Record<string, unknown>>).map((row) => Object.values(row)[0]).filter((value) => value !== 'ok');
    if (problems.length > 0) throw new StorageError('corrupt', `the migrated database failed its integrity check: ${problems.slice(0, 5).join('; ')}`);
    const tables = (db.prepare(TABLES_SQL).all() as Array<{ name: string }>).map((row) => row.name);
    if (tables.join('\n') !== [...expected.keys()].join('\n')) throw new StorageError('corrupt', `the migrated database has tables ${tables.join(', ')}, not ${[...expected.keys()].join(', ')}`);
    for (const [name, rows] of expected) {
      const found = (db.prepare(`SELECT count(*) AS n FROM ${quote(name)}`).get() as { n: number }).n;
      if (found !== rows) throw new StorageError('corrupt', `the migrated table ${name} has ${found} rows, not ${rows}`);
    }
  } finally {
    db.close(); // the last connection: SQLite checkpoints the WAL into the file and removes it
  }
}

/**
 * Migrates the folder if it holds the sql.js file backend's data and no native file yet;
 * finishes the clean-up of a migration that stopped after its commit point. The caller
 * holds the folder's lock.
 */
export async function migrateToNative(options: { directory: string; lock: FileLock; hooks?: MigrationHooks; log?: (message: string) => void }): Promise<MigrationResult> {
  const { directory } = options;
  const target = join(directory, NATIVE_FILE);
  const migrating = join(directory, MIGRATING_FILE);
  const names = await readdir(directory);
  const legacy = names.filter((name) => LEGACY_FILE.test(name));
  const removeLegacy = async (): Promise<void> => {
    for (const name of legacy) await unlink(join(directory, name));
    await fsyncDirectory(directory);
  };
  try {
    if (names.includes(NATIVE_FILE)) {
      if (legacy.length > 0) await removeLegacy(); // superseded: a migration stopped after its rename
      return { tables: 0, rows: 0 };
    }
    if (legacy.length === 0) return { tables: 0, rows: 0 };
    // An interrupted attempt starts over.
    for (const suffix of ['', '-wal', '-shm', '-journal']) await removeIfPresent(migrating + suffix);
    const { image, counts } = await readLegacy(directory, options.lock);
    await writeDurably(migrating, image);
    await options.hooks?.at('migrate:written');
    verify(migrating, counts);
    const left = (await readdir(directory)).filter((name) => name.startsWith(`${MIGRATING_FILE}-`));
    if (left.length > 0) throw new StorageError('io_error', `SQLite left ${left.join(', ')} behind after checking the migrated database`);
    await syncFile(migrating);
    await options.hooks?.at('migrate:verified');
    await rename(migrating, target);
    await fsyncDirectory(directory);
    await options.hooks?.at('migrate:renamed');
    await removeLegacy();
    const rows = [...counts.values()].reduce((sum, n) => sum + n, 0);
    options.log?.(`hearth: moved the database in ${directory} to native SQLite (${NATIVE_FILE}): ${counts.size} tables, ${rows} rows`);
    return { tables: counts.size, rows };
  } catch (error) {
    throw error instanceof StorageError ? error : toStorageError(error, `migrating ${directory} to native SQLite`);
  }
}
