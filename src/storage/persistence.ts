/**
 * Where the durable database keeps its redo log and snapshots. Backends store
 * opaque bytes; checksums, ordering checks and replay live in
 * durable-database.ts, so every backend is verified the same way.
 *
 * Implementations: IndexedDB (indexeddb-persistence.ts, browsers and workers)
 * and files (src/node/file-persistence.ts). A backend holds an exclusive lock on
 * its database from open until close; a second opener gets StorageError 'locked'.
 */
export interface LogEntry {
  /** Position in the log: consecutive integers from 1. */
  seq: number;
  bytes: Uint8Array;
}

export interface StoredSnapshot {
  /** The image contains every log entry up to and including this seq. */
  coversSeq: number;
  image: Uint8Array;
  /** CRC-32 of image, computed and checked by the caller; the backend stores it alongside. */
  checksum: number;
}

/** A snapshot read slice by slice, in order (its checksum known once it has been read through). */
export interface SnapshotSource {
  coversSeq: number;
  byteLength: number;
  /** A copy of the next `length` bytes of the image. */
  read(length: number): Uint8Array;
  /** CRC-32 of the image, available once read() has returned its last byte. */
  checksum(): number;
}

export interface StoredState {
  /** The newest complete snapshot, or null for a new database. */
  snapshot: StoredSnapshot | null;
  /**
   * Every log entry stored, in append order, including entries the snapshot
   * already covers and, last, whatever a crash left half-written (which fails
   * verification; its seq may be NaN when even the framing was torn).
   */
  log: LogEntry[];
}

export interface Persistence {
  load(): Promise<StoredState>;
  /**
   * Durably removes log entry `index` of the last load() and everything after
   * it, including unreadable bytes, so new entries never follow a torn one.
   * Only valid between load() and the first append().
   */
  discardLogFrom(index: number): Promise<void>;
  /** Resolves only once the entry is durable. On failure nothing of it remains. */
  append(entry: LogEntry): Promise<void>;
  /**
   * Stores the snapshot durably; it replaces the previous one atomically (a crash
   * part-way leaves the previous snapshot in place). May run while append()s do.
   */
  writeSnapshot(snapshot: StoredSnapshot): Promise<void>;
  /** The same, reading the image slice by slice as it is stored, so it is never in memory twice (optional). */
  writeSnapshotFrom?(source: SnapshotSource): Promise<void>;
  /** Removes log entries with seq <= throughSeq (a durable snapshot covers them). */
  dropLogThrough(throughSeq: number): Promise<void>;
  /** Releases the lock and handles. Does not wait for operations a crash test left hanging. */
  close(): Promise<void>;
}

/**
 * Points inside a backend's operations where tests inject faults: throw to
 * simulate an I/O error, or return a promise that never settles to simulate the
 * process dying there (then close() the backend and reopen what was stored).
 */
export type PersistenceStep =
  | 'append:start' // nothing of the entry written yet
  | 'append:written' // written but not yet flushed (file backend only)
  | 'append:durable' // durable, not yet acknowledged
  | 'snapshot:partial' // part of the new snapshot written, not yet made current
  | 'snapshot:durable' // the new snapshot is current, older ones not yet removed
  | 'log:drop'; // about to drop log entries the snapshot covers

export interface PersistenceHooks {
  at(step: PersistenceStep): void | Promise<void>;
}

export async function runHook(hooks: PersistenceHooks | undefined, step: PersistenceStep): Promise<void> {
  if (hooks) await hooks.at(step);
}
