import { mkdir, open, readdir, readFile, rename, stat, unlink, type FileHandle } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { StorageError, toStorageError } from '../storage/errors.ts';
import { runHook, type LogEntry, type Persistence, type PersistenceHooks, type SnapshotSource, type StoredSnapshot, type StoredState } from '../storage/persistence.ts';
import { acquireFileLock, type FileLock } from './file-lock.ts';

/**
 * Persistence in a directory, for the Node host:
 * - LOCK: held while open (see file-lock.ts);
 * - log-<firstSeq>.bin: redo log segments, frames of [u32 length][f64 seq][entry];
 * - snapshot-<coversSeq>.db: a 32-byte header, then the SQLite image.
 *
 * An append is acknowledged after fdatasync. A new file is made durable by
 * fsyncing the directory after creating or renaming it. A snapshot is written
 * to a .tmp file, fsynced, then renamed into place, so a crash leaves either
 * the old snapshot or the new one. Log segments are only ever deleted whole:
 * when a snapshot covers part of the active segment, the next append starts a
 * new one, and the old one goes at the following snapshot.
 */
export interface FilePersistenceOptions {
  directory: string;
  hooks?: PersistenceHooks;
  /** The directory's lock, already held by the caller (who releases it); default: take it here, release it at close. */
  lock?: FileLock;
}

interface Segment {
  path: string;
  firstSeq: number;
  /** firstSeq - 1 while empty. */
  lastSeq: number;
  size: number;
}

interface Location {
  segment: Segment;
  offset: number;
  /** lastSeq of the segment if it were cut at offset. */
  seqBefore: number;
}

const FRAME_HEADER = 12;
const SNAPSHOT_HEADER = 32;
/** Bytes of the image read and written at a time while a snapshot is stored. */
const SNAPSHOT_SLICE = 1024 * 1024;
const SNAPSHOT_MAGIC = 0x48534e50; // "HSNP"
const SNAPSHOT_VERSION = 1;
const SEGMENT_NAME = /^log-(\d{16})\.bin$/;
const SNAPSHOT_NAME = /^snapshot-(\d{16})\.db$/;

const pad = (seq: number): string => String(seq).padStart(16, '0');

export async function fsyncDirectory(directory: string): Promise<void> {
  if (process.platform === 'win32') return; // directories cannot be opened for fsync there; NTFS journals metadata
  const handle = await open(directory, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Replaces `path` whole, readable only by us: written beside it (`.tmp`), synced, renamed into
 * place and its folder synced, so a crash leaves the old file or the new one, never part of one.
 */
export async function writeFileDurably(path: string, data: string | Uint8Array): Promise<void> {
  const temporary = `${path}.tmp`;
  const handle = await open(temporary, 'w', 0o600);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temporary, path);
  await fsyncDirectory(dirname(path));
}

/** Plain Uint8Array views: a Buffer's slice() is a view, not a copy, a trap for code written for Uint8Array. */
async function readBytes(path: string): Promise<Uint8Array> {
  const data = await readFile(path);
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

async function writeAll(handle: FileHandle, data: Uint8Array, position: number): Promise<void> {
  for (let done = 0; done < data.length; ) {
    const { bytesWritten } = await handle.write(data, done, data.length - done, position + done);
    done += bytesWritten;
  }
}

class FilePersistence implements Persistence {
  private segments: Segment[] = [];
  private locations: Location[] = [];
  private activeHandle: FileHandle | null = null;
  /** The active segment holds entries a snapshot covers: start a new one so it can be deleted whole later. */
  private rollOver = false;
  /** Log operations run one at a time (a snapshot's drop may come while an append runs). */
  private logQueue: Promise<unknown> = Promise.resolve();
  private unusable: StorageError | null = null;
  private readonly snapshotHandles = new Set<FileHandle>();

  constructor(
    private readonly directory: string,
    private readonly lock: FileLock,
    private readonly hooks: PersistenceHooks | undefined,
  ) {}

  private check(): void {
    if (this.unusable) throw this.unusable;
  }

  private serial<T>(operation: () => Promise<T>): Promise<T> {
    const run = this.logQueue.then(operation, operation);
    this.logQueue = run.catch(() => undefined);
    return run;
  }

  private get active(): Segment | undefined {
    return this.rollOver ? undefined : this.segments[this.segments.length - 1];
  }

  async load(): Promise<StoredState> {
    this.check();
    try {
      const names = await readdir(this.directory);
      for (const name of names.filter((n) => n.endsWith('.tmp'))) await unlink(join(this.directory, name)); // an interrupted snapshot
      const snapshotSeqs = names.flatMap((n) => SNAPSHOT_NAME.exec(n)?.[1] ?? []).map(Number).sort((a, b) => b - a);
      const snapshot = snapshotSeqs.length > 0 ? await this.readSnapshot(snapshotSeqs[0]!) : null;
      for (const seq of snapshotSeqs.slice(1)) await unlink(this.snapshotPath(seq)); // superseded; a crash stopped their removal
      const segmentSeqs = names.flatMap((n) => SEGMENT_NAME.exec(n)?.[1] ?? []).map(Number).sort((a, b) => a - b);
      const log: LogEntry[] = [];
      this.segments = [];
      this.locations = [];
      for (const firstSeq of segmentSeqs) {
        const segment: Segment = { path: this.segmentPath(firstSeq), firstSeq, lastSeq: firstSeq - 1, size: 0 };
        this.segments.push(segment);
        this.parseSegment(segment, await readBytes(segment.path), log);
      }
      return { snapshot, log };
    } catch (error) {
      throw toStorageError(error, 'loading the database from files');
    }
  }

  /** Splits a segment into entries. A frame cut short by a crash becomes one last, partial entry. */
  private parseSegment(segment: Segment, data: Uint8Array, log: LogEntry[]): void {
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    let at = 0;
    while (at < data.length) {
      const location: Location = { segment, offset: at, seqBefore: segment.lastSeq };
      this.locations.push(location);
      if (at + FRAME_HEADER > data.length) {
        log.push({ seq: NaN, bytes: data.subarray(at) });
        break;
      }
      const length = view.getUint32(at, true);
      const seq = view.getFloat64(at + 4, true);
      const end = Math.min(data.length, at + FRAME_HEADER + length);
      log.push({ seq, bytes: data.subarray(at + FRAME_HEADER, end) });
      segment.lastSeq = seq;
      at = end;
    }
    segment.size = data.length;
  }

  private snapshotPath(seq: number): string {
    return join(this.directory, `snapshot-${pad(seq)}.db`);
  }

  private segmentPath(firstSeq: number): string {
    return join(this.directory, `log-${pad(firstSeq)}.bin`);
  }

  private async readSnapshot(coversSeq: number): Promise<StoredSnapshot> {
    const path = this.snapshotPath(coversSeq);
    const data = await readBytes(path);
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    if (
      data.length < SNAPSHOT_HEADER ||
      view.getUint32(0, true) !== SNAPSHOT_MAGIC ||
      view.getUint32(4, true) !== SNAPSHOT_VERSION ||
      view.getFloat64(8, true) !== coversSeq ||
      view.getFloat64(16, true) !== data.length - SNAPSHOT_HEADER
    ) {
      throw new StorageError('corrupt', `snapshot file ${path} has a damaged header or the wrong length`);
    }
    return { coversSeq, image: data.subarray(SNAPSHOT_HEADER), checksum: view.getUint32(24, true) };
  }

  discardLogFrom(index: number): Promise<void> {
    return this.serial(async () => {
      this.check();
      const location = this.locations[index];
      if (!location) return;
      const { segment } = location;
      try {
        await this.closeActiveHandle();
        const handle = await open(segment.path, 'r+');
        try {
          await handle.truncate(location.offset);
          await handle.sync();
        } finally {
          await handle.close();
        }
        const later = this.segments.slice(this.segments.indexOf(segment) + 1);
        for (const dropped of later) await unlink(dropped.path);
        if (later.length > 0) await fsyncDirectory(this.directory);
        this.segments = this.segments.slice(0, this.segments.indexOf(segment) + 1);
        segment.size = location.offset;
        segment.lastSeq = location.seqBefore;
        this.locations = [];
      } catch (error) {
        throw toStorageError(error, 'discarding a torn redo log tail');
      }
    });
  }

  append(entry: LogEntry): Promise<void> {
    return this.serial(async () => {
      await runHook(this.hooks, 'append:start');
      this.check();
      let segment = this.active;
      try {
        if (!segment) segment = await this.startSegment(entry.seq);
        this.activeHandle ??= await open(segment.path, 'r+');
      } catch (error) {
        throw toStorageError(error, 'starting a redo log segment');
      }
      const frame = new Uint8Array(FRAME_HEADER + entry.bytes.length);
      const view = new DataView(frame.buffer);
      view.setUint32(0, entry.bytes.length, true);
      view.setFloat64(4, entry.seq, true);
      frame.set(entry.bytes, FRAME_HEADER);
      try {
        await writeAll(this.activeHandle, frame, segment.size);
        await runHook(this.hooks, 'append:written');
        await this.activeHandle.datasync();
      } catch (error) {
        await this.undoPartialAppend(segment);
        throw toStorageError(error, 'appending to the redo log');
      }
      segment.size += frame.length;
      segment.lastSeq = entry.seq;
      await runHook(this.hooks, 'append:durable');
    });
  }

  private async startSegment(firstSeq: number): Promise<Segment> {
    await this.closeActiveHandle();
    const path = this.segmentPath(firstSeq);
    this.activeHandle = await open(path, 'wx');
    await fsyncDirectory(this.directory);
    const segment: Segment = { path, firstSeq, lastSeq: firstSeq - 1, size: 0 };
    this.segments.push(segment);
    this.rollOver = false;
    return segment;
  }

  /** A failed append may have left part of its frame; cut it off so the next entry does not follow garbage. */
  private async undoPartialAppend(segment: Segment): Promise<void> {
    try {
      await this.activeHandle!.truncate(segment.size);
      await this.activeHandle!.datasync();
    } catch (error) {
      this.unusable = new StorageError('io_error', `the redo log ${segment.path} may hold a partial entry and could not be repaired; reopen the database`, { cause: error });
    }
  }

  private async closeActiveHandle(): Promise<void> {
    const handle = this.activeHandle;
    this.activeHandle = null;
    await handle?.close();
  }

  writeSnapshot({ coversSeq, image, checksum }: StoredSnapshot): Promise<void> {
    let at = 0;
    return this.writeSnapshotFrom({ coversSeq, byteLength: image.length, read: (length) => image.subarray(at, (at += length)), checksum: () => checksum });
  }

  /**
   * Stores the image slice by slice as the source gives it (durable-database.ts reads sql.js's file
   * copy-on-write): the image is never in memory twice. The header, which holds the checksum known
   * only once every slice is read, goes in last, before the sync and the rename.
   */
  async writeSnapshotFrom(source: SnapshotSource): Promise<void> {
    this.check();
    const { coversSeq, byteLength } = source;
    const path = this.snapshotPath(coversSeq);
    const temporary = `${path}.tmp`;
    try {
      const handle = await open(temporary, 'w');
      this.snapshotHandles.add(handle);
      try {
        for (let at = 0; at < byteLength; at += SNAPSHOT_SLICE) {
          await writeAll(handle, source.read(Math.min(SNAPSHOT_SLICE, byteLength - at)), SNAPSHOT_HEADER + at);
        }
        const header = new Uint8Array(SNAPSHOT_HEADER);
        const view = new DataView(header.buffer);
        view.setUint32(0, SNAPSHOT_MAGIC, true);
        view.setUint32(4, SNAPSHOT_VERSION, true);
        view.setFloat64(8, coversSeq, true);
        view.setFloat64(16, byteLength, true);
        view.setUint32(24, source.checksum(), true);
        await writeAll(handle, header, 0);
        await runHook(this.hooks, 'snapshot:partial');
        await handle.sync();
      } finally {
        this.snapshotHandles.delete(handle);
        await handle.close();
      }
      await rename(temporary, path);
      await fsyncDirectory(this.directory);
    } catch (error) {
      await unlink(temporary).catch(() => undefined);
      throw toStorageError(error, 'writing a snapshot');
    }
    await runHook(this.hooks, 'snapshot:durable');
    try {
      for (const name of await readdir(this.directory)) {
        const seq = SNAPSHOT_NAME.exec(name)?.[1];
        if (seq !== undefined && Number(seq) < coversSeq) await unlink(join(this.directory, name));
      }
    } catch (error) {
      throw toStorageError(error, 'removing superseded snapshots');
    }
  }

  dropLogThrough(throughSeq: number): Promise<void> {
    return this.serial(async () => {
      await runHook(this.hooks, 'log:drop');
      this.check();
      try {
        const active = this.segments[this.segments.length - 1];
        const kept: Segment[] = [];
        for (const segment of this.segments) {
          if (segment.lastSeq > throughSeq) {
            kept.push(segment);
            continue;
          }
          if (segment === active) await this.closeActiveHandle();
          await unlink(segment.path);
        }
        const removed = kept.length !== this.segments.length;
        this.segments = kept;
        const last = kept[kept.length - 1];
        if (last && last === active && last.firstSeq <= throughSeq) this.rollOver = true;
        if (removed) await fsyncDirectory(this.directory);
      } catch (error) {
        throw toStorageError(error, 'dropping redo entries a snapshot covers');
      }
    });
  }

  async close(): Promise<void> {
    if (this.unusable?.code === 'closed') return;
    this.unusable = new StorageError('closed', 'the database is closed');
    // Not through the queue: a crash test may have left an operation hanging there.
    for (const handle of [this.activeHandle, ...this.snapshotHandles]) await handle?.close().catch(() => undefined);
    this.activeHandle = null;
    this.snapshotHandles.clear();
    await this.lock.release();
  }
}

/** Creates a database directory if needed, durably; returns its absolute path. */
export async function ensureDirectory(path: string): Promise<string> {
  const directory = resolve(path);
  const existed = await stat(directory).then(
    () => true,
    () => false,
  );
  try {
    await mkdir(directory, { recursive: true });
    if (!existed) await fsyncDirectory(dirname(directory));
  } catch (error) {
    throw toStorageError(error, `creating ${directory}`);
  }
  return directory;
}

/** Opens (creating if needed) a database directory and takes its lock. */
export async function openFilePersistence(options: FilePersistenceOptions): Promise<Persistence> {
  const directory = await ensureDirectory(options.directory);
  const lock: FileLock = options.lock ? { release: async () => undefined } : await acquireFileLock(join(directory, 'LOCK'));
  return new FilePersistence(directory, lock, options.hooks);
}
