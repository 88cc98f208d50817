import { openDB } from 'idb';

const DATABASE = 'hearth-identity';
const STORE = 'identity';
const SEED_KEY = 'ed25519-seed';

const openIdentity = () =>
  openDB(DATABASE, 1, {
    upgrade(database) {
      database.createObjectStore(STORE);
    },
  });

/**
 * The server's ed25519 seed: created at random on first start and kept in
 * IndexedDB, since the server name is derived from it (ARCHITECTURE.md, Identity)
 * and must never change while the data it signed lives on. Only the leader's
 * worker calls this, so two tabs never race to create it; the read-or-create
 * still runs in one transaction to be safe.
 */
export async function loadOrCreateSeed(): Promise<Uint8Array> {
  const db = await openIdentity();
  try {
    const tx = db.transaction(STORE, 'readwrite', { durability: 'strict' });
    const stored = (await tx.store.get(SEED_KEY)) as Uint8Array | undefined;
    if (stored && stored.byteLength === 32) {
      await tx.done;
      return new Uint8Array(stored);
    }
    const seed = crypto.getRandomValues(new Uint8Array(32));
    await tx.store.put(seed, SEED_KEY);
    await tx.done;
    return seed;
  } finally {
    db.close();
  }
}

/** Replaces the seed (an import, worker/portable.ts): the server becomes the archive's at the next start. */
export async function storeSeed(seed: Uint8Array): Promise<void> {
  const db = await openIdentity();
  try {
    const tx = db.transaction(STORE, 'readwrite', { durability: 'strict' });
    await Promise.all([tx.store.put(new Uint8Array(seed), SEED_KEY), tx.done]);
  } finally {
    db.close();
  }
}
