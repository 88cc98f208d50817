import { dirname, join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import type { ComponentSchema, Database, Row, RunResult, SqlParams, SqlValue, WriteTransaction } from '../storage/database.ts';
import { groupLost, MAX_GROUP, ReadGate, refuseTransactionControl, runEachInSavepoint, scopedTransaction, type QueuedWrite } from '../storage/driver-common.ts';
import { StorageError, toStorageError, type StorageErrorCode } from '../storage/errors.ts';
import { applyMigrations } from '../storage/migrations.ts';
import { runHook, type PersistenceHooks } from '../storage/persistence.ts';
import { assertLoggable } from '../storage/redo-log.ts';
import { fsyncDirectory } from './file-persistence.ts';
import { acquireFileLock, type FileLock } from './file-lock.ts';

/**
 * The storage interface on a real SQLite file (better-sqlite3), for the Node host.
 * SQLite makes each commit durable itself: WAL with synchronous = FULL fsyncs the
 * WAL at every COMMIT, so there is no redo log or snapshot of our own, and the
 * database is not held in memory (only SQLite's page cache is).
 *
 * The semantics are the sql.js driver's (src/storage/sqljs-database.ts), so the
 * product runs on either unchanged: one writer; writes run one group at a time
 * in call order, a group (the writes queued behind the one in flight) sharing one
 * BEGIN … COMMIT, one fsync, with a savepoint per transaction so each rolls back
 * alone; a transaction function is synchronous, and transaction control is the
 * driver's; reads run at once, except while a write is open (only when test hooks
 * hold a commit open), when they wait for that commit only. A transaction's
 * promise resolves once its COMMIT has returned, i.e. once it is durable.
 *
 * Storage failures become StorageErrors: SQLITE_FULL → quota_exceeded,
 * SQLITE_BUSY/LOCKED → locked, SQLITE_CORRUPT/NOTADB → corrupt, I/O and the
 * rest of the file's failures → io_error. SQL errors (constraints, syntax) are
 * thrown as SQLite gives them, as sql.js does.
 */
export interface OpenNativeOptions {
  /** The SQLite file; created if absent. Its WAL lives beside it while open. */
  file: string;
  schemas: ComponentSchema[];
  /** Time source for the migrations table (default Date.now). */
  now?: () => number;
  /** Start-up check: 'quick' (default) PRAGMA quick_check, 'full' PRAGMA integrity_check. */
  integrityCheck?: 'quick' | 'full' | 'none';
  /** The lock against a second process, already taken; default: take `LOCK` beside the file (file-lock.ts). */
  lock?: FileLock;
  /**
   * Tests: where a commit may be failed or halted, as in the file backend. 'append:start'
   * is just before COMMIT (nothing durable yet), 'append:durable' just after it (durable,
   * not yet acknowledged). With hooks, the write stays open while they run. From the end of
   * open: the migrations' commit does not reach them.
   */
  hooks?: PersistenceHooks;
}

type Statement = BetterSqlite3.Statement<unknown[], Row>;

const CODE_BY_PREFIX: Array<[string, StorageErrorCode]> = [
  ['SQLITE_FULL', 'quota_exceeded'],
  ['SQLITE_BUSY', 'locked'],
  ['SQLITE_LOCKED', 'locked'],
  ['SQLITE_CORRUPT', 'corrupt'],
  ['SQLITE_NOTADB', 'corrupt'],
  ['SQLITE_IOERR', 'io_error'],
  ['SQLITE_CANTOPEN', 'io_error'],
  ['SQLITE_READONLY', 'io_error'],
  ['SQLITE_PROTOCOL', 'io_error'],
];

/** A StorageError for SQLite's storage failures; any other error (a constraint, a syntax error) as it is. */
export function fromSqliteError(error: unknown, doing: string): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return error;
  const mapped = CODE_BY_PREFIX.find(([prefix]) => code === prefix || code.startsWith(`${prefix}_`))?.[1];
  if (!mapped) return error;
  const message = (error as Error).message;
  return new StorageError(mapped, `SQLite ${mapped === 'quota_exceeded' ? 'found the disk full' : 'failed'} while ${doing}: ${message} (${code})`, { cause: error });
}

/** sql.js takes named parameters with their prefix (`{ $n: 1 }`), better-sqlite3 without; booleans bind as 1/0 in both. */
function bindable(params: SqlParams | undefined): unknown[] {
  if (params === undefined) return [];
  const value = (v: unknown): unknown => (typeof v === 'boolean' ? Number(v) : v);
  if (Array.isArray(params)) return params.map(value);
  const named: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(params)) named[key.replace(/^[:$@]/, '')] = value(v);
  return [named];
}

/** Blobs come back as plain Uint8Arrays, as from sql.js (a Buffer's slice() is a view, not a copy). */
function plainRow<T extends Row>(row: Row | undefined): T | undefined {
  if (!row) return undefined;
  for (const key in row) {
    const value = row[key];
    if (value instanceof Uint8Array && value.constructor !== Uint8Array) row[key] = new Uint8Array(value.buffer, value.byteOffset, value.byteLength) as SqlValue;
  }
  return row as T;
}

export class NativeDatabase implements Database {
  private readonly statements = new Map<string, Statement>();
  private readonly queue: QueuedWrite[] = [];
  private idleWaiters: Array<() => void> = [];
  private pumping = false;
  private readonly reads = new ReadGate();
  private closing = false;
  private closed = false;
  private closePromise: Promise<void> | null = null;

  constructor(
    readonly db: BetterSqlite3.Database,
    private readonly lock: FileLock,
  ) {}

  /** Test hooks around each COMMIT (see OpenNativeOptions.hooks). */
  hooks: PersistenceHooks | undefined;

  private prepare(sql: string): Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      refuseTransactionControl(sql);
      statement = this.db.prepare<unknown[], Row>(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  private control(sql: string): void {
    this.db.exec(sql);
  }

  private guard<T>(doing: string, fn: () => T): T {
    try {
      return fn();
    } catch (error) {
      throw fromSqliteError(error, doing);
    }
  }

  runSync(sql: string, params?: SqlParams): RunResult {
    assertLoggable(params);
    return this.guard('running a statement', () => {
      const statement = this.prepare(sql);
      if (!statement.reader) {
        const { changes, lastInsertRowid } = statement.run(...bindable(params));
        return { changes, lastInsertRowid: Number(lastInsertRowid) };
      }
      // INSERT … RETURNING, or a read run for its effect: run to the end, as sql.js would.
      statement.all(...bindable(params));
      const { changes, rowid } = this.prepare('SELECT changes() AS changes, last_insert_rowid() AS rowid').get() as { changes: number; rowid: number };
      return { changes, lastInsertRowid: rowid };
    });
  }

  getSync<T extends Row>(sql: string, params?: SqlParams): T | undefined {
    assertLoggable(params);
    return this.guard('reading', () => {
      const statement = this.prepare(sql);
      if (!statement.reader) return void statement.run(...bindable(params));
      return plainRow<T>(statement.get(...bindable(params)));
    });
  }

  allSync<T extends Row>(sql: string, params?: SqlParams): T[] {
    assertLoggable(params);
    return this.guard('reading', () => {
      const statement = this.prepare(sql);
      if (!statement.reader) return statement.run(...bindable(params)), [];
      return statement.all(...bindable(params)).map((row) => plainRow<T>(row)!);
    });
  }

  get<T extends Row = Row>(sql: string, params?: SqlParams): Promise<T | undefined> {
    return this.read(() => this.getSync<T>(sql, params));
  }

  all<T extends Row = Row>(sql: string, params?: SqlParams): Promise<T[]> {
    return this.read(() => this.allSync<T>(sql, params));
  }

  private read<T>(fn: () => T): Promise<T> {
    return this.reads.read(this.closed, fn);
  }

  transaction<T>(fn: (tx: WriteTransaction) => T): Promise<T> {
    if (this.closed || this.closing) return Promise.reject(new StorageError('closed', 'the database is closed'));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, resolve: resolve as (value: unknown) => void, reject });
      if (this.pumping) return;
      this.pumping = true;
      // A microtask later, so the caller's code after transaction() runs first, as with sql.js.
      void Promise.resolve().then(() => this.pump());
    });
  }

  private async pump(): Promise<void> {
    try {
      while (this.queue.length > 0) await this.commitGroup(this.queue.splice(0, MAX_GROUP));
    } finally {
      this.pumping = false;
      for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  private async commitGroup(group: QueuedWrite[]): Promise<void> {
    try {
      // IMMEDIATE: the write lock now, not at the first write, so a busy file fails here and not mid-way.
      this.control('BEGIN IMMEDIATE');
    } catch (error) {
      for (const item of group) item.reject(fromSqliteError(error, 'starting a write'));
      return;
    }
    this.reads.writeOpen = true;
    const { succeeded, transactionLost } = runEachInSavepoint(group, (sql) => this.control(sql), () =>
      scopedTransaction({ run: (sql, params) => this.runSync(sql, params), get: (sql, params) => this.getSync(sql, params), all: (sql, params) => this.allSync(sql, params) }),
    );

    let groupError: unknown;
    if (transactionLost !== undefined) {
      groupError = groupLost(transactionLost);
    } else {
      try {
        if (this.hooks) await runHook(this.hooks, 'append:start');
      } catch (error) {
        groupError = toStorageError(error, 'committing');
      }
      if (groupError === undefined) {
        try {
          this.control('COMMIT');
        } catch (error) {
          // A deferred constraint (thrown as it is), a full disk or an I/O error: nothing of the group is stored.
          groupError = fromSqliteError(error, 'committing');
        }
      }
    }
    if (groupError !== undefined) this.rollbackQuietly();
    else if (this.hooks) await runHook(this.hooks, 'append:durable');
    this.reads.writeClosed();
    for (const { item, value } of succeeded) {
      if (groupError !== undefined) item.reject(groupError);
      else item.resolve(value);
    }
  }

  private rollbackQuietly(): void {
    if (!this.db.inTransaction) return;
    try {
      this.control('ROLLBACK');
    } catch {
      // no transaction left to roll back
    }
  }

  /**
   * A copy of the database in `file`, consistent at one commit, while writes go on: SQLite's
   * online backup through this connection (the only one: the file is opened EXCLUSIVE), whose
   * copy takes in any write this connection makes while it runs. The WAL's content is in it.
   */
  async backupTo(file: string): Promise<void> {
    if (this.closed || this.closing) throw new StorageError('closed', 'the database is closed');
    try {
      await this.db.backup(file);
    } catch (error) {
      throw fromSqliteError(error, `copying the database to ${file}`);
    }
  }

  private whenIdle(): Promise<void> {
    if (!this.pumping && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Lets queued writes finish, then closes the file (SQLite checkpoints the WAL into it) and releases the lock. */
  close(): Promise<void> {
    this.closePromise ??= (async () => {
      this.closing = true;
      await this.whenIdle();
      this.closed = true;
      this.statements.clear();
      try {
        this.db.close();
      } finally {
        await this.lock.release();
      }
    })();
    return this.closePromise;
  }

  /**
   * The process dies here (tests): the file is closed as the OS would close it, without the
   * COMMIT of a write held open by a hook (SQLite rolls it back) and without a checkpoint.
   */
  async crash(): Promise<void> {
    this.closed = true;
    this.statements.clear();
    this.db.close();
    await this.lock.release();
  }
}

function checkIntegrity(db: NativeDatabase, mode: 'quick' | 'full'): void {
  const rows = db.allSync<Row>(`PRAGMA ${mode === 'full' ? 'integrity' : 'quick'}_check`);
  const problems = rows.map((row) => Object.values(row)[0]).filter((value) => value !== 'ok');
  if (problems.length > 0) throw new StorageError('corrupt', `the database failed its integrity check: ${problems.slice(0, 5).join('; ')}`);
  // The check read every page: give back the page cache it filled (up to 16 MiB), which use refills as needed.
  db.allSync('PRAGMA shrink_memory');
}

/**
 * Sets a connection up as every native open does: WAL, every commit fsynced
 * (better-sqlite3's build defaults WAL to synchronous = NORMAL, which may lose the
 * last commits on power loss), foreign keys on, and no waiting on a busy file
 * (the lock file already keeps a second process out).
 */
export function configureNative(db: BetterSqlite3.Database, exclusive: boolean): void {
  // EXCLUSIVE before the first access: the WAL needs no shared-memory index file, and nothing else can open the file.
  if (exclusive) db.pragma('locking_mode = EXCLUSIVE');
  const mode = db.pragma('journal_mode = WAL', { simple: true });
  if (mode !== 'wal') throw new StorageError('io_error', `SQLite refused WAL mode for ${db.name} (journal_mode is ${String(mode)})`);
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
}

/** Opens (creating if needed) a native SQLite database, takes its lock, checks it and applies pending migrations. */
export async function openNativeDatabase(options: OpenNativeOptions): Promise<NativeDatabase> {
  const lock = options.lock ?? (await acquireFileLock(join(dirname(options.file), 'LOCK')));
  let sqlite: BetterSqlite3.Database | undefined;
  let database: NativeDatabase | undefined;
  try {
    try {
      sqlite = new BetterSqlite3(options.file, { timeout: 0 });
      configureNative(sqlite, true);
    } catch (error) {
      const mapped = fromSqliteError(error, `opening ${options.file}`);
      throw mapped instanceof StorageError ? mapped : toStorageError(error, `opening ${options.file}`);
    }
    database = new NativeDatabase(sqlite, lock);
    if (options.integrityCheck !== 'none') checkIntegrity(database, options.integrityCheck ?? 'quick');
    const now = options.now ?? Date.now;
    await database.transaction((tx) => applyMigrations(tx, options.schemas, now()));
    database.hooks = options.hooks;
    // A new file's directory entry is durable too (SQLite syncs the directory for its WAL, not for the file).
    await fsyncDirectory(dirname(options.file)).catch((error: unknown) => {
      throw toStorageError(error, `syncing ${dirname(options.file)}`);
    });
    return database;
  } catch (error) {
    if (database) await database.close().catch(() => undefined);
    else {
      sqlite?.close();
      await lock.release();
    }
    throw error;
  }
}
