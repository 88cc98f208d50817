/**
 * The database interface every component uses. SQLite semantics (sql.js in the
 * browser and under Node). Writes are serialised: one write transaction at a time,
 * and its promise resolves only once the transaction is durable.
 */
export type SqlValue = string | number | Uint8Array | null;
export type SqlParams = readonly SqlValue[] | Readonly<Record<string, SqlValue>>;
export type Row = Record<string, SqlValue>;

export interface RunResult {
  /** Rows changed by the statement. */
  changes: number;
  /** rowid of the last inserted row; read it before running another statement. */
  readonly lastInsertRowid: number;
}

/** Statements inside a write transaction. Synchronous: a transaction never awaits mid-way. */
export interface WriteTransaction {
  run(sql: string, params?: SqlParams): RunResult;
  get<T extends Row = Row>(sql: string, params?: SqlParams): T | undefined;
  all<T extends Row = Row>(sql: string, params?: SqlParams): T[];
}

export interface Database {
  get<T extends Row = Row>(sql: string, params?: SqlParams): Promise<T | undefined>;
  all<T extends Row = Row>(sql: string, params?: SqlParams): Promise<T[]>;
  /**
   * Runs fn as one atomic write transaction. If fn throws, nothing it did remains.
   * The promise resolves after the transaction is durable, and rejects (with the
   * database rolled back to what is stored) when persistence fails.
   * SQL must be deterministic so the redo log can replay it: no random(), no
   * datetime('now'); pass times and IDs as parameters.
   */
  transaction<T>(fn: (tx: WriteTransaction) => T): Promise<T>;
  close(): Promise<void>;
}

/** A component's schema: numbered migrations, applied in order at start-up and recorded in the database. */
export interface Migration {
  version: number;
  description: string;
  up(tx: WriteTransaction): void;
}

export interface ComponentSchema {
  component: string;
  migrations: Migration[];
}
