import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { wrap, type IDBPDatabase } from 'idb';
import { describe, expect, it } from 'vitest';
import { openIndexedDbPersistence } from './indexeddb-persistence.ts';
import type { PersistenceHooks } from './persistence.ts';

const entry = (seq: number): { seq: number; bytes: Uint8Array } => ({ seq, bytes: new Uint8Array([seq]) });

async function chunkKeys(factory: IDBFactory, name: string): Promise<IDBValidKey[]> {
  const db = (await wrap(factory.open(name))) as unknown as IDBPDatabase;
  const keys = await db.getAllKeys('chunks');
  db.close();
  return keys;
}

/** Just enough of the Web Locks API: exclusive locks with ifAvailable, held until the callback's promise settles. */
class FakeLockManager {
  readonly held = new Set<string>();
  private onRelease: Array<() => void> = [];
  /** Resolves when a held lock is next let go. */
  released(): Promise<void> {
    return new Promise((resolve) => this.onRelease.push(resolve));
  }

  async request(name: string, options: { ifAvailable?: boolean }, callback: (lock: { name: string } | null) => unknown): Promise<unknown> {
    if (this.held.has(name)) {
      if (!options.ifAvailable) throw new Error('waiting is not faked');
      return callback(null);
    }
    this.held.add(name);
    try {
      return await callback({ name });
    } finally {
      this.held.delete(name);
      for (const resolve of this.onRelease.splice(0)) resolve();
    }
  }
}

describe('IndexedDB persistence', () => {
  it('deletes the chunks an interrupted snapshot left, and keeps the current snapshot', async () => {
    const factory = new IDBFactory();
    let halt = false;
    let halted!: () => void;
    const stopped = new Promise<void>((resolve) => (halted = resolve));
    const hooks: PersistenceHooks = {
      at(step) {
        if (!halt || step !== 'snapshot:partial') return;
        halted();
        return new Promise(() => undefined);
      },
    };
    const options = { name: 'orphans', indexedDB: factory, locks: null, chunkBytes: 4, chunksPerTransaction: 1, hooks };
    const first = await openIndexedDbPersistence(options);
    await first.load();
    await first.writeSnapshot({ coversSeq: 1, image: new Uint8Array(10).fill(1), checksum: 11 });
    halt = true;
    void first.writeSnapshot({ coversSeq: 2, image: new Uint8Array(10).fill(2), checksum: 22 });
    await stopped; // the first chunk is written; the process "dies" there
    await first.close();
    expect(await chunkKeys(factory, 'orphans')).toEqual([[1, 0], [1, 1], [1, 2], [2, 0]]);

    halt = false;
    const second = await openIndexedDbPersistence(options);
    const loaded = await second.load();
    expect(loaded.snapshot).toEqual({ coversSeq: 1, image: new Uint8Array(10).fill(1), checksum: 11 });
    await second.close();
    expect(await chunkKeys(factory, 'orphans')).toEqual([[1, 0], [1, 1], [1, 2]]);
  });

  it('removes the chunks of a snapshot that failed part-way', async () => {
    const factory = new IDBFactory();
    let chunkTransactions = 0;
    const hooks: PersistenceHooks = {
      at(step) {
        if (step === 'snapshot:partial' && ++chunkTransactions === 2) throw new DOMException('full', 'QuotaExceededError');
      },
    };
    const persistence = await openIndexedDbPersistence({ name: 'full', indexedDB: factory, locks: null, chunkBytes: 4, chunksPerTransaction: 1, hooks });
    await persistence.load();
    await expect(persistence.writeSnapshot({ coversSeq: 5, image: new Uint8Array(12), checksum: 0 })).rejects.toMatchObject({ code: 'quota_exceeded' });
    await persistence.close();
    expect(await chunkKeys(factory, 'full')).toEqual([]);
  });

  it('fails writes with io_error once another context deletes the database', async () => {
    const factory = new IDBFactory();
    const persistence = await openIndexedDbPersistence({ name: 'deleted', indexedDB: factory, locks: null });
    await persistence.load();
    await persistence.append(entry(1));
    await wrap(factory.deleteDatabase('deleted'));
    await expect(persistence.append(entry(2))).rejects.toMatchObject({ name: 'StorageError', code: 'io_error' });
    await persistence.close();
  });

  it('holds a Web Lock from open to close, so a second opener anywhere in the origin is refused', async () => {
    const locks = new FakeLockManager();
    const options = { name: 'locked', indexedDB: new IDBFactory(), locks: locks as unknown as LockManager };
    const first = await openIndexedDbPersistence(options);
    expect(locks.held).toEqual(new Set(['hearth-storage:locked']));
    // A different realm (another tab) has its own IDBFactory but shares the origin's locks.
    await expect(openIndexedDbPersistence({ ...options, indexedDB: new IDBFactory() })).rejects.toMatchObject({ code: 'locked' });
    const released = locks.released();
    await first.close();
    await released;
    expect(locks.held.size).toBe(0);
    const second = await openIndexedDbPersistence(options);
    await second.close();
  });
});
