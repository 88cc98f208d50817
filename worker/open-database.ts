import initSqlJs from 'sql.js';
import sqlWasmUrl from 'sql.js/dist/sql-wasm-browser.wasm?url';
import { homeserverSchemas } from '../src/homeserver.ts';
import type { Database } from '../src/storage/database.ts';
import { openSqlJsDatabase } from '../src/storage/sqljs-database.ts';

/** The IndexedDB name the homeserver's data lives under. */
export const DATABASE_NAME = 'hearth';

/**
 * Opens the homeserver's database inside the Worker.
 *
 * TEMPORARY: in memory until durable storage (src/storage/durable-database.ts,
 * on the `storage` branch) lands on main; then this becomes
 * `openDurableDatabase({ sqlJs, schemas, persistence: await openIndexedDbPersistence({ name: DATABASE_NAME }) })`
 * and the persistence tests in test/e2e/persistence.test.ts pass.
 */
/** Whether data outlives the Worker; the persistence tests expect to fail while this is false. */
export const DURABLE_STORAGE = false as boolean;

export async function openHomeserverDatabase(): Promise<Database> {
  // sql.js looks for its wasm next to the script unless told; Vite gives the built URL.
  const sqlJs = await initSqlJs({ locateFile: () => sqlWasmUrl });
  return openSqlJsDatabase({ sqlJs, schemas: homeserverSchemas });
}
