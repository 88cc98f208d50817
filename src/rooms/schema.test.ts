import initSqlJs from 'sql.js';
import { expect, it } from 'vitest';
import { applyMigrations } from '../storage/migrations.ts';
import { openSqlJsDatabase } from '../storage/sqljs-database.ts';
import { roomsSchema } from './schema.ts';

it('migration 5 keeps the transaction IDs sent before it, under no endpoint, and scopes new ones by endpoint', async () => {
  const before = { ...roomsSchema, migrations: roomsSchema.migrations.filter((m) => m.version < 5) };
  const db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [before] });
  await db.transaction((tx) => tx.run("INSERT INTO transaction_ids (user_id, device_id, txn_id, event_id) VALUES ('@a:hs', 'D', 't1', '$e1')"));
  await db.transaction((tx) => applyMigrations(tx, [roomsSchema], Date.now()));
  expect(await db.all('SELECT user_id, device_id, endpoint, txn_id, event_id FROM transaction_ids')).toEqual([
    { user_id: '@a:hs', device_id: 'D', endpoint: '', txn_id: 't1', event_id: '$e1' },
  ]);
  await db.transaction((tx) => tx.run("INSERT INTO transaction_ids (user_id, device_id, endpoint, txn_id, event_id) VALUES ('@a:hs', 'D', 'send', 't1', '$e2')"));
  expect(await db.all('SELECT event_id FROM transaction_ids WHERE txn_id = ? ORDER BY event_id', ['t1'])).toEqual([{ event_id: '$e1' }, { event_id: '$e2' }]);
});

it('migration 7 records the redactions taken before it: those that redacted their target apply, the others wait for theirs', async () => {
  const before = { ...roomsSchema, migrations: roomsSchema.migrations.filter((m) => m.version < 7) };
  const db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [before] });
  const insert = 'INSERT INTO events (event_id, room_id, type, sender, depth, origin_server_ts, json, redacted_by) VALUES (?, ?, ?, ?, 1, 0, ?, ?)';
  await db.transaction((tx) => {
    tx.run(insert, ['$target', '!r:hs', 'm.room.message', '@a:hs', '{}', '$applied']);
    tx.run(insert, ['$applied', '!r:hs', 'm.room.redaction', '@a:hs', JSON.stringify({ redacts: '$target' }), null]);
    tx.run(insert, ['$waiting', '!r:hs', 'm.room.redaction', '@b:hs', JSON.stringify({ content: { redacts: '$unknown' } }), null]);
  });
  await db.transaction((tx) => applyMigrations(tx, [roomsSchema], Date.now()));
  expect(await db.all('SELECT redaction_id, target_id, applies FROM redactions ORDER BY redaction_id')).toEqual([
    { redaction_id: '$applied', target_id: '$target', applies: 1 },
    { redaction_id: '$waiting', target_id: '$unknown', applies: null },
  ]);
});
