import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import initSqlJs from 'sql.js';
import { openFilePersistence } from '../src/node/file-persistence.ts';
import { openNativeDatabase } from '../src/node/native-database.ts';
import type { ComponentSchema, Database } from '../src/storage/database.ts';
import { openDurableDatabase } from '../src/storage/durable-database.ts';

/**
 * The database benchmarks run on: durable, as the Node host runs, so every figure
 * includes making each commit durable. The host's engine, native SQLite (WAL, fsync
 * per commit), unless HEARTH_BENCH_STORAGE=sqljs asks for sql.js on files (the engine
 * of the browser's redo log and of `serve --storage sqljs`).
 */
export async function openBenchDatabase(schemas: ComponentSchema[], keepIn?: string): Promise<{ db: Database; kind: string; close(): Promise<void> }> {
  // Given a folder, the database lives there and outlives close (a peer that restarts); otherwise in a temporary one.
  const directory = keepIn ?? (await mkdtemp(join(tmpdir(), 'hearth-bench-')));
  const sqljs = process.env.HEARTH_BENCH_STORAGE === 'sqljs';
  const db = sqljs
    ? await openDurableDatabase({ sqlJs: await initSqlJs(), persistence: await openFilePersistence({ directory }), schemas })
    : await openNativeDatabase({ file: join(directory, 'hearth.sqlite'), schemas });
  return {
    db,
    kind: sqljs ? 'sql.js on files (fdatasync per commit)' : 'native SQLite (WAL, synchronous=FULL)',
    close: async () => {
      await db.close();
      if (!keepIn) await rm(directory, { recursive: true, force: true });
    },
  };
}
