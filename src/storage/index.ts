export type { ComponentSchema, Database, Migration, Row, RunResult, SqlParams, SqlValue, WriteTransaction } from './database.ts';
export { StorageError, type StorageErrorCode } from './errors.ts';
export { openSqlJsDatabase, type OpenSqlJsOptions } from './sqljs-database.ts';
export { DEFAULT_SNAPSHOT_POLICY, openDurableDatabase, type DurableDatabase, type DurableStats, type OpenDurableOptions, type SnapshotPolicy } from './durable-database.ts';
export { openIndexedDbPersistence, type IndexedDbPersistenceOptions } from './indexeddb-persistence.ts';
export type { LogEntry, Persistence, PersistenceHooks, PersistenceStep, StoredSnapshot, StoredState } from './persistence.ts';
