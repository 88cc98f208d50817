/**
 * Media bytes in the browser: IndexedDB `hearth-media`, one Blob per key (an ArrayBuffer where the
 * engine refuses Blobs: storesBlobs), in a database of their own, never inside the SQLite image (sql.js
 * holds that whole in memory and snapshots it whole; Chromium keeps large Blob values as files of their
 * own beside the IndexedDB data). A put commits with `durability: 'strict'` (Chrome 121+ defaults to
 * relaxed) and resolves only once the transaction completes.
 */
import { openDB, type IDBPDatabase } from 'idb';
import type { MediaStore } from '../src/media/store.ts';
import { toStorageError } from '../src/storage/errors.ts';

export const MEDIA_DATABASE = 'hearth-media';
export const MEDIA_OBJECT_STORE = 'blobs';

export class IdbMediaStore implements MediaStore {
  /** `storesBlobs` false: WebKit's ephemeral sessions, where each file is kept as an ArrayBuffer (openIdbMediaStore). */
  constructor(
    private readonly db: IDBPDatabase,
    private readonly storesBlobs = true,
  ) {}

  async put(key: string, bytes: Uint8Array): Promise<void> {
    const tx = this.db.transaction(MEDIA_OBJECT_STORE, 'readwrite', { durability: 'strict' });
    const value = this.storesBlobs ? new Blob([bytes as Uint8Array<ArrayBuffer>]) : bytes.slice().buffer;
    try {
      await Promise.all([tx.store.put(value, key), tx.done]);
    } catch (error) {
      // A full quota is the browser's QuotaExceededError: 507 M_RESOURCE_LIMIT_EXCEEDED, as for the database's writes.
      throw toStorageError(error, 'storing an upload');
    }
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    const value: unknown = await this.db.get(MEDIA_OBJECT_STORE, key);
    if (value === undefined) return undefined;
    return new Uint8Array(value instanceof Blob ? await value.arrayBuffer() : (value as ArrayBuffer));
  }

  /** The stored file as a Blob, its size known without reading it (an export). */
  async blob(key: string): Promise<Blob | undefined> {
    const value: unknown = await this.db.get(MEDIA_OBJECT_STORE, key);
    if (value === undefined || value instanceof Blob) return value;
    return new Blob([value as ArrayBuffer]);
  }

  async delete(key: string): Promise<void> {
    const tx = this.db.transaction(MEDIA_OBJECT_STORE, 'readwrite', { durability: 'strict' });
    await Promise.all([tx.store.delete(key), tx.done]);
  }

  async keys(): Promise<string[]> {
    return (await this.db.getAllKeys(MEDIA_OBJECT_STORE)).map(String);
  }

  close(): void {
    this.db.close();
  }
}

export async function openIdbMediaStore(name = MEDIA_DATABASE): Promise<IdbMediaStore> {
  const db = await openDB(name, 1, {
    upgrade(database) {
      database.createObjectStore(MEDIA_OBJECT_STORE);
    },
  });
  return new IdbMediaStore(db, await storesBlobs(db, MEDIA_OBJECT_STORE));
}

/**
 * Whether IndexedDB here takes Blob values. WebKit refuses them in an ephemeral session (Safari's private
 * windows; the MiniBrowser the tests drive): "Error preparing Blob/File data to be stored in object
 * store". Asked once, with a put that is then aborted, so nothing is written either way.
 */
export async function storesBlobs(db: IDBPDatabase, store: string): Promise<boolean> {
  const tx = db.transaction(store, 'readwrite');
  const done = tx.done.catch(() => {});
  try {
    await tx.store.put(new Blob(['probe']), '\u0000blob-probe');
    tx.abort();
    return true;
  } catch {
    return false;
  } finally {
    await done;
  }
}
