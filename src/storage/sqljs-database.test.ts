import initSqlJs from 'sql.js';
import { describe, expect, it } from 'vitest';
import type { ComponentSchema } from './database.ts';
import { openSqlJsDatabase } from './sqljs-database.ts';

const schema: ComponentSchema = {
  component: 'test',
  migrations: [
    { version: 1, description: 'items', up: (tx) => void tx.run('CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)') },
  ],
};

describe('sql.js driver', () => {
  it('commits, reads back and rolls back a transaction that throws', async () => {
    const db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [schema] });
    const id = await db.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['a']).lastInsertRowid);
    expect(await db.get('SELECT name FROM items WHERE id = ?', [id])).toEqual({ name: 'a' });
    await expect(
      db.transaction((tx) => {
        tx.run('INSERT INTO items (name) VALUES (?)', ['b']);
        tx.run('INSERT INTO items (name) VALUES (?)', ['a']); // UNIQUE violation
      }),
    ).rejects.toThrow(/UNIQUE/);
    expect(await db.all('SELECT name FROM items ORDER BY name')).toEqual([{ name: 'a' }]);
    await db.close();
  });

  it('records migrations and applies only new ones', async () => {
    const sqlJs = await initSqlJs();
    const first = await openSqlJsDatabase({ sqlJs, schemas: [schema] });
    await first.transaction((tx) => tx.run('INSERT INTO items (name) VALUES (?)', ['kept']));
    const image = first.db.export();
    await first.close();
    const upgraded: ComponentSchema = {
      component: 'test',
      migrations: [
        ...schema.migrations,
        { version: 2, description: 'colour', up: (tx) => void tx.run("ALTER TABLE items ADD COLUMN colour TEXT NOT NULL DEFAULT 'red'") },
      ],
    };
    const second = await openSqlJsDatabase({ sqlJs, schemas: [upgraded], image });
    expect(await second.all('SELECT name, colour FROM items')).toEqual([{ name: 'kept', colour: 'red' }]);
    expect(await second.all('SELECT version FROM schema_migrations ORDER BY version')).toEqual([{ version: 1 }, { version: 2 }]);
    await second.close();
  });
});
