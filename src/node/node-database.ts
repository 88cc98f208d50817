import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { ComponentSchema, Database } from '../storage/database.ts';
import { openDurableDatabase } from '../storage/durable-database.ts';
import { acquireFileLock } from './file-lock.ts';
import { ensureDirectory, openFilePersistence } from './file-persistence.ts';
import { migrateToNative, NATIVE_FILE, type MigrationHooks } from './migrate-to-native.ts';
import { openNativeDatabase } from './native-database.ts';

/**
 * Which engine keeps the Node host's database: 'native' (the default) a SQLite file
 * through better-sqlite3, `<directory>/hearth.sqlite`; 'sqljs' the browser's engine,
 * sql.js in memory with its redo log and snapshots in files (file-persistence.ts).
 */
export type NodeStorage = 'native' | 'sqljs';

export interface OpenNodeDatabaseOptions {
  directory: string;
  schemas: ComponentSchema[];
  storage?: NodeStorage;
  /** Tests: interrupt the move of a sql.js folder to native SQLite (migrate-to-native.ts). */
  migrationHooks?: MigrationHooks;
  log?: (message: string) => void;
}

/**
 * Opens the database folder of a Node host, under its lock (`<directory>/LOCK`, held
 * until close). On native storage a folder of the sql.js backend is first migrated
 * into the SQLite file (migrate-to-native.ts).
 */
export async function openNodeDatabase(options: OpenNodeDatabaseOptions): Promise<Database> {
  const directory = await ensureDirectory(options.directory);
  if (options.storage === 'sqljs') {
    if (existsSync(join(directory, NATIVE_FILE))) {
      throw new Error(`the database in ${directory} has moved to native SQLite (${NATIVE_FILE}); the sql.js storage cannot open it`);
    }
    const { default: initSqlJs } = await import('sql.js');
    const persistence = await openFilePersistence({ directory });
    return openDurableDatabase({ sqlJs: await initSqlJs(), persistence, schemas: options.schemas });
  }
  const lock = await acquireFileLock(join(directory, 'LOCK'));
  try {
    await migrateToNative({ directory, lock, hooks: options.migrationHooks, log: options.log });
    return await openNativeDatabase({ file: join(directory, NATIVE_FILE), schemas: options.schemas, lock });
  } catch (error) {
    await lock.release();
    throw error;
  }
}
