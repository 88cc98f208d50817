import initSqlJs from 'sql.js';
import sqlWasmUrl from 'sql.js/dist/sql-wasm-browser.wasm?url';
import { homeserverSchemas } from '../src/homeserver.ts';
import type { Database } from '../src/storage/database.ts';
import { openDurableDatabase } from '../src/storage/durable-database.ts';
import { StorageError } from '../src/storage/errors.ts';
import { openIndexedDbPersistence } from '../src/storage/indexeddb-persistence.ts';

/** The IndexedDB name the homeserver's data lives under. */
export const DATABASE_NAME = 'hearth';

/**
 * How long to wait for the previous leader's Worker to let go of the storage
 * lock: when a leader tab closes, its page's leader lock and its Worker's
 * storage lock are released in no set order, so the next leader may get here
 * first. Past this, another opener really holds it: say so.
 */
const LOCK_WAIT_MS = 10_000;

/** Opens the homeserver's database inside the Worker: sql.js, made durable in IndexedDB (src/storage). */
export async function openHomeserverDatabase(): Promise<Database> {
  // sql.js looks for its wasm next to the script unless told; Vite gives the built URL.
  const sqlJs = await initSqlJs({ locateFile: () => sqlWasmUrl });
  const deadline = performance.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      const persistence = await openIndexedDbPersistence({ name: DATABASE_NAME });
      return await openDurableDatabase({ sqlJs, schemas: homeserverSchemas, persistence });
    } catch (error) {
      if (!(error instanceof StorageError && error.code === 'locked') || performance.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}
