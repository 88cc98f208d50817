import { beforeEach, describe, expect, it } from 'vitest';
import { hearthBesideScriptedRemote, type HttpsServer } from '../support/hearth-beside-scripted-remote.ts';
import type { RemoteRequest, ScriptedRemote } from '../support/scripted-remote.ts';
import { httpSyncer, longPollUntil, type SyncBody } from '../support/sync-until.ts';
import { crossSigningSet, deviceKeys } from '../support/e2ee-keys.ts';
import { signJson } from '../../src/crypto/signing.ts';
import { api, type Account } from './harness.ts';

// Device lists across servers (issue 34), against a remote server that is not Hearth: a DNS-named
// Hearth host in this process, over real HTTPS, beside the scripted remote of
// test/support/scripted-remote.ts (set up by test/support/hearth-beside-scripted-remote.ts). The
// remote hosts or joins rooms, sends its own signed EDUs and answers `/user/devices` with whatever
// each case needs: keys that are empty or oddly shaped, a gap in its stream, a display name alone,
// a server that is down. The cases are the ones an independent conformance suite found failing,
// each named after what it checks.

const enc = encodeURIComponent;
const V3 = '/_matrix/client/v3';

const servers = hearthBesideScriptedRemote();
let host: HttpsServer;
let remote: ScriptedRemote;
let alice: Account;
beforeEach(() => ({ hearth: host, remote, alice } = servers));

const userDevicesPath = (userId: string) => new RegExp(`^/_matrix/federation/v1/user/devices/${escape(userId)}$`);
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const isUserDevices = (userId: string) => (r: RemoteRequest) => r.method === 'GET' && userDevicesPath(userId).test(r.path);

function devicesAnswer(userId: string, streamId: number, devices: { device_id: string; keys?: unknown; device_display_name?: string }[]) {
  return { status: 200, body: { user_id: userId, stream_id: streamId, devices } };
}

/**
 * /keys/query, its answer unchecked against the spec's schema: the remote's device keys are its
 * word, served as it gave them (`{"device_keys": {}}` is no DeviceKeys object), as Synapse serves them.
 */
async function keysQuery(account: Account, request: Record<string, string[]>): Promise<any> {
  const r = await api(host, 'POST', `${V3}/keys/query`, { token: account.accessToken, body: { device_keys: request }, unchecked: true });
  expect(r.status).toBe(200);
  return r.body;
}

async function joinRoom(account: Account, roomId: string, via: string): Promise<void> {
  const r = await api(host, 'POST', `${V3}/join/${enc(roomId)}?server_name=${enc(via)}`, { token: account.accessToken, body: {} });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
}

async function leave(account: Account, roomId: string): Promise<void> {
  const r = await api(host, 'POST', `${V3}/rooms/${enc(roomId)}/leave`, { token: account.accessToken, body: {} });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
}

async function createRoom(account: Account, body: Record<string, unknown> = { preset: 'public_chat' }): Promise<string> {
  const r = await api(host, 'POST', `${V3}/createRoom`, { token: account.accessToken, body });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.room_id;
}

const syncer = (account: Account) => httpSyncer(host, account.accessToken, 5_000);
/** Syncs from `since` until `userId` is in device_lists.changed; the response that has it. */
const untilChanged = (account: Account, userId: string, since?: string) =>
  longPollUntil(syncer(account), (body) => (body['device_lists']?.changed ?? []).includes(userId), { since, who: account.userId });
const changedIn = (body: SyncBody): string[] => body['device_lists']?.changed ?? [];
/** A token to sync from: an initial sync carries no device_lists, so what a case waits for must come after it. */
const syncToken = async (account: Account) => (await syncer(account)(undefined)).next_batch;

/** A remote room the scripted remote hosts, created by `creator`, that alice joins. */
async function remoteRoomWithAlice(creator: string): Promise<string> {
  const roomId = await remote.createRoom(creator);
  await joinRoom(alice, roomId, remote.name);
  return roomId;
}

describe('device lists against a scripted remote server (not Hearth), over HTTPS', () => {
  it('an m.device_list_update for a user we hold no list for, with empty keys, is resynced and its device listed; a later update with a display name alone renames it', async () => {
    const creator = `@creator:${remote.name}`;
    // Every /user/devices for the creator says: one device, its keys an odd but non-empty object.
    remote.answerAlways('GET', userDevicesPath(creator), () => devicesAnswer(creator, 1, [{ device_id: 'RANDOM', keys: { device_keys: {} } }]));
    const roomId = await remoteRoomWithAlice(creator);
    await remote.sendEdu(host.name, 'm.device_list_update', { user_id: creator, device_id: 'RANDOM', stream_id: 1, keys: { device_keys: {} } });
    await remote.waitFor(isUserDevices(creator));

    const first = await keysQuery(alice, { [creator]: ['RANDOM'] });
    expect(Object.keys(first.device_keys[creator] ?? {})).toEqual(['RANDOM']);

    await remote.sendEdu(host.name, 'm.device_list_update', {
      user_id: creator, device_id: 'RANDOM', device_display_name: 'test display name', prev_id: [1], stream_id: 2, keys: { device_keys: {} },
    });
    const second = await keysQuery(alice, { [creator]: ['RANDOM'] });
    expect(second.device_keys[creator]?.['RANDOM']?.unsigned?.device_display_name).toBe('test display name');
    // Applied on top of what we held: no second resync was needed.
    expect(remote.received.filter(isUserDevices(creator)).length).toBe(1);
    void roomId;
  });

  it('/keys/query for a remote user we hold no list for asks their server, for a user sharing a room and for one sharing none', async () => {
    const member = `@member:${remote.name}`;
    const stranger = `@stranger:${remote.name}`;
    const twoDevices = (userId: string) => devicesAnswer(userId, 1, [{ device_id: 'D1', keys: { device_keys: {} } }, { device_id: 'D2', keys: { device_keys: {} } }]);
    remote.answerAlways('GET', userDevicesPath(member), () => twoDevices(member));
    remote.answerAlways('GET', userDevicesPath(stranger), () => twoDevices(stranger));
    const roomId = await createRoom(alice);
    await remote.joinRoom(host.name, roomId, member);

    for (const userId of [member, stranger]) {
      const answer = await keysQuery(alice, { [userId]: [] });
      expect(Object.keys(answer.device_keys[userId] ?? {}).sort(), userId).toEqual(['D1', 'D2']);
      expect(answer.failures).toEqual({});
    }
  });

  it('a server that leaves every room it shared with us and rejoins is resynced: the device added meanwhile is listed, and alice hears of it in /sync and /keys/changes', async () => {
    const bob = `@bob:${remote.name}`;
    const roomId = await createRoom(alice);
    await remote.joinRoom(host.name, roomId, bob);
    remote.answerAlways('GET', userDevicesPath(bob), () => devicesAnswer(bob, 1, [{ device_id: 'D1', keys: { device_keys: {} } }]));
    const first = await keysQuery(alice, { [bob]: [] });
    expect(Object.keys(first.device_keys[bob] ?? {})).toEqual(['D1']);
    const before = await longPollUntil(syncer(alice), () => true);

    // alice leaves, so her server shares no room with bob's; the remote hears of it.
    await leave(alice, roomId);
    await remote.waitForPdu((pdu) => pdu.type === 'm.room.member' && pdu.state_key === alice.userId && (pdu.content as any).membership === 'leave');
    // bob adds a device meanwhile, and tells no one: no room is shared.
    remote.answerAlways('GET', userDevicesPath(bob), () => devicesAnswer(bob, 2, [{ device_id: 'D1', keys: { device_keys: {} } }, { device_id: 'D2', keys: { device_keys: {} } }]));

    await joinRoom(alice, roomId, remote.name);
    const after = await untilChanged(alice, bob, before.next_batch);
    const second = await keysQuery(alice, { [bob]: [] });
    expect(Object.keys(second.device_keys[bob] ?? {}).sort()).toEqual(['D1', 'D2']);
    const changes = await api(host, 'GET', `${V3}/keys/changes?from=${enc(before.next_batch)}&to=${enc(after.next_batch)}`, { token: alice.accessToken });
    expect(changes.status).toBe(200);
    expect(changes.body.changed).toContain(bob);
  });

  it('an update whose prev_id names a stream ID never seen resyncs at once; the resync\'s keys and later name are served', async () => {
    const creator = `@creator:${remote.name}`;
    const device = { user_id: creator, device_id: 'RANDOM', algorithms: ['m.olm.v1.curve25519-aes-sha2', 'm.megolm.v1.aes-sha2'], keys: {}, signatures: {} };
    remote.answerAlways('GET', userDevicesPath(creator), () => devicesAnswer(creator, 1, [{ device_id: 'RANDOM', keys: device, device_display_name: 'Original name' }]));
    const start = await syncToken(alice);
    await remoteRoomWithAlice(creator);
    await remote.sendEdu(host.name, 'm.device_list_update', { user_id: creator, device_id: 'RANDOM', stream_id: 1, keys: { device_keys: { [creator]: { RANDOM: device } } } });
    const seen = await untilChanged(alice, creator, start);

    // Stream ID 2 (keys added) never reaches us; 3 (a rename) names it as its prev_id.
    const withKeys = { ...device, keys: { 'curve25519:RANDOM': 'MAtX5CLJXvHJ4wjvMBwc53+NnMceHiFch5r4mxOnOCA', 'ed25519:RANDOM': 'LOu9tc6Sg7+mCEu3elrps3IiiotpefyaNnScTpSRQbU' } };
    const resynced = remote.answerNext('GET', userDevicesPath(creator), () => devicesAnswer(creator, 3, [{ device_id: 'RANDOM', keys: withKeys, device_display_name: 'New device name' }]));
    await remote.sendEdu(host.name, 'm.device_list_update', {
      user_id: creator, device_id: 'RANDOM', device_display_name: 'New device name', prev_id: [2], stream_id: 3, keys: { device_keys: { [creator]: { RANDOM: device } } },
    });
    await resynced;
    await untilChanged(alice, creator, seen.next_batch);
    const answer = await keysQuery(alice, { [creator]: ['RANDOM'] });
    const served = answer.device_keys[creator]?.['RANDOM'];
    expect(served?.keys).toEqual(withKeys.keys);
    expect(served?.unsigned?.device_display_name).toBe('New device name');
  });

  it('a remote user who leaves the only room we shared: updates about their devices no longer reach alice as changed, while another user of theirs still does', async () => {
    const leaver = `@leaver:${remote.name}`;
    const stayer = `@stayer:${remote.name}`;
    const roomId = await createRoom(alice);
    const start = await syncToken(alice);
    for (const userId of [leaver, stayer]) {
      remote.answerAlways('GET', userDevicesPath(userId), () => devicesAnswer(userId, 1, [{ device_id: 'D1', keys: { device_keys: {} } }]));
      await remote.joinRoom(host.name, roomId, userId);
    }
    const joined = await untilChanged(alice, stayer, start);
    await remote.sendEvent(roomId, { type: 'm.room.member', sender: leaver, state_key: leaver, content: { membership: 'leave' } });
    const left = await longPollUntil(syncer(alice), (body) => (body['device_lists']?.left ?? []).includes(leaver), { since: joined.next_batch });

    // Both change a device; the remote tells us of both (a server may, and a late EDU does).
    remote.answerAlways('GET', userDevicesPath(leaver), () => devicesAnswer(leaver, 2, [{ device_id: 'D1', keys: { device_keys: {} } }, { device_id: 'D2', keys: { device_keys: {} } }]));
    remote.answerAlways('GET', userDevicesPath(stayer), () => devicesAnswer(stayer, 2, [{ device_id: 'D1', keys: { device_keys: {} } }, { device_id: 'D2', keys: { device_keys: {} } }]));
    await remote.sendEdu(host.name, 'm.device_list_update', { user_id: leaver, device_id: 'D2', stream_id: 2, prev_id: [1], keys: { device_keys: {} } });
    await remote.sendEdu(host.name, 'm.device_list_update', { user_id: stayer, device_id: 'D2', stream_id: 2, prev_id: [1], keys: { device_keys: {} } });
    const bodies: SyncBody[] = [];
    await longPollUntil(syncer(alice), (body) => (bodies.push(body), changedIn(body).includes(stayer)), { since: left.next_batch });
    for (const body of bodies) expect(changedIn(body)).not.toContain(leaver);
  });

  it('alice leaves, a remote user changes a device, alice is invited back and rejoins: the new device shows in /sync, /keys/changes and /keys/query', async () => {
    const bob = `@bob:${remote.name}`;
    const start = await syncToken(alice);
    const roomId = await createRoom(alice, { preset: 'private_chat', invite: [bob], power_level_content_override: { invite: 0 } });
    remote.answerAlways('GET', userDevicesPath(bob), () => devicesAnswer(bob, 1, [{ device_id: 'D1', keys: { device_keys: {} } }]));
    await remote.waitFor((r) => r.method === 'PUT' && r.path.startsWith('/_matrix/federation/v2/invite/'));
    await remote.joinRoom(host.name, roomId, bob);
    const first = await untilChanged(alice, bob, start);

    await leave(alice, roomId);
    await remote.waitForPdu((pdu) => pdu.type === 'm.room.member' && pdu.state_key === alice.userId && (pdu.content as any).membership === 'leave');
    remote.answerAlways('GET', userDevicesPath(bob), () => devicesAnswer(bob, 2, [{ device_id: 'D1', keys: { device_keys: {} } }, { device_id: 'D2', keys: { device_keys: {} } }]));

    await remote.invite(roomId, bob, alice.userId, host.name);
    await joinRoom(alice, roomId, remote.name);
    const second = await untilChanged(alice, bob, first.next_batch);
    const changes = await api(host, 'GET', `${V3}/keys/changes?from=${enc(first.next_batch)}&to=${enc(second.next_batch)}`, { token: alice.accessToken });
    expect(changes.body.changed).toContain(bob);
    const answer = await keysQuery(alice, { [bob]: [] });
    expect(Object.keys(answer.device_keys[bob] ?? {}).sort()).toEqual(['D1', 'D2']);
  });

  it("a signature alice makes of her own device with her self-signing key reaches the remote as an m.device_list_update carrying it, after an m.signing_key_update with her new keys; the remote's /user/keys/query shows it", async () => {
    const bob = `@bob:${remote.name}`;
    const roomId = await createRoom(alice);
    await remote.joinRoom(host.name, roomId, bob);
    const device = await deviceKeys(alice);
    expect((await api(host, 'POST', `${V3}/keys/upload`, { token: alice.accessToken, body: { device_keys: device.signed } })).status).toBe(200);
    await remote.waitForEdu((edu) => edu.edu_type === 'm.device_list_update' && edu.content.user_id === alice.userId && edu.content.keys?.keys?.[`ed25519:${alice.deviceId}`] === device.pub);

    const { master, selfSigning } = await crossSigningSet(alice.userId);
    const uploaded = await api(host, 'POST', `${V3}/keys/device_signing/upload`, { token: alice.accessToken, body: { master_key: master.object, self_signing_key: selfSigning.object } });
    expect(uploaded.status, JSON.stringify(uploaded.body)).toBe(200);
    const signingUpdate = await remote.waitForEdu((edu) => edu.edu_type === 'm.signing_key_update' && edu.content.user_id === alice.userId);
    expect(signingUpdate.content.master_key).toEqual(master.object);
    expect(signingUpdate.content.self_signing_key).toEqual(selfSigning.object);

    const { signatures: _unsigned, ...bare } = device.signed;
    const bySelfSigning = await signJson(bare, alice.userId, `ed25519:${selfSigning.pub}`, selfSigning.key);
    const signature = bySelfSigning.signatures[alice.userId]![`ed25519:${selfSigning.pub}`];
    const upload = await api(host, 'POST', `${V3}/keys/signatures/upload`, { token: alice.accessToken, body: { [alice.userId]: { [alice.deviceId]: bySelfSigning } } });
    expect(upload.status).toBe(200);
    expect(upload.body.failures ?? {}).toEqual({});
    const update = await remote.waitForEdu((edu) => edu.edu_type === 'm.device_list_update' && edu.content.user_id === alice.userId && edu.content.keys?.signatures?.[alice.userId]?.[`ed25519:${selfSigning.pub}`] === signature);
    expect(update.content.keys.signatures[alice.userId][`ed25519:${alice.deviceId}`]).toBe(device.signed.signatures[alice.userId]![`ed25519:${alice.deviceId}`]);

    const queried = await remote.client.request<any>(host.name, 'POST', '/_matrix/federation/v1/user/keys/query', { body: { device_keys: { [alice.userId]: [] } } });
    expect(queried.device_keys[alice.userId][alice.deviceId].signatures[alice.userId][`ed25519:${selfSigning.pub}`]).toBe(signature);
    expect(queried.master_keys[alice.userId]).toEqual(master.object);
    expect(queried.self_signing_keys[alice.userId]).toEqual(selfSigning.object);
  });

  it('a remote server that is down: /keys/query answers the list it last gave, names the server in failures, and does not hold the request', async () => {
    const bob = `@bob:${remote.name}`;
    const roomId = await createRoom(alice);
    await remote.joinRoom(host.name, roomId, bob);
    const keys = { user_id: bob, device_id: 'ROVER', algorithms: ['m.olm.v1.curve25519-aes-sha2'], keys: { 'ed25519:ROVER': 'sharp' }, signatures: {} };
    remote.answerAlways('GET', userDevicesPath(bob), () => devicesAnswer(bob, 3, [{ device_id: 'ROVER', keys, device_display_name: 'Curiosity Rover' }]));
    const up = await keysQuery(alice, { [bob]: [] });
    expect(up.device_keys[bob]).toEqual({ ROVER: { ...keys, unsigned: { device_display_name: 'Curiosity Rover' } } });

    // The remote goes down; an update tells us its list moved on, so ours is stale and must be asked for again.
    remote.answerAlways('GET', userDevicesPath(bob), () => ({ status: 503, body: {} }));
    remote.answerAlways('POST', /^\/_matrix\/federation\/v1\/user\/keys\/query$/, () => ({ status: 503, body: {} }));
    await remote.sendEdu(host.name, 'm.device_list_update', { user_id: bob, device_id: 'ROVER', stream_id: 5, prev_id: [4] });
    const down = await keysQuery(alice, { [bob]: [] });
    expect(down.device_keys[bob]).toEqual(up.device_keys[bob]);
    expect(Object.keys(down.failures)).toEqual([remote.name]);
  });

  it('one user the remote refuses a request about does not hold up its other users', async () => {
    const refused = `@refused:${remote.name}`;
    const fine = `@fine:${remote.name}`;
    const roomId = await createRoom(alice);
    for (const userId of [refused, fine]) await remote.joinRoom(host.name, roomId, userId);
    remote.answerAlways('GET', userDevicesPath(refused), () => ({ status: 400, body: { errcode: 'M_INVALID_PARAM', error: 'not for you' } }));
    remote.answerAlways('GET', userDevicesPath(fine), () => devicesAnswer(fine, 1, [{ device_id: 'D1', keys: { device_keys: {} } }]));
    const answer = await keysQuery(alice, { [refused]: [], [fine]: [] });
    expect(Object.keys(answer.device_keys[fine] ?? {})).toEqual(['D1']);
    expect(Object.keys(answer.failures)).toEqual([remote.name]);
    // And the server is not backing off: a new user of it is asked at once.
    const later = `@later:${remote.name}`;
    remote.answerAlways('GET', userDevicesPath(later), () => devicesAnswer(later, 1, [{ device_id: 'D9', keys: { device_keys: {} } }]));
    expect(Object.keys((await keysQuery(alice, { [later]: [] })).device_keys[later] ?? {})).toEqual(['D9']);
  });

  it("updates applied in stream order: a deletion removes the device, duplicates and older stream IDs change nothing, and an update about another server's user is ignored", async () => {
    const bob = `@bob:${remote.name}`;
    const roomId = await createRoom(alice);
    await remote.joinRoom(host.name, roomId, bob);
    const keys = (deviceId: string) => ({ user_id: bob, device_id: deviceId, algorithms: ['m.olm.v1.curve25519-aes-sha2'], keys: { [`ed25519:${deviceId}`]: deviceId }, signatures: {} });
    remote.answerAlways('GET', userDevicesPath(bob), () => devicesAnswer(bob, 1, [{ device_id: 'D1', keys: keys('D1') }, { device_id: 'D2', keys: keys('D2') }]));
    expect(Object.keys((await keysQuery(alice, { [bob]: [] })).device_keys[bob]).sort()).toEqual(['D1', 'D2']);

    await remote.sendEdu(host.name, 'm.device_list_update', { user_id: bob, device_id: 'D2', stream_id: 2, prev_id: [1], deleted: true });
    expect(Object.keys((await keysQuery(alice, { [bob]: [] })).device_keys[bob])).toEqual(['D1']);
    // The same update again, and one older than what we hold: nothing comes back.
    await remote.sendEdu(host.name, 'm.device_list_update', { user_id: bob, device_id: 'D2', stream_id: 2, prev_id: [1], deleted: true });
    await remote.sendEdu(host.name, 'm.device_list_update', { user_id: bob, device_id: 'D2', stream_id: 1, keys: keys('D2') });
    expect(Object.keys((await keysQuery(alice, { [bob]: [] })).device_keys[bob])).toEqual(['D1']);
    // The remote speaking for alice's server's user is not heard.
    await remote.sendEdu(host.name, 'm.device_list_update', { user_id: alice.userId, device_id: 'FORGED', stream_id: 1, keys: keys('FORGED') });
    expect(Object.keys((await keysQuery(alice, { [alice.userId]: [] })).device_keys[alice.userId] ?? {})).not.toContain('FORGED');
    // No resync was needed for any of it: one /user/devices in all.
    expect(remote.received.filter(isUserDevices(bob)).length).toBe(1);
  });

  // Dendrite 0.13.8 numbers each change after the highest number it holds for the user; deleting
  // the device it numbered last removes that device's rows first, so the deletion takes a number
  // already sent, and /user/devices answers a stream ID below the last update's.
  it('a deletion of a listed device under a stream ID already seen resyncs, and the resync is taken though its stream ID is below ours', async () => {
    const bob = `@bob:${remote.name}`;
    const roomId = await createRoom(alice);
    await remote.joinRoom(host.name, roomId, bob);
    const keys = (deviceId: string) => ({ user_id: bob, device_id: deviceId, algorithms: ['m.olm.v1.curve25519-aes-sha2'], keys: { [`ed25519:${deviceId}`]: deviceId }, signatures: {} });
    let devices = devicesAnswer(bob, 2, [{ device_id: 'D1', keys: keys('D1') }]);
    remote.answerAlways('GET', userDevicesPath(bob), () => devices);
    expect(Object.keys((await keysQuery(alice, { [bob]: [] })).device_keys[bob])).toEqual(['D1']);
    // D2 signs in (announced without keys, as deleted) and uploads its keys.
    await remote.sendEdu(host.name, 'm.device_list_update', { user_id: bob, device_id: 'D2', stream_id: 3, prev_id: [2], deleted: true });
    await remote.sendEdu(host.name, 'm.device_list_update', { user_id: bob, device_id: 'D2', stream_id: 4, prev_id: [3], keys: keys('D2') });
    expect(Object.keys((await keysQuery(alice, { [bob]: [] })).device_keys[bob]).sort()).toEqual(['D1', 'D2']);
    const since = await syncToken(alice);

    // D2 signs out: its deletion comes as stream ID 3 again, and bob's list is at 2 once more.
    devices = devicesAnswer(bob, 2, [{ device_id: 'D1', keys: keys('D1') }]);
    await remote.sendEdu(host.name, 'm.device_list_update', { user_id: bob, device_id: 'D2', stream_id: 3, prev_id: [2], deleted: true });
    await untilChanged(alice, bob, since);
    expect(Object.keys((await keysQuery(alice, { [bob]: [] })).device_keys[bob])).toEqual(['D1']);
    expect(remote.received.filter(isUserDevices(bob)).length).toBe(2);
  });
});
