import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import initSqlJs from 'sql.js';
import { homeserverSchemas } from '../../src/homeserver.ts';
import { openNativeDatabase } from '../../src/node/native-database.ts';
import type { Database } from '../../src/storage/database.ts';
import { openSqlJsDatabase } from '../../src/storage/sqljs-database.ts';

/**
 * A test homeserver's database: in-memory sql.js, or with HEARTH_TEST_STORAGE=native a
 * native SQLite file in a temporary folder (the Node host's engine), to run a whole suite
 * on it. `cleanup` removes that folder once the database is closed.
 */
export async function openTestDatabase(): Promise<{ database: Database; cleanup: () => Promise<void> }> {
  if (process.env['HEARTH_TEST_STORAGE'] !== 'native') {
    return { database: await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: homeserverSchemas }), cleanup: async () => undefined };
  }
  const directory = await mkdtemp(join(tmpdir(), 'hearth-test-native-'));
  const database = await openNativeDatabase({ file: join(directory, 'hearth.sqlite'), schemas: homeserverSchemas });
  return { database, cleanup: () => rm(directory, { recursive: true, force: true }) };
}
