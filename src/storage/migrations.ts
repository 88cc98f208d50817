import type { ComponentSchema, WriteTransaction } from './database.ts';

/**
 * Applies each component's numbered migrations that the database has not yet
 * recorded, in order, inside the caller's transaction.
 */
export function applyMigrations(tx: WriteTransaction, schemas: ComponentSchema[], now: number): void {
  // Checked rather than CREATE … IF NOT EXISTS: every statement run is written to
  // the redo log, and an open with nothing to migrate should append nothing.
  const exists = tx.get("SELECT 1 AS found FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'");
  if (!exists) tx.run(`CREATE TABLE schema_migrations (
    component TEXT NOT NULL,
    version INTEGER NOT NULL,
    description TEXT NOT NULL,
    applied_ts INTEGER NOT NULL,
    PRIMARY KEY (component, version)
  )`);
  for (const schema of schemas) {
    const row = tx.get<{ v: number | null }>('SELECT MAX(version) AS v FROM schema_migrations WHERE component = ?', [schema.component]);
    const current = row?.v ?? 0;
    const pending = [...schema.migrations].sort((a, b) => a.version - b.version).filter((m) => m.version > current);
    for (const migration of pending) {
      migration.up(tx);
      tx.run('INSERT INTO schema_migrations (component, version, description, applied_ts) VALUES (?, ?, ?, ?)', [
        schema.component, migration.version, migration.description, now,
      ]);
    }
  }
}
