import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import initSqlJs from 'sql.js';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { homeserverSchemas } from '../../src/homeserver.ts';
import type { WriteTransaction } from '../../src/storage/database.ts';

// Each component owns its tables (issue 37): only code in the folder whose schema creates a table
// may name it in SQL. Others ask that component through its API. Ownership is read from the
// migrations themselves, run on an empty database; the statements are every string and template
// literal in src/ and worker/ outside tests.
const ROOT = new URL('../../', import.meta.url).pathname;

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

/** The text of every string and template literal in a file (a template's substitutions as `?`), with its line. */
function literals(file: string): Array<{ text: string; line: number }> {
  const source = ts.createSourceFile(file, readFileSync(join(ROOT, file), 'utf8'), ts.ScriptTarget.Latest, true);
  const found: Array<{ text: string; line: number }> = [];
  const visit = (node: ts.Node): void => {
    const at = () => source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) found.push({ text: node.text, line: at() });
    else if (ts.isTemplateExpression(node)) found.push({ text: node.head.text + node.templateSpans.map((span) => `?${span.literal.text}`).join(''), line: at() });
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Table names a statement touches: after FROM, JOIN, INTO, UPDATE, TABLE, and an index's ON (SQL keywords in capitals, as this code writes them). */
function tablesNamed(sql: string): string[] {
  const names: string[] = [];
  for (const match of sql.matchAll(/\b(?:FROM|JOIN|INTO|UPDATE|TABLE(?: IF NOT EXISTS| IF EXISTS)?)\s+([A-Za-z_][A-Za-z0-9_]*)/g)) names.push(match[1]!);
  for (const match of sql.matchAll(/\bON\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(/g)) names.push(match[1]!);
  return names;
}

/** Which component's migrations create each table, and the folder under src/ that defines that schema. */
async function tableOwners(): Promise<Map<string, { component: string; folder: string }>> {
  const SQL = await initSqlJs();
  const db = new SQL.Database();
  const tx: WriteTransaction = {
    run: (sql, params) => (db.run(sql, params as never), { changes: db.getRowsModified(), lastInsertRowid: 0 }),
    get: (sql, params) => tx.all(sql, params)[0] as never,
    all: (sql, params) => {
      const statement = db.prepare(sql, params as never);
      const rows = [];
      while (statement.step()) rows.push(statement.getAsObject());
      statement.free();
      return rows as never;
    },
  };
  const tables = () => new Set(tx.all<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'").map((r) => r.name));
  const schemaFolders = new Map<string, string>();
  for (const file of sourceFiles('src')) {
    for (const match of readFileSync(join(ROOT, file), 'utf8').matchAll(/component:\s*'([^']+)'/g)) schemaFolders.set(match[1]!, folderOf(file));
  }
  const owners = new Map<string, { component: string; folder: string }>();
  for (const schema of homeserverSchemas) {
    const before = tables();
    for (const migration of schema.migrations) migration.up(tx);
    const folder = schemaFolders.get(schema.component);
    expect(folder, `the folder that defines the ${schema.component} schema`).toBeDefined();
    for (const table of tables()) if (!before.has(table)) owners.set(table, { component: schema.component, folder: folder! });
  }
  db.close();
  return owners;
}

/** src/rooms/x.ts → src/rooms; src/homeserver.ts and worker/x.ts are their own folder's. */
function folderOf(file: string): string {
  const parts = relative('.', file).split('/');
  return parts[0] === 'src' && parts.length > 2 ? `src/${parts[1]}` : parts.slice(0, -1).join('/') || '.';
}

describe('table ownership', () => {
  it('no code names in SQL a table another component owns', async () => {
    const owners = await tableOwners();
    // Sanity: the scan sees the tables it must (if it found none, it could not fail).
    expect(owners.get('events')?.folder).toBe('src/rooms');
    expect(owners.get('users')?.folder).toBe('src/users');
    expect(owners.get('search_fts')?.folder).toBe('src/search');
    const trespasses: string[] = [];
    let statements = 0;
    for (const file of [...sourceFiles('src'), ...sourceFiles('worker')]) {
      const folder = folderOf(file);
      for (const { text, line } of literals(file)) {
        const named = tablesNamed(text).filter((name) => owners.has(name));
        if (named.length > 0) statements++;
        for (const table of named) {
          const owner = owners.get(table)!;
          if (owner.folder !== folder) trespasses.push(`${file}:${line} names ${table} (owned by ${owner.component}, ${owner.folder})`);
        }
      }
    }
    expect(statements).toBeGreaterThan(300);
    expect(trespasses).toEqual([]);
  }, 60_000); // parses some 400 files: seconds on a loaded machine

  it('finds the tables a statement names, and only those', () => {
    expect(tablesNamed('SELECT e.json FROM events e JOIN room_state s ON s.nid = e.nid WHERE x IN (SELECT 1 FROM users)')).toEqual(['events', 'room_state', 'users']);
    expect(tablesNamed('INSERT OR IGNORE INTO search_events (a) VALUES (?)')).toEqual(['search_events']);
    expect(tablesNamed('UPDATE stream_position SET id = id + 1')).toEqual(['stream_position']);
    expect(tablesNamed('CREATE INDEX by_room ON search_events (room_id)')).toEqual(['search_events']);
    expect(tablesNamed('could not read from the server')).toEqual([]);
  });
});
