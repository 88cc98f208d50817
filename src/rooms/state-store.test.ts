import initSqlJs from 'sql.js';
import { describe, expect, it } from 'vitest';
import { stateKey, type StateKey } from '../events/event.ts';
import { openSqlJsDatabase } from '../storage/sqljs-database.ts';
import { roomsSchema } from './schema.ts';
import { StateStore, type NidState } from './state-store.ts';

async function setup() {
  const db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [roomsSchema] });
  return { db, store: new StateStore(db) };
}

describe('state snapshots from shared blocks', () => {
  it('stores a long chain compactly and reads every snapshot back exactly', { timeout: 30_000 }, async () => {
    const { db, store } = await setup();
    let parent: { nid: number; state: NidState } | undefined;
    const expected: Map<number, Map<StateKey, number>> = new Map();
    const model = new Map<StateKey, number>();
    for (let i = 1; i <= 500; i++) {
      // Mostly new members, sometimes a change to an existing key, sometimes a removal.
      const key = i % 7 === 0 ? stateKey('m.room.topic', '') : stateKey('m.room.member', `@u${i % 300}:x`);
      const removal = i % 50 === 0;
      const changes = new Map([[key, removal ? 0 : i]]);
      const snapshot: { nid: number; state: NidState } = await db.transaction((tx) => store.create(tx, '!r:x', parent, changes));
      if (removal) model.delete(key);
      else model.set(key, i);
      expected.set(snapshot.nid, new Map(model));
      parent = snapshot;
    }
    const fresh = new StateStore(db); // no cache: everything read from the database
    for (const [nid, state] of expected) expect(new Map(await fresh.load(nid))).toEqual(state);

    const entries = (await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM state_block_entries'))!.n;
    const fullCopies = [...expected.values()].reduce((sum, s) => sum + s.size, 0);
    expect(entries).toBeLessThan(fullCopies / 10);
    const longest = await db.all<{ blocks: string }>('SELECT blocks FROM state_snapshots');
    expect(Math.max(...longest.map((r) => r.blocks.split(',').length))).toBeLessThanOrEqual(12);
  });

  it('shares the parent snapshot when nothing changes', async () => {
    const { db, store } = await setup();
    const first = await db.transaction((tx) => store.create(tx, '!r:x', undefined, new Map([[stateKey('a', ''), 1]])));
    const same = await db.transaction((tx) => store.create(tx, '!r:x', first, new Map()));
    expect(same.nid).toBe(first.nid);
  });
});
