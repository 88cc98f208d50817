import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { wrap } from 'idb';
import { mkdtemp, readdir, readFile, rm, truncate, writeFile, appendFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openFilePersistence } from '../../../src/node/file-persistence.ts';
import { openIndexedDbPersistence } from '../../../src/storage/indexeddb-persistence.ts';
import type { Persistence, PersistenceHooks } from '../../../src/storage/persistence.ts';

/** One backend's storage, reopenable as often as a test needs, plus ways to damage it as a crash would. */
export interface BackendFixture {
  open(hooks?: PersistenceHooks): Promise<Persistence>;
  /** Cuts the newest log entry short by `bytes`, as a crash mid-write would. Call while closed. */
  tearLastEntry(bytes: number): Promise<void>;
  /** Flips one byte in the log entry `fromEnd` places before the newest (0 = newest). Call while closed. */
  damageEntry(fromEnd: number): Promise<void>;
  /** Adds bytes after the newest entry, as a crash after extending a file but before writing it would. */
  appendGarbage?(bytes: Uint8Array): Promise<void>;
  /** The folder the files backend keeps its files in (none for IndexedDB). */
  directory?: string;
  cleanup(): Promise<void>;
}

export interface BackendKind {
  name: string;
  create(): Promise<BackendFixture>;
}

function flip(bytes: Uint8Array, at: number): Uint8Array {
  const copy = bytes.slice();
  copy[at]! ^= 0x55;
  return copy;
}

export const indexedDbBackend: BackendKind = {
  name: 'IndexedDB (fake-indexeddb)',
  async create() {
    const factory = new IDBFactory();
    const name = 'hearth-test';
    const withLog = async (change: (keys: number[], values: Uint8Array[]) => Array<[number, Uint8Array]>): Promise<void> => {
      const db = (await wrap(factory.open(name))) as unknown as import('idb').IDBPDatabase;
      const tx = db.transaction('log', 'readwrite');
      const keys = (await tx.store.getAllKeys()) as number[];
      const values = (await tx.store.getAll()) as Uint8Array[];
      for (const [key, value] of change(keys, values)) await tx.store.put(value, key);
      await tx.done;
      db.close();
    };
    return {
      // Small chunks so a snapshot spans several IndexedDB transactions and can be interrupted between them.
      open: (hooks) => openIndexedDbPersistence({ name, indexedDB: factory, locks: null, chunkBytes: 8192, chunksPerTransaction: 2, hooks }),
      tearLastEntry: (bytes) => withLog((keys, values) => [[keys.at(-1)!, values.at(-1)!.slice(0, -bytes)]]),
      damageEntry: (fromEnd) => withLog((keys, values) => {
        const i = keys.length - 1 - fromEnd;
        return [[keys[i]!, flip(values[i]!, Math.floor(values[i]!.length / 2))]];
      }),
      cleanup: async () => undefined,
    };
  },
};

export const fileBackend: BackendKind = {
  name: 'files',
  async create() {
    const directory = await mkdtemp(join(tmpdir(), 'hearth-storage-'));
    const lastSegment = async (): Promise<string> => {
      const names = (await readdir(directory)).filter((n) => n.startsWith('log-')).sort();
      return join(directory, names.at(-1)!);
    };
    /** Byte offsets of the frames in the newest segment. */
    const frames = async (path: string): Promise<number[]> => {
      const data = await readFile(path);
      const offsets: number[] = [];
      for (let at = 0; at + 12 <= data.length; at += 12 + data.readUInt32LE(at)) offsets.push(at);
      return offsets;
    };
    return {
      directory,
      open: (hooks) => openFilePersistence({ directory, hooks }),
      async tearLastEntry(bytes) {
        const path = await lastSegment();
        const data = await readFile(path);
        await truncate(path, data.length - bytes);
      },
      async damageEntry(fromEnd) {
        const path = await lastSegment();
        const offsets = await frames(path);
        const data = await readFile(path);
        const at = offsets[offsets.length - 1 - fromEnd]!;
        await writeFile(path, flip(data, at + 12 + Math.floor(data.readUInt32LE(at) / 2)));
      },
      async appendGarbage(bytes) {
        await appendFile(await lastSegment(), bytes);
      },
      cleanup: () => rm(directory, { recursive: true, force: true }),
    };
  },
};

export const backends = [indexedDbBackend, fileBackend];
