import type { SqlJsStatic } from 'sql.js';
import { crc32 } from './crc32.ts';
import type { ComponentSchema, Database, Row, SqlParams, WriteTransaction } from './database.ts';
import { StorageError } from './errors.ts';
import { applyMigrations } from './migrations.ts';
import type { LogEntry, Persistence } from './persistence.ts';
import { openDatabaseOwning, openImageSource } from './memfs-image.ts';
import { encodeLogEntry, verifyLogEntry } from './redo-log.ts';
import { SqlJsDriver, type CommitSink } from './sqljs-database.ts';

/**
 * When to fold the redo log into a new snapshot. A snapshot costs time
 * proportional to the database (Chromium, 100 MB: 0.8-2.4 s, of which export(),
 * 0.15-0.4 s, blocks the thread), so it is taken once the log reaches a fixed
 * fraction of the image: the snapshot cost per committed byte then stays flat
 * as the database grows. Start-up pays for the log instead (Chromium: ~85 ms per
 * MB to load and replay it, twice that on a busy machine), so the log is capped
 * at 8 MB: under a second of replay. See README.md for the figures.
 */
export interface SnapshotPolicy {
  /** Never snapshot for less log than this. */
  minLogBytes: number;
  /** Snapshot once the log reaches this fraction of the image size… */
  logToImageRatio: number;
  /** …but always once it reaches this much (bounds replay at start-up). */
  maxLogBytes: number;
  /** After this long without a write… */
  idleMs: number;
  /** …snapshot if the log holds at least this much. */
  idleMinLogBytes: number;
}

export const DEFAULT_SNAPSHOT_POLICY: SnapshotPolicy = {
  minLogBytes: 1 << 20,
  logToImageRatio: 0.25,
  maxLogBytes: 8 << 20,
  idleMs: 30_000,
  idleMinLogBytes: 256 << 10,
};

export interface OpenDurableOptions {
  sqlJs: SqlJsStatic;
  /** Taken over: closed by close(), or at once if opening fails. */
  persistence: Persistence;
  schemas: ComponentSchema[];
  /** Time source for the migrations table (default Date.now). */
  now?: () => number;
  snapshotPolicy?: Partial<SnapshotPolicy>;
  /** Start-up check: 'quick' (default) PRAGMA quick_check, 'full' PRAGMA integrity_check. */
  integrityCheck?: 'quick' | 'full' | 'none';
  /** Background snapshot failures (writes are unaffected: the log keeps everything). Default: console.warn. */
  onBackgroundError?: (error: unknown) => void;
}

export interface DurableStats {
  /** seq of the newest durable log entry (0 when none yet). */
  lastSeq: number;
  /** seq the newest snapshot covers. */
  snapshotSeq: number;
  /** Log entries and bytes not yet covered by a snapshot. */
  logEntries: number;
  logBytes: number;
  /** Image size at the last snapshot or open. */
  imageBytes: number;
  snapshotsTaken: number;
  /** At open: entries replayed, and torn or damaged tail entries discarded. */
  replayedAtOpen: number;
  discardedAtOpen: number;
  /** Where the time went at open: reading storage, verifying the snapshot, replaying the log, the integrity check. */
  openTimings: { loadMs: number; verifyMs: number; replayMs: number; checkMs: number };
  /** How long the last snapshot's steps took; export blocks the thread, the rest does not. */
  lastSnapshot: {
    imageBytes: number;
    /** Read copy-on-write from sql.js's file as it was stored (memfs-image.ts), or copied whole by export(). */
    copyOnWrite: boolean;
    exportMs: number;
    checksumMs: number;
    storeMs: number;
  } | null;
}

const PAGE_BYTES_SQL = 'SELECT page_count * page_size AS bytes FROM pragma_page_count, pragma_page_size';

function corrupt(message: string): StorageError {
  return new StorageError('corrupt', message);
}

/**
 * A sql.js database made durable through a redo log and snapshots, on any
 * Persistence backend. Every write transaction's promise resolves only after
 * its redo record is durable; if persisting fails it rejects with StorageError
 * and the in-memory database is rolled back to match what is stored.
 */
export class DurableDatabase implements Database {
  private readonly policy: SnapshotPolicy;
  private lastSeq: number;
  private snapshotSeq: number;
  private logEntries: number;
  private logBytes: number;
  private imageBytes: number;
  private snapshotsTaken = 0;
  private lastSnapshot: DurableStats['lastSnapshot'] = null;
  private snapshotRunning: Promise<void> | null = null;
  /** After a failed snapshot, wait for this much log before trying again. */
  private snapshotRetryAtBytes = 0;
  private idleTimer: ReturnType<typeof setTimeout> | undefined;
  private closePromise: Promise<void> | null = null;
  private readonly replayedAtOpen: number;
  private readonly discardedAtOpen: number;
  private readonly openTimings: DurableStats['openTimings'];

  constructor(
    private readonly driver: SqlJsDriver,
    private readonly persistence: Persistence,
    state: {
      lastSeq: number;
      snapshotSeq: number;
      logEntries: number;
      logBytes: number;
      imageBytes: number;
      replayed: number;
      discarded: number;
      openTimings: DurableStats['openTimings'];
    },
    policy: Partial<SnapshotPolicy> | undefined,
    private readonly onBackgroundError: (error: unknown) => void,
  ) {
    this.policy = { ...DEFAULT_SNAPSHOT_POLICY, ...policy };
    this.lastSeq = state.lastSeq;
    this.snapshotSeq = state.snapshotSeq;
    this.logEntries = state.logEntries;
    this.logBytes = state.logBytes;
    this.imageBytes = state.imageBytes;
    this.replayedAtOpen = state.replayed;
    this.discardedAtOpen = state.discarded;
    this.openTimings = state.openTimings;
    const sink: CommitSink = { persist: (redoPayload) => this.persist(redoPayload) };
    driver.setCommitSink(sink);
  }

  get<T extends Row = Row>(sql: string, params?: SqlParams): Promise<T | undefined> {
    return this.driver.get<T>(sql, params);
  }

  all<T extends Row = Row>(sql: string, params?: SqlParams): Promise<T[]> {
    return this.driver.all<T>(sql, params);
  }

  transaction<T>(fn: (tx: WriteTransaction) => T): Promise<T> {
    return this.driver.transaction(fn);
  }

  /** Called by the driver with the write group's transaction still open. */
  private async persist(redoPayload: Uint8Array): Promise<void> {
    const seq = this.lastSeq + 1;
    const bytes = encodeLogEntry(seq, redoPayload);
    await this.persistence.append({ seq, bytes });
    this.lastSeq = seq;
    this.logEntries++;
    this.logBytes += bytes.length;
    this.afterAppend();
  }

  stats(): DurableStats {
    return {
      lastSeq: this.lastSeq,
      snapshotSeq: this.snapshotSeq,
      logEntries: this.logEntries,
      logBytes: this.logBytes,
      imageBytes: this.imageBytes,
      snapshotsTaken: this.snapshotsTaken,
      replayedAtOpen: this.replayedAtOpen,
      discardedAtOpen: this.discardedAtOpen,
      openTimings: this.openTimings,
      lastSnapshot: this.lastSnapshot,
    };
  }

  private snapshotThreshold(): number {
    const { minLogBytes, logToImageRatio, maxLogBytes } = this.policy;
    return Math.max(minLogBytes, Math.min(maxLogBytes, logToImageRatio * this.imageBytes));
  }

  private afterAppend(): void {
    if (this.closePromise) return;
    if (this.logBytes >= this.snapshotThreshold() && this.logBytes >= this.snapshotRetryAtBytes) this.startBackgroundSnapshot();
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.logBytes >= this.policy.idleMinLogBytes) this.startBackgroundSnapshot();
    }, this.policy.idleMs);
    // Under Node an idle timer must not keep the process alive.
    (this.idleTimer as { unref?: () => void }).unref?.();
  }

  private startBackgroundSnapshot(): void {
    if (this.snapshotRunning || this.closePromise) return;
    void this.snapshot().catch((error: unknown) => {
      this.snapshotRetryAtBytes = this.logBytes + this.policy.minLogBytes;
      this.onBackgroundError(error);
    });
  }

  /**
   * Folds the log into a new snapshot now and waits for it. Writes keep going
   * meanwhile: the image is read copy-on-write as it is stored (memfs-image.ts);
   * only where that is unavailable does export() (synchronous, ~15 ms per MB) hold them up.
   */
  snapshot(): Promise<void> {
    if (this.snapshotRunning) return this.snapshotRunning.then(() => this.snapshot());
    const running = this.takeSnapshot().finally(() => {
      this.snapshotRunning = null;
    });
    this.snapshotRunning = running;
    return running;
  }

  private async takeSnapshot(): Promise<void> {
    const taken = await this.driver.exclusive(() => {
      if (this.lastSeq === this.snapshotSeq) return null;
      const exportStart = performance.now();
      const covered = { coversSeq: this.lastSeq, logEntries: this.logEntries, logBytes: this.logBytes };
      // Where the backend can store it slice by slice, read the image from sql.js's file copy-on-write
      // (memfs-image.ts) rather than export() it: the image is then never in memory twice.
      const pageBytes = this.persistence.writeSnapshotFrom ? this.driver.getSync<{ bytes: number }>(PAGE_BYTES_SQL)!.bytes : 0;
      const source = this.persistence.writeSnapshotFrom ? openImageSource(this.driver.db, pageBytes) : null;
      if (source) return { ...covered, source, image: null, exportMs: performance.now() - exportStart };
      // export() throws inside a transaction (none is open between write groups).
      this.driver.freeStatements();
      const image = this.driver.db.export();
      return { ...covered, source: null, image, exportMs: performance.now() - exportStart };
    });
    if (!taken) return;
    const { coversSeq } = taken;
    const checksumStart = performance.now();
    let imageBytes: number;
    let storeStart: number;
    if (taken.source) {
      const source = taken.source;
      imageBytes = source.byteLength;
      storeStart = checksumStart; // the checksum runs slice by slice inside the store
      try {
        await this.persistence.writeSnapshotFrom!({ coversSeq, byteLength: imageBytes, read: (length) => source.read(length), checksum: () => source.checksum() });
      } finally {
        source.release();
      }
    } else {
      const image = taken.image;
      imageBytes = image.length;
      const checksum = await checksumYielding(image);
      storeStart = performance.now();
      await this.persistence.writeSnapshot({ coversSeq, image, checksum });
    }
    this.lastSnapshot = { imageBytes, copyOnWrite: taken.source !== null, exportMs: taken.exportMs, checksumMs: storeStart - checksumStart, storeMs: performance.now() - storeStart };
    this.snapshotSeq = coversSeq;
    this.imageBytes = imageBytes;
    this.logEntries -= taken.logEntries;
    this.logBytes -= taken.logBytes;
    this.snapshotsTaken++;
    this.snapshotRetryAtBytes = 0;
    // If this fails the covered entries stay and are skipped at the next open.
    await this.persistence.dropLogThrough(coversSeq);
  }

  /** A copy of the whole SQLite image as it stands between write groups (to move the database elsewhere). */
  exportImage(): Promise<Uint8Array> {
    return this.driver.exclusive(() => {
      this.driver.freeStatements(); // export() throws inside a transaction and may invalidate them
      return this.driver.db.export();
    });
  }

  /** Waits for queued writes and any snapshot under way, then closes the database and its persistence. */
  close(): Promise<void> {
    this.closePromise ??= (async () => {
      clearTimeout(this.idleTimer);
      await this.driver.close();
      await this.snapshotRunning?.catch(() => undefined);
      await this.persistence.close();
    })();
    return this.closePromise;
  }
}

/** A snapshot's checksum in slices, letting reads and writes run in between (a 100 MB image takes ~150 ms). */
async function checksumYielding(image: Uint8Array): Promise<number> {
  const slice = 4 << 20;
  let crc = 0;
  for (let at = 0; at < image.length; at += slice) {
    if (at > 0) await new Promise((resolve) => setTimeout(resolve, 0));
    crc = crc32(image.subarray(at, at + slice), crc);
  }
  return crc;
}

interface ReplayResult {
  lastSeq: number;
  logEntries: number;
  logBytes: number;
  replayed: number;
  /** Index of the first torn or damaged entry, if any. */
  cutAt: number | undefined;
}

/**
 * Replays the log entries after the snapshot, in order. The first entry that
 * fails its checksum ends the log: a crash tore it mid-append, so it was never
 * acknowledged. An intact entry after a damaged one means real damage, not a
 * crash, and dropping it would lose acknowledged writes: that refuses to open.
 */
function replayLog(driver: SqlJsDriver, log: LogEntry[], snapshotSeq: number): ReplayResult {
  const result: ReplayResult = { lastSeq: snapshotSeq, logEntries: 0, logBytes: 0, replayed: 0, cutAt: undefined };
  const records: Array<{ payload: Uint8Array; seq: number }> = [];
  for (let i = 0; i < log.length; i++) {
    const entry = log[i]!;
    const payload = verifyLogEntry(entry.seq, entry.bytes);
    if (!payload) {
      const intactLater = log.slice(i + 1).find((later) => later.seq > snapshotSeq && verifyLogEntry(later.seq, later.bytes));
      if (intactLater) {
        throw corrupt(`redo log entry ${entry.seq} is damaged but entry ${intactLater.seq} after it is intact; refusing to drop acknowledged writes`);
      }
      result.cutAt = i;
      break;
    }
    if (entry.seq <= snapshotSeq) continue; // covered by the snapshot; left by an interrupted log drop
    if (entry.seq !== result.lastSeq + 1) throw corrupt(`redo log entry ${entry.seq} follows ${result.lastSeq}: entries are missing`);
    records.push({ payload, seq: entry.seq });
    result.lastSeq = entry.seq;
    result.logEntries++;
    result.logBytes += entry.bytes.length;
    result.replayed++;
  }
  driver.replay(records);
  return result;
}

function checkIntegrity(driver: SqlJsDriver, mode: 'quick' | 'full'): void {
  const rows = driver.allSync<{ check: string }>(`SELECT * FROM pragma_${mode === 'full' ? 'integrity' : 'quick'}_check AS "check"`);
  const problems = rows.map((row) => Object.values(row)[0]).filter((value) => value !== 'ok');
  if (problems.length > 0) throw corrupt(`the database failed its integrity check: ${problems.slice(0, 5).join('; ')}`);
}

/**
 * Opens a durable database: loads the newest complete snapshot, verifies and
 * replays the log after it, discards a torn tail, checks integrity, then
 * applies pending migrations through the durable write path.
 */
export async function openDurableDatabase(options: OpenDurableOptions): Promise<DurableDatabase> {
  const { persistence } = options;
  let driver: SqlJsDriver | undefined;
  let database: DurableDatabase | undefined;
  try {
    const started = performance.now();
    const stored = await persistence.load();
    const loaded = performance.now();
    const snapshot = stored.snapshot;
    if (snapshot && crc32(snapshot.image) !== snapshot.checksum) {
      throw corrupt(`the snapshot covering redo entry ${snapshot.coversSeq} fails its checksum`);
    }
    const snapshotSeq = snapshot?.coversSeq ?? 0;
    // The loaded image becomes sql.js's file as it is, rather than being copied into it.
    driver = new SqlJsDriver(snapshot ? openDatabaseOwning(options.sqlJs.Database, snapshot.image) : new options.sqlJs.Database());
    const verified = performance.now();
    const replay = replayLog(driver, stored.log, snapshotSeq);
    const discarded = replay.cutAt === undefined ? 0 : stored.log.length - replay.cutAt;
    if (replay.cutAt !== undefined) await persistence.discardLogFrom(replay.cutAt);
    const replayed = performance.now();
    if (options.integrityCheck !== 'none') checkIntegrity(driver, options.integrityCheck ?? 'quick');
    const openTimings = { loadMs: loaded - started, verifyMs: verified - loaded, replayMs: replayed - verified, checkMs: performance.now() - replayed };
    const pageBytes = driver.getSync<{ bytes: number }>(PAGE_BYTES_SQL)?.bytes ?? 0;

    database = new DurableDatabase(
      driver,
      persistence,
      { ...replay, snapshotSeq, imageBytes: pageBytes, discarded, openTimings },
      options.snapshotPolicy,
      options.onBackgroundError ?? ((error) => console.warn('hearth storage: background snapshot failed', error)),
    );
    const now = options.now ?? Date.now;
    await database.transaction((tx) => applyMigrations(tx, options.schemas, now()));
    return database;
  } catch (error) {
    if (database) {
      await database.close().catch(() => undefined);
    } else {
      await driver?.close().catch(() => undefined);
      await persistence.close().catch(() => undefined);
    }
    throw error;
  }
}
