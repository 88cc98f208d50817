import initSqlJs from 'sql.js';
import { beforeEach, describe, expect, it } from 'vitest';
import { encodeBase64 } from '../crypto/base64.ts';
import { defaultEd25519Backend } from '../crypto/ed25519.ts';
import { signJson } from '../crypto/signing.ts';
import type { Database } from '../storage/database.ts';
import { openSqlJsDatabase } from '../storage/sqljs-database.ts';
import { currentStreamId, streamSchema, type StreamChange } from '../storage/stream.ts';
import { isBetterKey } from './backup.ts';
import type { DeviceListSource } from './device-lists.ts';
import { Keys } from './keys.ts';
import { keysSchema } from './schema.ts';
import type { MemberChange } from './types.ts';

/** Rooms as the keys component sees them: members per room, and a log of membership events at stream positions. */
class FakeRooms {
  readonly members = new Map<string, Set<string>>();
  readonly log: (MemberChange & { position: number })[] = [];

  constructor(private readonly db: Database) {}

  async change(roomId: string, userId: string, membership: string): Promise<void> {
    const position = await this.db.transaction((tx) => {
      tx.run('UPDATE stream_position SET id = id + 1');
      return currentStreamId(tx);
    });
    const set = this.members.get(roomId) ?? new Set();
    if (membership === 'join') set.add(userId);
    else set.delete(userId);
    this.members.set(roomId, set);
    this.log.push({ roomId, userId, membership, position });
  }

  readonly membership = {
    roomsOf: async (userId: string) => [...this.members].filter(([, m]) => m.has(userId)).map(([r]) => r),
    members: async (roomId: string) => [...(this.members.get(roomId) ?? [])],
    memberChanges: async (userId: string, from: number, to: number) => {
      const joined = new Set(await this.membership.roomsOf(userId));
      const mine = new Set(this.log.filter((e) => e.userId === userId && e.position > from && e.position <= to).map((e) => e.roomId));
      return this.log
        .filter((e) => e.position > from && e.position <= to && (joined.has(e.roomId) || mine.has(e.roomId)))
        .map(({ roomId, userId: u, membership }) => ({ roomId, userId: u, membership }));
    },
    remoteMembersSharingRooms: async (server?: string) => {
      const local = (u: string) => u.endsWith(':hs');
      const shared = [...this.members.values()].filter((m) => [...m].some(local));
      return [...new Set(shared.flatMap((m) => [...m]))].filter((u) => !local(u) && (server === undefined || u.endsWith(':' + server)));
    },
    sharesRoom: async (userId: string) => (await this.membership.remoteMembersSharingRooms()).includes(userId),
  };
}

const devices = new Map<string, string[]>();
const directory = {
  isLocal: (userId: string) => userId.endsWith(':hs'),
  listDevices: async (userId: string) => (devices.get(userId) ?? []).map((device_id) => ({ device_id, display_name: null })),
};

let db: Database;
let rooms: FakeRooms;
let keys: Keys;
let notified: StreamChange[];
/** What the other servers answer when asked for a user's devices: each test that asks says. */
let remoteDevices: DeviceListSource['userDevices'];

beforeEach(async () => {
  remoteDevices = async (server) => {
    throw new Error(`${server} was not expected to be asked`);
  };
  db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [streamSchema, keysSchema] });
  rooms = new FakeRooms(db);
  notified = [];
  keys = new Keys({
    db, ed25519: await defaultEd25519Backend(), notify: (c) => notified.push(c), membership: rooms.membership, users: directory,
    deviceListSource: { userDevices: (server, userId, signal) => remoteDevices(server, userId, signal) },
  });
  devices.clear();
});

const position = async () => (await db.get<{ id: number }>('SELECT id FROM stream_position'))!.id;

/** Adds a device as the users component would: inside a transaction, then the commit hook. */
async function addDevice(userId: string, deviceId: string): Promise<void> {
  devices.set(userId, [...(devices.get(userId) ?? []), deviceId]);
  await db.transaction((tx) => keys.devicesAdded(tx, userId, [deviceId]));
  keys.devicesCommitted(userId);
}

async function removeDevice(userId: string, deviceId: string): Promise<void> {
  devices.set(userId, (devices.get(userId) ?? []).filter((d) => d !== deviceId));
  await db.transaction((tx) => keys.devicesRemoved(tx, userId, [deviceId]));
  keys.devicesCommitted(userId);
}

async function uploadDeviceKeys(userId: string, deviceId: string): Promise<void> {
  const ed = await defaultEd25519Backend();
  const key = await ed.keyFromSeed(crypto.getRandomValues(new Uint8Array(32)));
  const object = { user_id: userId, device_id: deviceId, algorithms: ['m.olm.v1.curve25519-aes-sha2'], keys: { [`ed25519:${deviceId}`]: encodeBase64(key.publicKey) } };
  await keys.upload(userId, deviceId, { device_keys: await signJson(object, userId, `ed25519:${deviceId}`, key) });
}

describe('device list changes', () => {
  it('reports key changes of users sharing a room, and only those', async () => {
    await rooms.change('!r', '@a:hs', 'join');
    await rooms.change('!r', '@b:hs', 'join');
    const since = await position();
    await addDevice('@b:hs', 'B1');
    await addDevice('@c:hs', 'C1');
    expect(await keys.deviceListChanges('@a:hs', since, await position())).toEqual({ changed: ['@b:hs'], left: [] });
    // The change woke b and everyone sharing a room with b.
    expect(notified.at(-2)!.userIds).toEqual(expect.arrayContaining(['@a:hs', '@b:hs']));
    expect(notified.at(-1)!.userIds).toEqual(['@c:hs']);
  });

  it('reports joins to members, every member to the joiner, and leaves once no room is shared', async () => {
    await rooms.change('!r1', '@a:hs', 'join');
    await rooms.change('!r1', '@b:hs', 'join');
    await rooms.change('!r2', '@c:hs', 'join');
    const since = await position();
    await rooms.change('!r2', '@a:hs', 'join');
    expect(await keys.deviceListChanges('@a:hs', since, await position())).toEqual({ changed: ['@c:hs'], left: [] });
    expect(await keys.deviceListChanges('@c:hs', since, await position())).toEqual({ changed: ['@a:hs'], left: [] });

    const beforeLeave = await position();
    await rooms.change('!r1', '@b:hs', 'leave');
    await rooms.change('!r2', '@a:hs', 'leave');
    expect(await keys.deviceListChanges('@a:hs', beforeLeave, await position())).toEqual({ changed: [], left: ['@b:hs', '@c:hs'] });
    expect(await keys.deviceListChanges('@c:hs', beforeLeave, await position())).toEqual({ changed: [], left: ['@a:hs'] });
  });

  it('does not report a user who left one room but shares another', async () => {
    await rooms.change('!r1', '@a:hs', 'join');
    await rooms.change('!r1', '@b:hs', 'join');
    await rooms.change('!r2', '@a:hs', 'join');
    await rooms.change('!r2', '@b:hs', 'join');
    const since = await position();
    await rooms.change('!r1', '@b:hs', 'leave');
    expect(await keys.deviceListChanges('@a:hs', since, await position())).toEqual({ changed: [], left: [] });
  });

  it("reports the user's own changes, and user-signing changes only to the user", async () => {
    await rooms.change('!r', '@a:hs', 'join');
    await rooms.change('!r', '@b:hs', 'join');
    const since = await position();
    await addDevice('@a:hs', 'A2');
    await db.transaction((tx) => tx.run("INSERT INTO key_changes (stream_id, user_id, kind, audience) VALUES (99, '@b:hs', 'signature', '@a:hs')"));
    expect(await keys.deviceListChanges('@a:hs', since, 99)).toEqual({ changed: ['@a:hs', '@b:hs'], left: [] });
    expect(await keys.deviceListChanges('@b:hs', since, 99)).toEqual({ changed: ['@a:hs'], left: [] });
  });
});

describe('outbound device list stream', () => {
  it('chains each user’s updates by prev_id, with current keys or deleted', async () => {
    await addDevice('@a:hs', 'A1');
    await uploadDeviceKeys('@a:hs', 'A1');
    await addDevice('@b:hs', 'B1');
    await addDevice('@a:hs', 'A2');
    await removeDevice('@a:hs', 'A2');
    const updates = await keys.deviceListUpdates('@a:hs');
    expect(updates.map((u) => u.device_id)).toEqual(['A1', 'A1', 'A2', 'A2']);
    expect(updates[0]!.prev_id).toEqual([]);
    for (let i = 1; i < updates.length; i++) expect(updates[i]!.prev_id).toEqual([updates[i - 1]!.stream_id]);
    expect(updates[1]!.keys?.device_id).toBe('A1');
    expect(updates[3]!.deleted).toBe(true);
    expect((await keys.deviceListUpdates('@a:hs', updates[1]!.stream_id)).map((u) => u.stream_id)).toEqual(updates.slice(2).map((u) => u.stream_id));
  });

  it('forgets a deleted device’s keys', async () => {
    await addDevice('@a:hs', 'A1');
    await uploadDeviceKeys('@a:hs', 'A1');
    await keys.upload('@a:hs', 'A1', { one_time_keys: { 'signed_curve25519:K': { key: 'k' } }, fallback_keys: { 'signed_curve25519:F': { key: 'f' } } });
    await removeDevice('@a:hs', 'A1');
    expect((await keys.query('@a:hs', { '@a:hs': [] })).device_keys['@a:hs']).toEqual({});
    expect(await keys.keyCounts('@a:hs', 'A1')).toEqual({ counts: { signed_curve25519: 0 }, unusedFallback: [] });
  });
});

describe('to-device delivery', () => {
  const send = (n: number, txnId: string) =>
    keys.toDevice.send({ userId: '@a:hs', deviceId: 'A1' }, txnId, 'm.test', { '@b:hs': { B1: { n } } });

  it('carries at most 100 per sync, the rest next time, and deletes what a later sync acknowledged', async () => {
    devices.set('@b:hs', ['B1']);
    for (let i = 0; i < 150; i++) await send(i, `t${i}`);
    const upTo1 = await position();
    const first = await keys.toDevice.deliver('@b:hs', 'B1', 0, upTo1);
    expect(first.map((e) => e.content['n'])).toEqual(Array.from({ length: 100 }, (_, i) => i));

    // A retry from the same position gets the same messages again.
    expect((await keys.toDevice.deliver('@b:hs', 'B1', 0, upTo1)).length).toBe(100);

    // More were waiting, so the stream moved on: the next response's position differs.
    const upTo2 = await position();
    expect(upTo2).toBeGreaterThan(upTo1);

    // The next sync (from upTo1) gets the other 50; its acknowledgement deletes the first 100 only.
    const second = await keys.toDevice.deliver('@b:hs', 'B1', upTo1, upTo2);
    expect(second.map((e) => e.content['n'])).toEqual(Array.from({ length: 50 }, (_, i) => 100 + i));
    await keys.toDevice.acknowledge('@b:hs', 'B1', upTo1);
    expect(await keys.toDevice.pending('@b:hs', 'B1')).toBe(50);
    // Lost response: a retry from upTo1 gets the 50 again; a sync from upTo2 acknowledges them.
    expect((await keys.toDevice.deliver('@b:hs', 'B1', upTo1, upTo2)).length).toBe(50);
    expect(await keys.toDevice.deliver('@b:hs', 'B1', upTo2, upTo2)).toEqual([]);
    await keys.toDevice.acknowledge('@b:hs', 'B1', upTo2);
    expect(await keys.toDevice.pending('@b:hs', 'B1')).toBe(0);
  });

  it('ignores a repeated transaction ID', async () => {
    devices.set('@b:hs', ['B1']);
    await send(1, 'same');
    await send(2, 'same');
    expect(await keys.toDevice.pending('@b:hs', 'B1')).toBe(1);
  });
});

describe('key backup', () => {
  const data = (first_message_index: number, is_verified: boolean, forwarded_count = 0) => ({ first_message_index, forwarded_count, is_verified, session_data: {} });
  it('keeps the verified key, then the lower first index, then the lower forward count', () => {
    expect(isBetterKey(data(9, true), data(0, false))).toBe(true);
    expect(isBetterKey(data(0, false), data(9, true))).toBe(false);
    expect(isBetterKey(data(1, false), data(2, false))).toBe(true);
    expect(isBetterKey(data(1, false, 1), data(1, false, 2))).toBe(true);
    expect(isBetterKey(data(1, false, 2), data(1, false, 2))).toBe(false);
  });
});

describe('keys of other servers\' users', () => {
  const device = (userId: string, deviceId: string) => ({ user_id: userId, device_id: deviceId, algorithms: [], keys: {}, signatures: {} });

  it('takes from each server what it may say: its own user, each device as itself', async () => {
    const asked: [string, string][] = [];
    remoteDevices = async (server: string, userId: string) => {
        asked.push([server, userId]);
        if (server === 'down.example') throw Object.assign(new Error('unreachable'), { errcode: 'M_UNKNOWN' });
        return {
          user_id: userId,
          stream_id: 3,
          devices: [
            { device_id: 'BOB', keys: device('@bob:b.example', 'BOB') },
            { device_id: 'LIAR', keys: device('@bob:b.example', 'OTHER') },
            { device_id: 'SKIPPED', keys: device('@bob:b.example', 'SKIPPED') },
            { device_id: 'CAROL', keys: device('@carol:c.example', 'CAROL') },
          ],
          master_key: { user_id: '@bob:b.example', usage: ['master'], keys: {} },
        };
    };
    const result = await keys.query('@alice:hs', { '@bob:b.example': ['BOB', 'LIAR'], '@dan:down.example': [] });
    expect(asked).toEqual([['b.example', '@bob:b.example'], ['down.example', '@dan:down.example']]);
    expect(result.device_keys).toEqual({ '@bob:b.example': { BOB: { ...device('@bob:b.example', 'BOB'), unsigned: {} } } });
    expect(Object.keys(result.master_keys)).toEqual(['@bob:b.example']);
    expect(result.failures).toEqual({ 'down.example': { errcode: 'M_UNKNOWN', error: 'unreachable' } });
  });

  it('names a server that does not answer in time under failures', async () => {
    const remote = { userKeysClaim: () => new Promise<Record<string, unknown>>(() => {}) };
    remoteDevices = () => new Promise<Record<string, unknown>>(() => {});
    const query = await keys.query('@alice:hs', { '@bob:slow.example': [] }, { timeoutMs: 20 });
    expect(Object.keys(query.failures)).toEqual(['slow.example']);
    const claim = await keys.claim({ '@bob:slow.example': { BOB: 'signed_curve25519' } }, { remote, timeoutMs: 20 });
    expect(claim).toEqual({ one_time_keys: {}, failures: { 'slow.example': { errcode: 'M_UNKNOWN', error: 'no answer within 20 ms' } } });
  });
});
