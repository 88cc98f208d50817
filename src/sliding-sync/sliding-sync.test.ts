import initSqlJs from 'sql.js';
import { describe, expect, it } from 'vitest';
import { stateKey } from '../events/event.ts';
import { openSqlJsDatabase } from '../storage/sqljs-database.ts';
import { mergeConfigs, RequiredState } from './required-state.ts';
import { slidingSyncSchema } from './schema.ts';
import { ConnectionStore, dropDeviceConnections, UnknownPosError, type SentRoom } from './store.ts';

const sticky = { subscriptions: {}, extensions: {} };
const room = (sentStream: number): SentRoom => ({ sentStream, membership: 'join', requiredState: '[]', lazyMembers: [] });

describe('ConnectionStore', () => {
  const openDb = () => initSqlJs().then((sqlJs) => openSqlJsDatabase({ sqlJs, schemas: [slidingSyncSchema] }));
  const open = async () => new ConnectionStore(await openDb(), () => 0);

  it('keeps what each position sent, replays a retried position, and forgets the positions before the one used', async () => {
    const store = await open();
    const start = await store.open('@a:x', 'D', '', undefined);
    const p1 = await store.save(start, { stream: 10, ephemeral: 0 }, sticky, new Map([['!r1', room(10)], ['!r2', room(10)]]));
    const at1 = await store.open('@a:x', 'D', '', p1);
    expect(at1.stream).toBe(10);
    expect([...at1.rooms.keys()].sort()).toEqual(['!r1', '!r2']);
    // Answered twice from p1 (the first answer lost): the second is built from p1 and the first is dropped.
    const lost = await store.save(at1, { stream: 12, ephemeral: 0 }, sticky, new Map([['!r1', room(12)]]));
    const retry = await store.open('@a:x', 'D', '', p1);
    expect(retry.rooms.get('!r1')!.sentStream).toBe(10);
    const p2 = await store.save(retry, { stream: 13, ephemeral: 0 }, sticky, new Map([['!r2', room(13)]]));
    await expect(store.open('@a:x', 'D', '', lost)).rejects.toBeInstanceOf(UnknownPosError);
    const at2 = await store.open('@a:x', 'D', '', p2);
    expect(at2.rooms.get('!r1')!.sentStream).toBe(10);
    expect(at2.rooms.get('!r2')!.sentStream).toBe(13);
    await store.save(at2, { stream: 14, ephemeral: 0 }, sticky, new Map());
    await expect(store.open('@a:x', 'D', '', p1)).rejects.toThrow(/Unknown or expired/);
  });

  it('refuses a pos of another user, device or conn_id, and one that is not a number', async () => {
    const store = await open();
    const pos = await store.save(await store.open('@a:x', 'D', 'main', undefined), { stream: 1, ephemeral: 0 }, sticky, new Map());
    for (const [user, device, conn] of [['@b:x', 'D', 'main'], ['@a:x', 'E', 'main'], ['@a:x', 'D', 'other']] as const) {
      await expect(store.open(user, device, conn, pos)).rejects.toBeInstanceOf(UnknownPosError);
    }
    await expect(store.open('@a:x', 'D', 'main', '1e3')).rejects.toMatchObject({ status: 400, errcode: 'M_UNKNOWN_POS' });
    // A new connection of the same name replaces the old one.
    await store.save(await store.open('@a:x', 'D', 'main', undefined), { stream: 2, ephemeral: 0 }, sticky, new Map());
    await expect(store.open('@a:x', 'D', 'main', pos)).rejects.toBeInstanceOf(UnknownPosError);
  });

  it("drops a device's connections with the device", async () => {
    const db = await openDb();
    const store = new ConnectionStore(db, () => 0);
    const kept = await store.save(await store.open('@a:x', 'KEEP', '', undefined), { stream: 1, ephemeral: 0 }, sticky, new Map([['!r', room(1)]]));
    const gone = await store.save(await store.open('@a:x', 'GONE', '', undefined), { stream: 1, ephemeral: 0 }, sticky, new Map([['!r', room(1)]]));
    await db.transaction((tx) => dropDeviceConnections(tx, '@a:x', ['GONE']));
    await expect(store.open('@a:x', 'GONE', '', gone)).rejects.toBeInstanceOf(UnknownPosError);
    expect((await store.open('@a:x', 'KEEP', '', kept)).rooms.size).toBe(1);
    expect(await db.all('SELECT * FROM sliding_sync_rooms')).toHaveLength(1);
  });
});

describe('RequiredState', () => {
  it('matches wildcards, $ME and exact keys, and knows $LAZY apart', () => {
    const wanted = new RequiredState([['m.room.name', ''], ['m.room.member', '$ME'], ['m.room.member', '$LAZY'], ['m.space.child', '*']], '@me:x');
    expect(wanted.wants(stateKey('m.room.name', ''))).toBe(true);
    expect(wanted.wants(stateKey('m.room.member', '@me:x'))).toBe(true);
    expect(wanted.wants(stateKey('m.room.member', '@other:x'))).toBe(false);
    expect(wanted.wants(stateKey('m.space.child', '!any:x'))).toBe(true);
    expect(wanted.wants(stateKey('m.room.topic', ''))).toBe(false);
    expect(wanted.lazyMembers).toBe(true);
    expect(new RequiredState([['*', '*']], '@me:x').wants(stateKey('anything', 'at all'))).toBe(true);
    expect(new RequiredState([['*', '$ME']], '@me:x').wants(stateKey('m.room.member', '@me:x'))).toBe(true);
  });

  it('tells a changed config from a reordered one, and a grown timeline', () => {
    const a = RequiredState.key({ required_state: [['a', ''], ['b', '']], timeline_limit: 1 });
    expect(RequiredState.key({ required_state: [['b', ''], ['a', ''], ['a', '']], timeline_limit: 1 })).toBe(a);
    expect(RequiredState.compare(a, RequiredState.key({ required_state: [['a', '']], timeline_limit: 1 }))).toEqual({ stateChanged: true, timelineGrew: false });
    expect(RequiredState.compare(a, RequiredState.key({ required_state: [['a', ''], ['b', '']], timeline_limit: 20 }))).toEqual({ stateChanged: false, timelineGrew: true });
    expect(mergeConfigs([{ required_state: [['a', '']], timeline_limit: 1 }, { required_state: [['a', ''], ['b', '']], timeline_limit: 5 }])).toEqual({ required_state: [['a', ''], ['b', '']], timeline_limit: 5 });
  });
});
