/**
 * The page's libp2p peer store, kept in IndexedDB (`hearth-peers`), so the next
 * leader tab's node redials the peers this origin knew (createP2PNode redials
 * peers tagged as known), not only the bootstrap list: a peer found by discovery
 * stays reachable after a hand-over even when no bootstrap peer is up.
 *
 * The records are few (a handful per peer), so the store is read whole at start
 * and served from memory; each change is written through, in order. Only the
 * leader tab runs a node, so one writer at a time. Losing the last writes to a
 * closing tab costs a redial, never data.
 */
import { MemoryDatastore } from 'datastore-core';
import { openDB, type IDBPDatabase } from 'idb';
import { Key } from 'interface-datastore';

export const PEER_DATABASE = 'hearth-peers';
export const PEER_STORE = 'records';
const DATABASE = PEER_DATABASE;
const STORE = PEER_STORE;

class WriteThroughDatastore extends MemoryDatastore {
  private writes: Promise<void> = Promise.resolve();

  constructor(private readonly db: IDBPDatabase, private readonly log: (message: string, error?: unknown) => void) {
    super();
  }

  override put(key: Key, value: Uint8Array, options?: { signal?: AbortSignal }): Key {
    super.put(key, value, options);
    const copy = new Uint8Array(value);
    this.write(() => this.db.put(STORE, copy, key.toString()));
    return key;
  }

  override delete(key: Key, options?: { signal?: AbortSignal }): void {
    super.delete(key, options);
    this.write(() => this.db.delete(STORE, key.toString()));
  }

  /** Resolves once every change so far is in IndexedDB (for tests and a clean stop). */
  flushed(): Promise<void> {
    return this.writes;
  }

  private write(operation: () => Promise<unknown>): void {
    this.writes = this.writes.then(operation).then(
      () => {},
      (error: unknown) => this.log('could not store a peer record', error),
    );
  }

  close(): Promise<void> {
    return this.flushed().then(() => this.db.close());
  }
}

export type PeerDatastore = WriteThroughDatastore;

export async function openPeerDatastore(log: (message: string, error?: unknown) => void = () => {}): Promise<PeerDatastore> {
  const db = await openDB(DATABASE, 1, {
    upgrade(database) {
      database.createObjectStore(STORE);
    },
  });
  const datastore = new WriteThroughDatastore(db, log);
  const tx = db.transaction(STORE);
  for (let cursor = await tx.store.openCursor(); cursor; cursor = await cursor.continue()) {
    // Loaded into memory only: super.put, not a write back.
    MemoryDatastore.prototype.put.call(datastore, new Key(String(cursor.key)), new Uint8Array(cursor.value as Uint8Array));
  }
  await tx.done;
  return datastore;
}
