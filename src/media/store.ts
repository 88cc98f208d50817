/**
 * Where media bytes live. The media component keeps only metadata in SQLite (the
 * sql.js image is held whole in memory, so bytes there would cost RAM and make
 * every snapshot larger); the bytes go to a MediaStore the host injects: files
 * under Node (src/node/media-files.ts), IndexedDB blobs of their own in the
 * browser (worker/media-idb.ts), memory in tests that need no persistence.
 *
 * Keys are chosen by the media component: lower-case letters and digits only, so
 * every backend can use them as file names or IndexedDB keys as they are.
 */
export interface MediaStore {
  /** Stores bytes under key; resolves only once they are durable (a crash after it keeps them). */
  put(key: string, bytes: Uint8Array): Promise<void>;
  /** The bytes under key, or undefined when there are none. */
  get(key: string): Promise<Uint8Array | undefined>;
  /** Removes key (no error if absent). */
  delete(key: string): Promise<void>;
  /** Every key held (and, for files, removes leftovers of puts a crash cut short); for the start-up sweep of orphans. */
  keys?(): Promise<string[]>;
}

/** A MediaStore in memory: for tests and hosts that keep nothing. */
export class MemoryMediaStore implements MediaStore {
  private readonly blobs = new Map<string, Uint8Array>();

  async put(key: string, bytes: Uint8Array): Promise<void> {
    this.blobs.set(key, new Uint8Array(bytes));
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    const bytes = this.blobs.get(key);
    return bytes && new Uint8Array(bytes);
  }

  async delete(key: string): Promise<void> {
    this.blobs.delete(key);
  }

  async keys(): Promise<string[]> {
    return [...this.blobs.keys()];
  }

  get size(): number {
    return this.blobs.size;
  }
}
