/**
 * Media bytes in the browser: IndexedDB `hearth-media`, one Blob per key, in a
 * database of their own, never inside the SQLite image (sql.js holds that whole in
 * memory and snapshots it whole; Chromium keeps large Blob values as files of their
 * own beside the IndexedDB data). A put commits with `durability: 'strict'` (Chrome
 * 121+ defaults to relaxed) and resolves only once the transaction completes.
 */
import { openDB, type IDBPDatabase } from 'idb';
import type { MediaStore } from '../src/media/store.ts';
import { toStorageError } from '../src/storage/errors.ts';

export const MEDIA_DATABASE = 'hearth-media';
export const MEDIA_OBJECT_STORE = 'blobs';

export class IdbMediaStore implements MediaStore {
  constructor(private readonly db: IDBPDatabase) {}

  async put(key: string, bytes: Uint8Array): Promise<void> {
    const tx = this.db.transaction(MEDIA_OBJECT_STORE, 'readwrite', { durability: 'strict' });
    try {
      await Promise.all([tx.store.put(new Blob([bytes as Uint8Array<ArrayBuffer>]), key), tx.done]);
    } catch (error) {
      // A full quota is the browser's QuotaExceededError: 507 M_RESOURCE_LIMIT_EXCEEDED, as for the database's writes.
      throw toStorageError(error, 'storing an upload');
    }
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    const value: unknown = await this.db.get(MEDIA_OBJECT_STORE, key);
    if (value === undefined) return undefined;
    return new Uint8Array(await (value as Blob).arrayBuffer());
  }

  /** The stored Blob itself, its size known without reading it (an export). */
  async blob(key: string): Promise<Blob | undefined> {
    return (await this.db.get(MEDIA_OBJECT_STORE, key)) as Blob | undefined;
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
  return new IdbMediaStore(db);
}
