import type { RunResult, WriteTransaction } from './database.ts';
import { StorageError } from './errors.ts';

/**
 * What the two drivers of the database interface share, so that they keep the same
 * semantics: sql.js (sqljs-database.ts) and native SQLite (src/node/native-database.ts).
 */

/** Write transactions queued behind an in-flight commit share the next one (one record or one fsync). */
export const MAX_GROUP = 64;

/** Transaction control belongs to the driver: a stray COMMIT inside fn would break atomicity (and the redo log). */
const CONTROL_SQL = /^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE)\b/i;

export function refuseTransactionControl(sql: string): void {
  if (CONTROL_SQL.test(sql)) throw new TypeError(`transaction control is the driver's job; do not run "${sql.trim().split(/\s+/)[0]}" yourself`);
}

/** A transaction function that returned a promise would run its later statements outside the transaction. */
export function refuseAsync(value: unknown): void {
  if (typeof (value as { then?: unknown } | null)?.then === 'function') {
    throw new TypeError('a transaction function must be synchronous: it returned a promise, so its later statements would run outside the transaction');
  }
}

/**
 * Reads run at once, except while a write is open: then they wait for that one commit
 * (not for writes queued behind it) so they never see changes that may still roll back.
 */
export class ReadGate {
  /** From BEGIN to COMMIT/ROLLBACK, including while the commit is being made durable. */
  writeOpen = false;
  private waiting: Array<() => void> = [];

  read<T>(closed: boolean, fn: () => T): Promise<T> {
    if (closed) return Promise.reject(new StorageError('closed', 'the database is closed'));
    if (this.writeOpen) {
      return new Promise<T>((resolve, reject) => {
        this.waiting.push(() => {
          try {
            resolve(fn());
          } catch (error) {
            reject(error);
          }
        });
      });
    }
    try {
      return Promise.resolve(fn());
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The write closed: the reads that waited for it run. */
  writeClosed(): void {
    this.writeOpen = false;
    const reads = this.waiting;
    this.waiting = [];
    for (const read of reads) read();
  }
}

/** A transaction handle valid only while its fn runs: a leaked handle must not write into a later transaction. */
export function scopedTransaction(statements: {
  run(sql: string, params: Parameters<WriteTransaction['run']>[1]): RunResult;
  get(sql: string, params: Parameters<WriteTransaction['get']>[1]): ReturnType<WriteTransaction['get']>;
  all(sql: string, params: Parameters<WriteTransaction['all']>[1]): ReturnType<WriteTransaction['all']>;
}): { tx: WriteTransaction; finish(): void } {
  let active = true;
  const check = (): void => {
    if (!active) throw new Error('this transaction has finished; use the tx passed to the current transaction()');
  };
  const tx: WriteTransaction = {
    run: (sql, params) => (check(), statements.run(sql, params)),
    get: <T>(sql: string, params?: Parameters<WriteTransaction['get']>[1]) => (check(), statements.get(sql, params) as T | undefined),
    all: <T>(sql: string, params?: Parameters<WriteTransaction['all']>[1]) => (check(), statements.all(sql, params) as T[]),
  } as WriteTransaction;
  return { tx, finish: () => void (active = false) };
}

/** A write waiting in a driver's queue for its group. */
export interface QueuedWrite {
  fn: (tx: WriteTransaction) => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Runs each write of a group inside the open SQLite transaction, each in a savepoint
 * of its own, so one that throws is rolled back alone and rejected at once; the ones
 * that ran wait for the group's commit. `undoMark`, called before each write, gives
 * what to undo beside the savepoint if that write fails (the redo log's records).
 * `transactionLost` is set when SQLite ended the whole transaction itself (ON CONFLICT
 * ROLLBACK, RAISE(ROLLBACK), a full disk): the writes after it are not run.
 */
export function runEachInSavepoint<W extends QueuedWrite>(
  group: W[],
  control: (sql: string) => void,
  openHandle: () => { tx: WriteTransaction; finish(): void },
  undoMark: () => () => void = () => () => undefined,
): { succeeded: Array<{ item: W; value: unknown }>; transactionLost: unknown } {
  const succeeded: Array<{ item: W; value: unknown }> = [];
  let transactionLost: unknown;
  for (const item of group) {
    if (transactionLost !== undefined) {
      item.reject(new Error('not run: a transaction before it in the same group ended the SQLite transaction', { cause: transactionLost }));
      continue;
    }
    const undo = undoMark();
    const handle = openHandle();
    try {
      control('SAVEPOINT hearth_tx');
      const value = item.fn(handle.tx);
      refuseAsync(value);
      control('RELEASE hearth_tx');
      succeeded.push({ item, value });
    } catch (error) {
      undo();
      try {
        control('ROLLBACK TO hearth_tx');
        control('RELEASE hearth_tx');
      } catch {
        transactionLost = error;
      }
      item.reject(error); // nothing of it will be stored: no need to wait for the group
    } finally {
      handle.finish();
    }
  }
  return { succeeded, transactionLost };
}

/** What the writes that ran are rejected with when a later one of their group ended the SQLite transaction. */
export const groupLost = (cause: unknown): Error =>
  new Error('rolled back: a transaction after it in the same group ended the SQLite transaction', { cause });
