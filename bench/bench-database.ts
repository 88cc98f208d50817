import initSqlJs from 'sql.js';
import type { ComponentSchema, Database } from '../src/storage/database.ts';
import { openSqlJsDatabase } from '../src/storage/sqljs-database.ts';

/** The database benchmarks run on, and a name for it in the printed figures. */
export async function openBenchDatabase(schemas: ComponentSchema[]): Promise<{ db: Database; kind: string; close(): Promise<void> }> {
  const db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas });
  return { db, kind: 'in-memory sql.js', close: () => db.close() };
}
