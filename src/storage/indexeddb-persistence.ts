import { wrap, type DBSchema, type IDBPDatabase } from 'idb';
import { StorageError, toStorageError } from './errors.ts';
import { runHook, type LogEntry, type Persistence, type PersistenceHooks, type SnapshotSource, type StoredSnapshot, type StoredState } from './persistence.ts';

/**
 * Persistence in IndexedDB, for browsers and workers (and Node tests on
 * fake-indexeddb). Three object stores:
 * - log: redo entries keyed by seq;
 * - chunks: snapshot images cut into chunks, keyed by [coversSeq, index];
 * - snapshots: one manifest per complete snapshot, keyed by coversSeq.
 * A snapshot becomes current when its manifest is written, in the same
 * transaction that deletes the previous one; chunks without a manifest are what
 * a crash mid-snapshot leaves and are deleted at the next load.
 *
 * Every transaction that must survive a crash asks for durability 'strict':
 * since Chrome 121 the default is 'relaxed', which fires 'complete' before the
 * data reaches the disk.
 */
interface HearthStorageSchema extends DBSchema {
  log: { key: number; value: Uint8Array };
  snapshots: { key: number; value: SnapshotManifest };
  chunks: { key: [number, number]; value: Uint8Array };
}

interface SnapshotManifest {
  coversSeq: number;
  byteLength: number;
  chunkCount: number;
  checksum: number;
}

export interface IndexedDbPersistenceOptions {
  /** IndexedDB database name; one Hearth database per name. */
  name: string;
  /** Default: globalThis.indexedDB. Tests pass a fresh fake-indexeddb IDBFactory. */
  indexedDB?: IDBFactory;
  /**
   * Web Locks, to refuse a second opener in another tab or worker. Default:
   * navigator.locks. Without it only a second opener in this same JS realm is refused.
   */
  locks?: LockManager | null;
  /** Snapshot chunk size (default 4 MiB). */
  chunkBytes?: number;
  /**
   * Chunks written per IndexedDB transaction (default 1). What a transaction writes is in the
   * tab's memory about three times over until it commits (the chunk, its structured clone, the
   * blob Chromium wraps a large value in): one 4 MiB chunk keeps a 100 MB snapshot's peak ~17 MB
   * lower than four, for a few more strict commits per snapshot (bench/snapshot-memory.bench.ts).
   */
  chunksPerTransaction?: number;
  hooks?: PersistenceHooks;
}

const SCHEMA_VERSION = 1;
const STRICT: IDBTransactionOptions = { durability: 'strict' };

const heldInThisRealm = new WeakMap<IDBFactory, Set<string>>();

function lockedError(name: string): StorageError {
  return new StorageError('locked', `the Hearth database "${name}" is already open in another tab or worker`);
}

async function acquireLock(factory: IDBFactory, name: string, locks: LockManager | null): Promise<() => void> {
  let held = heldInThisRealm.get(factory);
  if (!held) heldInThisRealm.set(factory, (held = new Set()));
  if (held.has(name)) throw lockedError(name);
  held.add(name);
  let releaseWebLock = (): void => undefined;
  if (locks) {
    try {
      releaseWebLock = await new Promise<() => void>((resolve, reject) => {
        locks
          .request(`hearth-storage:${name}`, { ifAvailable: true }, (lock) => {
            if (!lock) return reject(lockedError(name));
            // The lock is held until this promise settles, i.e. until close().
            return new Promise<void>((release) => resolve(() => release()));
          })
          .catch(reject);
      });
    } catch (error) {
      held.delete(name);
      throw error;
    }
  }
  return () => {
    held.delete(name);
    releaseWebLock();
  };
}

function keyRange(): typeof IDBKeyRange {
  // Looked up when used, not at import, so this module loads where IndexedDB is absent.
  return globalThis.IDBKeyRange;
}

async function openIdb(factory: IDBFactory, name: string): Promise<IDBPDatabase<HearthStorageSchema>> {
  const request = factory.open(name, SCHEMA_VERSION);
  request.addEventListener('upgradeneeded', () => {
    const db = request.result;
    db.createObjectStore('log');
    db.createObjectStore('snapshots');
    db.createObjectStore('chunks');
  });
  return (await wrap(request)) as unknown as IDBPDatabase<HearthStorageSchema>;
}

class IndexedDbPersistence implements Persistence {
  private loadedKeys: number[] = [];
  private unusable: StorageError | null = null;
  private readonly chunkBytes: number;
  private readonly chunksPerTransaction: number;
  private readonly hooks: PersistenceHooks | undefined;

  constructor(
    private readonly db: IDBPDatabase<HearthStorageSchema>,
    private readonly releaseLock: () => void,
    options: IndexedDbPersistenceOptions,
  ) {
    this.chunkBytes = options.chunkBytes ?? 4 << 20;
    this.chunksPerTransaction = options.chunksPerTransaction ?? 1;
    this.hooks = options.hooks;
    // The browser closes the connection when site data is cleared; someone
    // deleting or upgrading the database sends versionchange. Either way, stop.
    db.addEventListener('close', () => this.markUnusable('the browser closed the IndexedDB connection (site data cleared?)'));
    db.addEventListener('versionchange', () => {
      this.markUnusable('another context is deleting or upgrading this IndexedDB database');
      db.close();
    });
  }

  private markUnusable(reason: string): void {
    this.unusable ??= new StorageError('io_error', reason);
  }

  private check(): void {
    if (this.unusable) throw this.unusable;
  }

  async load(): Promise<StoredState> {
    this.check();
    try {
      const tx = this.db.transaction(['log', 'snapshots', 'chunks'], 'readonly');
      const manifests = await tx.objectStore('snapshots').getAll();
      const newest = manifests.reduce<SnapshotManifest | null>((a, b) => (a && a.coversSeq > b.coversSeq ? a : b), null);
      let snapshot: StoredSnapshot | null = null;
      if (newest) {
        snapshot = { coversSeq: newest.coversSeq, image: await readChunks(tx.objectStore('chunks'), newest), checksum: newest.checksum };
      }
      const logStore = tx.objectStore('log');
      const [keys, values] = await Promise.all([logStore.getAllKeys(), logStore.getAll()]);
      await tx.done;
      this.loadedKeys = keys;
      await this.removeOrphans(newest?.coversSeq ?? null);
      return { snapshot, log: keys.map((seq, i) => ({ seq, bytes: values[i]! })) };
    } catch (error) {
      throw toStorageError(error, 'loading the database from IndexedDB');
    }
  }

  /** Deletes chunks a crash mid-snapshot left without a manifest, and anything older than the current snapshot. */
  private async removeOrphans(current: number | null): Promise<void> {
    const ranges = keyRange();
    const tx = this.db.transaction(['snapshots', 'chunks'], 'readwrite');
    const chunks = tx.objectStore('chunks');
    const work: Promise<unknown>[] = [tx.done];
    if (current === null) {
      work.push(chunks.clear());
    } else {
      work.push(tx.objectStore('snapshots').delete(ranges.upperBound(current, true)));
      work.push(chunks.delete(ranges.upperBound([current], true)));
      work.push(chunks.delete(ranges.lowerBound([current + 1])));
    }
    await Promise.all(work);
  }

  async discardLogFrom(index: number): Promise<void> {
    this.check();
    const key = this.loadedKeys[index];
    if (key === undefined) return;
    try {
      const tx = this.db.transaction('log', 'readwrite', STRICT);
      await Promise.all([tx.store.delete(keyRange().lowerBound(key)), tx.done]);
    } catch (error) {
      throw toStorageError(error, 'discarding a torn redo log tail');
    }
  }

  async append(entry: LogEntry): Promise<void> {
    await runHook(this.hooks, 'append:start');
    this.check();
    try {
      const tx = this.db.transaction('log', 'readwrite', STRICT);
      await Promise.all([tx.store.put(entry.bytes, entry.seq), tx.done]);
    } catch (error) {
      throw toStorageError(error, 'appending to the redo log');
    }
    await runHook(this.hooks, 'append:durable');
  }

  writeSnapshot({ coversSeq, image, checksum }: StoredSnapshot): Promise<void> {
    let at = 0;
    return this.writeSnapshotFrom({
      coversSeq,
      byteLength: image.length,
      // slice, not subarray: structured clone copies a view's whole underlying buffer.
      read: (length) => image.slice(at, (at += length)),
      checksum: () => checksum,
    });
  }

  async writeSnapshotFrom(source: SnapshotSource): Promise<void> {
    this.check();
    const { coversSeq, byteLength } = source;
    const chunkCount = Math.ceil(byteLength / this.chunkBytes);
    try {
      for (let first = 0; first < chunkCount; first += this.chunksPerTransaction) {
        const tx = this.db.transaction('chunks', 'readwrite', STRICT);
        const work: Promise<unknown>[] = [tx.done];
        for (let i = first; i < Math.min(chunkCount, first + this.chunksPerTransaction); i++) {
          work.push(tx.store.put(source.read(this.chunkBytes), [coversSeq, i]));
        }
        await Promise.all(work);
        await runHook(this.hooks, 'snapshot:partial');
        this.check();
      }
      const manifest: SnapshotManifest = { coversSeq, byteLength, chunkCount, checksum: source.checksum() };
      const ranges = keyRange();
      const tx = this.db.transaction(['snapshots', 'chunks'], 'readwrite', STRICT);
      await Promise.all([
        tx.objectStore('snapshots').put(manifest, coversSeq),
        tx.objectStore('snapshots').delete(ranges.upperBound(coversSeq, true)),
        tx.objectStore('chunks').delete(ranges.upperBound([coversSeq], true)),
        tx.done,
      ]);
    } catch (error) {
      // Give back the space the partial snapshot took (a full disk is the likely cause).
      await this.deleteChunks(coversSeq).catch(() => undefined);
      throw toStorageError(error, 'writing a snapshot');
    }
    await runHook(this.hooks, 'snapshot:durable');
  }

  private async deleteChunks(coversSeq: number): Promise<void> {
    if (this.unusable) return;
    const tx = this.db.transaction('chunks', 'readwrite');
    await Promise.all([tx.store.delete(keyRange().bound([coversSeq], [coversSeq, Infinity])), tx.done]);
  }

  async dropLogThrough(throughSeq: number): Promise<void> {
    await runHook(this.hooks, 'log:drop');
    this.check();
    try {
      // Default durability: if this is lost, the entries are skipped at the next load.
      const tx = this.db.transaction('log', 'readwrite');
      await Promise.all([tx.store.delete(keyRange().upperBound(throughSeq)), tx.done]);
    } catch (error) {
      throw toStorageError(error, 'dropping redo entries a snapshot covers');
    }
  }

  async close(): Promise<void> {
    this.markUnusable('closed');
    this.db.close();
    this.releaseLock();
  }
}

/**
 * The snapshot's chunks, one at a time, straight into the image: getAll() would hold every
 * chunk (and Chromium's copies of them) beside the image, ~3× the database at open.
 */
async function readChunks(store: { get(key: [number, number]): Promise<Uint8Array | undefined> }, manifest: SnapshotManifest): Promise<Uint8Array> {
  const image = new Uint8Array(manifest.byteLength);
  let at = 0;
  let found = 0;
  for (let i = 0; i < manifest.chunkCount; i++) {
    const chunk = await store.get([manifest.coversSeq, i]);
    if (!chunk) break;
    found++;
    if (at + chunk.length > image.length) break;
    image.set(chunk, at);
    at += chunk.length;
  }
  if (found !== manifest.chunkCount || at !== manifest.byteLength) {
    throw new StorageError('corrupt', `snapshot ${manifest.coversSeq} is incomplete: ${found}/${manifest.chunkCount} chunks, ${at}/${manifest.byteLength} bytes`);
  }
  return image;
}

/**
 * Opens (creating if needed) the IndexedDB database `name` and takes its lock.
 * Rejects with StorageError 'locked' if another tab, worker or opener in this
 * realm has it.
 */
export async function openIndexedDbPersistence(options: IndexedDbPersistenceOptions): Promise<Persistence> {
  const factory = options.indexedDB ?? globalThis.indexedDB;
  if (!factory) throw new StorageError('io_error', 'IndexedDB is not available in this context');
  const locks = options.locks === undefined ? ((globalThis as { navigator?: { locks?: LockManager } }).navigator?.locks ?? null) : options.locks;
  const release = await acquireLock(factory, options.name, locks);
  try {
    return new IndexedDbPersistence(await openIdb(factory, options.name), release, options);
  } catch (error) {
    release();
    throw toStorageError(error, `opening IndexedDB database "${options.name}"`);
  }
}
