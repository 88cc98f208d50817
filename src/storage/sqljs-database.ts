import type { Database as SqlJsDatabase, SqlJsStatic, Statement } from 'sql.js';
import type { ComponentSchema, Database, Row, RunResult, SqlParams, WriteTransaction } from './database.ts';
import { groupLost, MAX_GROUP, ReadGate, refuseTransactionControl, runEachInSavepoint, scopedTransaction, type QueuedWrite as Write } from './driver-common.ts';
import { StorageError, toStorageError } from './errors.ts';
import { applyMigrations } from './migrations.ts';
import { assertLoggable, decodeRedoPayload, RedoRecordWriter } from './redo-log.ts';

export interface OpenSqlJsOptions {
  sqlJs: SqlJsStatic;
  schemas: ComponentSchema[];
  /** An SQLite image to start from (a snapshot); empty database when absent. */
  image?: Uint8Array;
  /** Time source for the migrations table. */
  now?: () => number;
}

/**
 * Makes a group of write transactions durable. Called with the SQLite
 * transaction still open, so that when it rejects the driver can roll back and
 * memory keeps matching what is stored.
 */
export interface CommitSink {
  persist(redoPayload: Uint8Array): Promise<void>;
}

type QueuedWrite = Write & { kind: 'write' };
type QueuedTask = { kind: 'exclusive'; fn: () => unknown; resolve: (value: unknown) => void; reject: (error: unknown) => void };

const PRAGMA_SQL = /^\s*PRAGMA\b/i;

/**
 * The sql.js driver. sql.js is synchronous and single-connection, so a write
 * transaction runs to completion without awaiting, inside BEGIN; when a commit
 * sink is attached the transaction stays open while its redo record is made
 * durable and is rolled back if that fails.
 *
 * Ordering: writes run one group at a time, in the order they were called.
 * Reads run at once, except while a write transaction is open: then they wait
 * for that one commit (not for writes queued behind it) so they never see
 * changes that may still roll back.
 */
export class SqlJsDriver implements Database {
  private readonly statements = new Map<string, Statement>();
  private readonly controlStatements = new Map<string, Statement>();
  private readonly queue: Array<QueuedWrite | QueuedTask> = [];
  private readonly writer = new RedoRecordWriter();
  private idleWaiters: Array<() => void> = [];
  private sink: CommitSink | null = null;
  private pumping = false;
  /** Open from BEGIN to COMMIT/ROLLBACK, including while the redo record is being made durable. */
  private readonly reads = new ReadGate();
  private closing = false;
  private closePromise: Promise<void> | null = null;
  private closed = false;
  /** Set when memory may no longer match what is stored; every later write fails with it. */
  private failure: StorageError | null = null;

  constructor(readonly db: SqlJsDatabase) {
    // The image lives in Emscripten's in-memory FS and durability comes from our
    // own redo log, so SQLite's file journal and syncs are pure cost: with them a
    // commit takes ~0.3 ms, without ~0.02 ms. MEMORY (not OFF) keeps ROLLBACK working.
    // EXCLUSIVE locking keeps the page cache valid across transactions (nothing else
    // opens this file), which halves a small transaction again: SQLite otherwise
    // re-reads pages through Emscripten's file layer at every BEGIN.
    db.exec('PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF; PRAGMA locking_mode = EXCLUSIVE; PRAGMA foreign_keys = ON');
  }

  /** From now on every write group is recorded and handed to sink before it commits. */
  setCommitSink(sink: CommitSink | null): void {
    if (this.reads.writeOpen) throw new Error('cannot change the commit sink while a write is open');
    this.sink = sink;
  }

  private prepare(sql: string): Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      refuseTransactionControl(sql);
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  private control(sql: string): void {
    let statement = this.controlStatements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.controlStatements.set(sql, statement);
    }
    try {
      statement.step();
    } finally {
      statement.reset();
    }
  }

  private bind(statement: Statement, params?: SqlParams): void {
    statement.reset();
    if (params) statement.bind(params as never);
  }

  /**
   * Frees every cached prepared statement. Before export(): older sql.js
   * versions close and reopen the connection there, which invalidates them; they
   * are re-prepared lazily, for a few microseconds each.
   */
  freeStatements(): void {
    for (const statement of this.statements.values()) statement.free();
    for (const statement of this.controlStatements.values()) statement.free();
    this.statements.clear();
    this.controlStatements.clear();
  }

  runSync(sql: string, params?: SqlParams): RunResult {
    const statement = this.prepare(sql);
    this.bind(statement, params);
    try {
      statement.step();
    } finally {
      statement.reset();
    }
    const changes = this.db.getRowsModified();
    // Read lazily: most callers never look, and it costs a statement.
    const lastInsertRowid = (): number => this.scalar('SELECT last_insert_rowid()');
    return {
      changes,
      get lastInsertRowid() {
        return lastInsertRowid();
      },
    };
  }

  private scalar(sql: string): number {
    const statement = this.prepare(sql);
    try {
      statement.step();
      return statement.get()[0] as number;
    } finally {
      statement.reset();
    }
  }

  getSync<T extends Row>(sql: string, params?: SqlParams): T | undefined {
    const statement = this.prepare(sql);
    this.bind(statement, params);
    try {
      return statement.step() ? (statement.getAsObject() as T) : undefined;
    } finally {
      statement.reset();
    }
  }

  allSync<T extends Row>(sql: string, params?: SqlParams): T[] {
    const statement = this.prepare(sql);
    this.bind(statement, params);
    const rows: T[] = [];
    try {
      while (statement.step()) rows.push(statement.getAsObject() as T);
    } finally {
      statement.reset();
    }
    return rows;
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
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ kind: 'write', fn, resolve: resolve as (value: unknown) => void, reject });
      this.schedule();
    });
  }

  /** Runs fn between write groups, when no transaction is open (export() needs that). */
  exclusive<T>(fn: () => T): Promise<T> {
    if (this.closed) return Promise.reject(new StorageError('closed', 'the database is closed'));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ kind: 'exclusive', fn, resolve: resolve as (value: unknown) => void, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.pumping) return;
    this.pumping = true;
    // A microtask later, so the caller's code after transaction() runs first, as it always has.
    void Promise.resolve().then(() => this.pump());
  }

  private async pump(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        if (this.queue[0]!.kind === 'exclusive') {
          const task = this.queue.shift() as QueuedTask;
          try {
            task.resolve(task.fn());
          } catch (error) {
            task.reject(error);
          }
          continue;
        }
        let count = 1;
        while (count < this.queue.length && count < MAX_GROUP && this.queue[count]!.kind === 'write') count++;
        await this.commitGroup(this.queue.splice(0, count) as QueuedWrite[]);
      }
    } finally {
      this.pumping = false;
      for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  private transactionHandle(recording: boolean): { tx: WriteTransaction; finish(): void } {
    return scopedTransaction(
      recording
        ? {
            run: (sql, params) => this.recordedRun(sql, params),
            get: (sql, params) => this.recordedRead(sql, params, () => this.getSync(sql, params)),
            all: (sql, params) => this.recordedRead(sql, params, () => this.allSync(sql, params)),
          }
        : { run: (sql, params) => this.runSync(sql, params), get: (sql, params) => this.getSync(sql, params), all: (sql, params) => this.allSync(sql, params) },
    );
  }

  private recordedRun(sql: string, params: SqlParams | undefined): RunResult {
    assertLoggable(params);
    let result: RunResult;
    try {
      result = this.runSync(sql, params);
    } catch (error) {
      // Logged only if fn catches this and commits anyway: replay must then see
      // the same failure (an OR FAIL statement can leave part of its work behind).
      this.writer.add(sql, params, true);
      throw error;
    }
    this.writer.add(sql, params, false);
    return result;
  }

  /** Reads are logged only when they wrote (INSERT … RETURNING) or might have (PRAGMA). */
  private recordedRead<T>(sql: string, params: SqlParams | undefined, read: () => T): T {
    assertLoggable(params);
    const before = this.scalar('SELECT total_changes()');
    try {
      const result = read();
      if (this.scalar('SELECT total_changes()') !== before || PRAGMA_SQL.test(sql)) this.writer.add(sql, params, false);
      return result;
    } catch (error) {
      if (this.scalar('SELECT total_changes()') !== before) this.writer.add(sql, params, true);
      throw error;
    }
  }

  private async commitGroup(group: QueuedWrite[]): Promise<void> {
    if (this.failure) {
      for (const item of group) item.reject(this.failure);
      return;
    }
    const recording = this.sink !== null;
    try {
      this.control('BEGIN');
    } catch (error) {
      for (const item of group) item.reject(error);
      return;
    }
    this.reads.writeOpen = true;
    this.writer.reset();
    const { succeeded, transactionLost } = runEachInSavepoint(group, (sql) => this.control(sql), () => this.transactionHandle(recording), () => {
      const mark = this.writer.mark();
      return () => this.writer.rewind(mark);
    });

    let groupError: unknown;
    if (transactionLost !== undefined) {
      groupError = groupLost(transactionLost);
      this.rollbackQuietly();
      if (recording) {
        this.failure = new StorageError('corrupt', 'a transaction ended the SQLite transaction itself (ON CONFLICT ROLLBACK?); memory may differ from storage, reopen the database', { cause: transactionLost });
      }
    } else {
      if (recording && !this.writer.isEmpty) {
        try {
          await this.sink!.persist(this.writer.finish());
        } catch (error) {
          groupError = toStorageError(error, 'appending to the redo log');
        }
      }
      if (groupError === undefined) {
        try {
          this.control('COMMIT');
        } catch (error) {
          // Only deferred constraints fail here. Replay meets the same failure on
          // the same record and rolls it back too, so memory and storage agree.
          groupError = error;
        }
      }
      if (groupError !== undefined) this.rollbackQuietly();
    }
    this.reads.writeClosed();
    for (const { item, value } of succeeded) {
      if (groupError !== undefined) item.reject(groupError);
      else item.resolve(value);
    }
  }

  private rollbackQuietly(): void {
    try {
      this.control('ROLLBACK');
    } catch {
      // no transaction left to roll back
    }
  }

  /**
   * Applies redo records in order, as they were first committed: all in one
   * SQLite transaction with a savepoint per record (a commit per record would
   * cost three times as much). Throws StorageError 'corrupt', with nothing
   * applied, if a record does not replay as it first ran.
   */
  replay(records: Array<{ payload: Uint8Array; seq: number }>): void {
    if (records.length === 0) return;
    this.control('BEGIN');
    try {
      for (const { payload, seq } of records) {
        this.control('SAVEPOINT hearth_replay');
        this.replayStatements(payload, seq);
        this.control('RELEASE hearth_replay');
      }
    } catch (error) {
      this.rollbackQuietly();
      throw error;
    }
    try {
      this.control('COMMIT');
    } catch {
      // A deferred constraint failed at COMMIT, as it did when one of these
      // records was first committed and rolled back. Redo them one by one to
      // roll back exactly that one again.
      this.rollbackQuietly();
      for (const { payload, seq } of records) this.replayOne(payload, seq);
    }
  }

  private replayOne(payload: Uint8Array, seq: number): void {
    this.control('BEGIN');
    try {
      this.replayStatements(payload, seq);
    } catch (error) {
      this.rollbackQuietly();
      throw error;
    }
    try {
      this.control('COMMIT');
    } catch {
      this.rollbackQuietly();
    }
  }

  private replayStatements(payload: Uint8Array, seq: number): void {
    for (const { sql, params, failed } of decodeRedoPayload(payload)) {
      let error: unknown;
      try {
        const statement = this.prepare(sql);
        this.bind(statement, params as SqlParams | undefined);
        try {
          while (statement.step());
        } finally {
          statement.reset();
        }
      } catch (e) {
        error = e;
      }
      if ((error !== undefined) !== failed) {
        const what = failed ? 'succeeded but had failed when first run' : `failed (${(error as Error).message})`;
        throw new StorageError('corrupt', `replaying redo record ${seq} diverged: "${sql}" ${what}`, { cause: error });
      }
    }
  }

  /** Resolves once every queued write and task has run. */
  private whenIdle(): Promise<void> {
    if (!this.pumping && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Lets queued writes finish, then closes. Later calls return the same promise. */
  close(): Promise<void> {
    this.closePromise ??= (async () => {
      this.closing = true;
      await this.whenIdle();
      this.closed = true;
      this.freeStatements();
      this.db.close();
    })();
    return this.closePromise;
  }
}

/** Opens an in-memory sql.js database (no persistence) and applies the schemas' migrations. */
export async function openSqlJsDatabase(options: OpenSqlJsOptions): Promise<SqlJsDriver> {
  const driver = new SqlJsDriver(new options.sqlJs.Database(options.image ?? null));
  await driver.transaction((tx) => applyMigrations(tx, options.schemas, options.now?.() ?? 0));
  return driver;
}
