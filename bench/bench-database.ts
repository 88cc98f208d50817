import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import initSqlJs from 'sql.js';
import { openFilePersistence } from '../src/node/file-persistence.ts';
import type { ComponentSchema, Database } from '../src/storage/database.ts';
import { openDurableDatabase } from '../src/storage/durable-database.ts';

/**
 * The database benchmarks run on: durable, on files with fdatasync, as the Node
 * host runs; so every figure includes making each commit durable.
 */
export async function openBenchDatabase(schemas: ComponentSchema[]): Promise<{ db: Database; kind: string; close(): Promise<void> }> {
  const directory = await mkdtemp(join(tmpdir(), 'hearth-bench-'));
  const db = await openDurableDatabase({ sqlJs: await initSqlJs(), persistence: await openFilePersistence({ directory }), schemas });
  return {
    db,
    kind: 'durable files (fdatasync per commit)',
    close: async () => {
      await db.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
