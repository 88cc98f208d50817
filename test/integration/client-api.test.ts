import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientCalls, V3 } from '../support/client-calls.ts';
import { validateClientResponse } from '../support/spec-schema.ts';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

// Raw HTTP through the endpoints the SDK tests do not reach; every request and
// response is checked against the spec's OpenAPI definitions by api().

let server: TestServer;
let alice: Account;
let bob: Account;
const enc = encodeURIComponent;
const PASSWORD = 'correct horse battery staple';

beforeAll(async () => {
  server = await startTestServer();
  alice = await register(server, 'alice');
  bob = await register(server, 'bob');
});
afterAll(() => server.close());

const createRoom = async (account: Account, body: object = {}) =>
  (await api(server, 'POST', '/_matrix/client/v3/createRoom', { token: account.accessToken, body })).body.room_id as string;

describe('discovery', () => {
  it('answers /versions, /capabilities and .well-known', async () => {
    const versions = await api(server, 'GET', '/_matrix/client/versions');
    expect(versions.body.versions).toContain('v1.12');
    const capabilities = await api(server, 'GET', '/_matrix/client/v3/capabilities', { token: alice.accessToken });
    expect(capabilities.body.capabilities['m.room_versions'].default).toBe('10');
    expect(Object.keys(capabilities.body.capabilities['m.room_versions'].available)).toEqual(['1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12']);
    const wellKnown = await api(server, 'GET', '/.well-known/matrix/client', { unchecked: true });
    expect(wellKnown.body['m.homeserver'].base_url).toBe(server.url);
  });
});

describe('devices and passwords', () => {
  it('lists, renames and deletes devices behind user-interactive auth', async () => {
    const login = await api(server, 'POST', '/_matrix/client/v3/login', {
      body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'bob' }, password: PASSWORD, device_id: 'PHONE', initial_device_display_name: 'phone' },
    });
    expect(login.body.device_id).toBe('PHONE');
    const list = await api(server, 'GET', '/_matrix/client/v3/devices', { token: bob.accessToken });
    expect(list.body.devices.map((d: any) => d.device_id).sort()).toEqual([bob.deviceId, 'PHONE'].sort());
    await api(server, 'PUT', '/_matrix/client/v3/devices/PHONE', { token: bob.accessToken, body: { display_name: 'old phone' } });
    expect((await api(server, 'GET', '/_matrix/client/v3/devices/PHONE', { token: bob.accessToken })).body.display_name).toBe('old phone');

    const challenge = await api(server, 'DELETE', '/_matrix/client/v3/devices/PHONE', { token: bob.accessToken, body: {} });
    expect(challenge.status).toBe(401);
    expect(challenge.body.flows).toEqual([{ stages: ['m.login.password'] }]);
    const wrong = await api(server, 'DELETE', '/_matrix/client/v3/devices/PHONE', {
      token: bob.accessToken, body: { auth: { type: 'm.login.password', identifier: { type: 'm.id.user', user: bob.userId }, password: 'wrong', session: challenge.body.session } },
    });
    expect(wrong.status).toBe(401);
    expect(wrong.body.errcode).toBe('M_FORBIDDEN');
    const ok = await api(server, 'DELETE', '/_matrix/client/v3/devices/PHONE', {
      token: bob.accessToken, body: { auth: { type: 'm.login.password', identifier: { type: 'm.id.user', user: bob.userId }, password: PASSWORD, session: challenge.body.session } },
    });
    expect(ok.status).toBe(200);
    expect((await api(server, 'GET', '/_matrix/client/v3/account/whoami', { token: login.body.access_token })).status).toBe(401);
    expect((await api(server, 'GET', '/_matrix/client/v3/devices/PHONE', { token: bob.accessToken })).status).toBe(404);
  });

  it('changes the password and logs out other devices', async () => {
    const carol = await register(server, 'carol', 'old password');
    const other = await api(server, 'POST', '/_matrix/client/v3/login', { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'carol' }, password: 'old password' } });
    const auth = { type: 'm.login.password', identifier: { type: 'm.id.user', user: carol.userId }, password: 'old password' };
    expect((await api(server, 'POST', '/_matrix/client/v3/account/password', { token: carol.accessToken, body: { new_password: 'new password', auth } })).status).toBe(200);
    expect((await api(server, 'GET', '/_matrix/client/v3/account/whoami', { token: other.body.access_token })).status).toBe(401);
    expect((await api(server, 'GET', '/_matrix/client/v3/account/whoami', { token: carol.accessToken })).status).toBe(200);
    const login = await api(server, 'POST', '/_matrix/client/v3/login', { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'carol' }, password: 'new password' } });
    expect(login.status).toBe(200);
  });

  it('logs out one device, then all', async () => {
    const dave = await register(server, 'dave');
    const second = await api(server, 'POST', '/_matrix/client/v3/login', { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'dave' }, password: PASSWORD } });
    await api(server, 'POST', '/_matrix/client/v3/logout', { token: second.body.access_token, body: {} });
    expect((await api(server, 'GET', '/_matrix/client/v3/account/whoami', { token: second.body.access_token })).status).toBe(401);
    expect((await api(server, 'GET', '/_matrix/client/v3/account/whoami', { token: dave.accessToken })).status).toBe(200);
    await api(server, 'POST', '/_matrix/client/v3/logout/all', { token: dave.accessToken, body: {} });
    expect((await api(server, 'GET', '/_matrix/client/v3/account/whoami', { token: dave.accessToken })).status).toBe(401);
  });
});

describe('per-user data', () => {
  it('stores global and room account data and tags, and shows them in /sync', async () => {
    const roomId = await createRoom(alice);
    await api(server, 'PUT', `/_matrix/client/v3/user/${enc(alice.userId)}/account_data/org.example.settings`, { token: alice.accessToken, body: { theme: 'dark' } });
    await api(server, 'PUT', `/_matrix/client/v3/user/${enc(alice.userId)}/rooms/${enc(roomId)}/account_data/org.example.room`, { token: alice.accessToken, body: { pinned: true } });
    await api(server, 'PUT', `/_matrix/client/v3/user/${enc(alice.userId)}/rooms/${enc(roomId)}/tags/m.favourite`, { token: alice.accessToken, body: { order: 0.5 } });
    expect((await api(server, 'GET', `/_matrix/client/v3/user/${enc(alice.userId)}/account_data/org.example.settings`, { token: alice.accessToken })).body).toEqual({ theme: 'dark' });
    expect((await api(server, 'GET', `/_matrix/client/v3/user/${enc(alice.userId)}/rooms/${enc(roomId)}/tags`, { token: alice.accessToken })).body).toEqual({ tags: { 'm.favourite': { order: 0.5 } } });
    const sync = await api(server, 'GET', '/_matrix/client/v3/sync', { token: alice.accessToken });
    expect(sync.body.account_data.events.find((e: any) => e.type === 'org.example.settings').content).toEqual({ theme: 'dark' });
    expect(sync.body.account_data.events.some((e: any) => e.type === 'm.push_rules')).toBe(true);
    const roomData = sync.body.rooms.join[roomId].account_data.events;
    expect(roomData.map((e: any) => e.type).sort()).toEqual(['m.tag', 'org.example.room']);
    await api(server, 'DELETE', `/_matrix/client/v3/user/${enc(alice.userId)}/rooms/${enc(roomId)}/tags/m.favourite`, { token: alice.accessToken });
    expect((await api(server, 'GET', `/_matrix/client/v3/user/${enc(alice.userId)}/rooms/${enc(roomId)}/tags`, { token: alice.accessToken })).body).toEqual({ tags: {} });
    expect((await api(server, 'PUT', `/_matrix/client/v3/user/${enc(bob.userId)}/account_data/x`, { token: alice.accessToken, body: {} })).status).toBe(403);
  });

  it('serves the default push rules and lets users add, disable and delete rules', async () => {
    const rules = await api(server, 'GET', '/_matrix/client/v3/pushrules/', { token: alice.accessToken });
    expect(rules.body.global.override[0].rule_id).toBe('.m.rule.master');
    expect(rules.body.global.underride.map((r: any) => r.rule_id)).toContain('.m.rule.message');
    await api(server, 'PUT', '/_matrix/client/v3/pushrules/global/content/cake', { token: alice.accessToken, body: { pattern: 'cake', actions: ['notify'] } });
    expect((await api(server, 'GET', '/_matrix/client/v3/pushrules/global/content/cake', { token: alice.accessToken })).body.pattern).toBe('cake');
    await api(server, 'PUT', '/_matrix/client/v3/pushrules/global/override/.m.rule.master/enabled', { token: alice.accessToken, body: { enabled: true } });
    expect((await api(server, 'GET', '/_matrix/client/v3/pushrules/global/override/.m.rule.master/enabled', { token: alice.accessToken })).body).toEqual({ enabled: true });
    expect((await api(server, 'DELETE', '/_matrix/client/v3/pushrules/global/override/.m.rule.master', { token: alice.accessToken })).status).toBe(403);
    await api(server, 'DELETE', '/_matrix/client/v3/pushrules/global/content/cake', { token: alice.accessToken });
    expect((await api(server, 'GET', '/_matrix/client/v3/pushrules/global/content/cake', { token: alice.accessToken })).status).toBe(404);
  });

  it('answers a profile field that is not set with 200 and an empty object, as Synapse (issue 41), and an unknown user with 404', async () => {
    const carol = await register(server, 'noavatar');
    for (const token of [undefined, carol.accessToken]) {
      const r = await api(server, 'GET', `/_matrix/client/v3/profile/${enc(carol.userId)}/avatar_url`, token ? { token } : {});
      expect(r.status).toBe(200);
      expect(r.body).toEqual({});
    }
    expect((await api(server, 'GET', `/_matrix/client/v3/profile/${enc(carol.userId)}`)).body).toEqual({ displayname: 'noavatar' });
    const nobody = await api(server, 'GET', `/_matrix/client/v3/profile/${enc(`@nobody:${carol.userId.split(':')[1]}`)}/avatar_url`);
    expect(nobody.status).toBe(404);
    expect(nobody.body.errcode).toBe('M_NOT_FOUND');
  });

  it('keeps profiles and presence', async () => {
    await api(server, 'PUT', `/_matrix/client/v3/profile/${enc(alice.userId)}/avatar_url`, { token: alice.accessToken, body: { avatar_url: 'mxc://example.org/abc' } });
    expect((await api(server, 'GET', `/_matrix/client/v3/profile/${enc(alice.userId)}`)).body).toEqual({ displayname: 'alice', avatar_url: 'mxc://example.org/abc' });
    expect((await api(server, 'PUT', `/_matrix/client/v3/profile/${enc(bob.userId)}/displayname`, { token: alice.accessToken, body: { displayname: 'x' } })).status).toBe(403);
    await api(server, 'PUT', `/_matrix/client/v3/presence/${enc(alice.userId)}/status`, { token: alice.accessToken, body: { presence: 'unavailable', status_msg: 'lunch' } });
    const presence = await api(server, 'GET', `/_matrix/client/v3/presence/${enc(alice.userId)}/status`, { token: bob.accessToken });
    expect(presence.body).toMatchObject({ presence: 'unavailable', status_msg: 'lunch' });
  });
});

describe('rooms', () => {
  it('serves state, members with filters and at, and joined members', async () => {
    const roomId = await createRoom(alice, { preset: 'public_chat', name: 'Members', topic: 'about' });
    const beforeBob = (await api(server, 'GET', '/_matrix/client/v3/sync', { token: alice.accessToken })).body.next_batch;
    await api(server, 'POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: bob.accessToken, body: {} });
    const state = await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/state`, { token: bob.accessToken });
    expect(state.body.map((e: any) => e.type)).toEqual(expect.arrayContaining(['m.room.create', 'm.room.name', 'm.room.topic', 'm.room.power_levels']));
    expect((await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.name`, { token: bob.accessToken })).body).toEqual({ name: 'Members' });
    expect((await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.name/?format=event`, { token: bob.accessToken, unchecked: true })).body.type).toBe('m.room.name');
    const members = await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/members?membership=join`, { token: bob.accessToken });
    expect(members.body.chunk.map((e: any) => e.state_key).sort()).toEqual([alice.userId, bob.userId].sort());
    const before = await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/members?at=${beforeBob}`, { token: bob.accessToken });
    expect(before.body.chunk.map((e: any) => e.state_key)).toEqual([alice.userId]);
    // Unset avatars come as null, as Synapse sends them, where the spec's schema has strings (see 'joined members' below).
    const joined = await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/joined_members`, { token: bob.accessToken, unchecked: true });
    expect(Object.keys(joined.body.joined).sort()).toEqual([alice.userId, bob.userId].sort());
    expect((await api(server, 'GET', '/_matrix/client/v3/joined_rooms', { token: bob.accessToken })).body.joined_rooms).toContain(roomId);
    const carolOutside = await register(server, 'erin');
    expect((await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/state`, { token: carolOutside.accessToken })).status).toBe(403);
  });

  it('sets state with a state key, gives /context around an event', async () => {
    const roomId = await createRoom(alice);
    await api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/state/org.example.widget/${enc('a/b')}`, { token: alice.accessToken, body: { url: 'x' } });
    expect((await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/state/org.example.widget/${enc('a/b')}`, { token: alice.accessToken })).body).toEqual({ url: 'x' });
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      ids.push((await api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/c${i}`, { token: alice.accessToken, body: { msgtype: 'm.text', body: `c${i}` } })).body.event_id);
    }
    const context = await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/context/${enc(ids[3]!)}?limit=4`, { token: alice.accessToken });
    expect(context.body.event.content.body).toBe('c3');
    expect(context.body.events_before.map((e: any) => e.content.body)).toEqual(['c2', 'c1']);
    expect(context.body.events_after.map((e: any) => e.content.body)).toEqual(['c4', 'c5']);
    expect(context.body.state.some((e: any) => e.type === 'm.room.create')).toBe(true);
  });

  it('publishes aliases and the public room directory', async () => {
    const roomId = await createRoom(alice, { preset: 'public_chat', visibility: 'public', name: 'Town square', room_alias_name: 'town' });
    const alias = `#town:${server.homeserver.serverName}`;
    expect((await api(server, 'GET', `/_matrix/client/v3/directory/room/${enc(alias)}`)).body.room_id).toBe(roomId);
    expect((await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/aliases`, { token: alice.accessToken })).body.aliases).toEqual([alias]);
    const listing = await api(server, 'GET', '/_matrix/client/v3/publicRooms');
    expect(listing.body.chunk.find((r: any) => r.room_id === roomId)).toMatchObject({ name: 'Town square', canonical_alias: alias, join_rule: 'public' });
    const search = await api(server, 'POST', '/_matrix/client/v3/publicRooms', { token: bob.accessToken, body: { filter: { generic_search_term: 'square' } } });
    expect(search.body.chunk.map((r: any) => r.room_id)).toEqual([roomId]);
    await api(server, 'PUT', `/_matrix/client/v3/directory/list/room/${enc(roomId)}`, { token: alice.accessToken, body: { visibility: 'private' } });
    expect((await api(server, 'GET', `/_matrix/client/v3/directory/list/room/${enc(roomId)}`)).body.visibility).toBe('private');
    const other = `#other:${server.homeserver.serverName}`;
    await api(server, 'PUT', `/_matrix/client/v3/directory/room/${enc(other)}`, { token: alice.accessToken, body: { room_id: roomId } });
    expect((await api(server, 'DELETE', `/_matrix/client/v3/directory/room/${enc(other)}`, { token: bob.accessToken })).status).toBe(403);
    expect((await api(server, 'DELETE', `/_matrix/client/v3/directory/room/${enc(other)}`, { token: alice.accessToken })).status).toBe(200);
    const joined = await api(server, 'POST', `/_matrix/client/v3/join/${enc(alias)}`, { token: bob.accessToken, body: {} });
    expect(joined.body.room_id).toBe(roomId);
  });

  it('keeps receipts and read markers', async () => {
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await api(server, 'POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: bob.accessToken, body: {} });
    const { event_id: eventId } = (await api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/r1`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'hi' } })).body;
    let sync = await api(server, 'GET', '/_matrix/client/v3/sync', { token: bob.accessToken });
    expect(sync.body.rooms.join[roomId].unread_notifications.notification_count).toBe(1);
    await api(server, 'POST', `/_matrix/client/v3/rooms/${enc(roomId)}/read_markers`, { token: bob.accessToken, body: { 'm.fully_read': eventId, 'm.read': eventId } });
    sync = await api(server, 'GET', '/_matrix/client/v3/sync', { token: bob.accessToken });
    const receipt = sync.body.rooms.join[roomId].ephemeral.events.find((e: any) => e.type === 'm.receipt');
    expect(receipt.content[eventId]['m.read'][bob.userId].ts).toBeGreaterThan(0);
    expect(sync.body.rooms.join[roomId].unread_notifications.notification_count).toBe(0);
    expect(sync.body.rooms.join[roomId].account_data.events.find((e: any) => e.type === 'm.fully_read').content.event_id).toBe(eventId);
    await api(server, 'POST', `/_matrix/client/v3/rooms/${enc(roomId)}/receipt/m.read.private/${enc(eventId)}`, { token: bob.accessToken, body: {} });
    const aliceView = await api(server, 'GET', '/_matrix/client/v3/sync', { token: alice.accessToken });
    const aliceReceipts = aliceView.body.rooms.join[roomId].ephemeral.events.find((e: any) => e.type === 'm.receipt');
    expect(aliceReceipts.content[eventId]['m.read.private']).toBeUndefined();
  });

  it('forgets a left room', async () => {
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await api(server, 'POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: bob.accessToken, body: {} });
    // Still in it: 400 M_UNKNOWN, the spec's example and Synapse's answer.
    expect(await api(server, 'POST', `/_matrix/client/v3/rooms/${enc(roomId)}/forget`, { token: bob.accessToken, body: {} })).toMatchObject({ status: 400, body: { errcode: 'M_UNKNOWN' } });
    await api(server, 'POST', `/_matrix/client/v3/rooms/${enc(roomId)}/leave`, { token: bob.accessToken, body: {} });
    await api(server, 'POST', `/_matrix/client/v3/rooms/${enc(roomId)}/forget`, { token: bob.accessToken, body: {} });
    const sync = await api(server, 'GET', `/_matrix/client/v3/sync?filter=${enc(JSON.stringify({ room: { include_leave: true } }))}`, { token: bob.accessToken });
    expect(sync.body.rooms.leave[roomId]).toBeUndefined();
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 1).
describe('registration', () => {
  it('lower-cases a username given with capitals, as Synapse and Dendrite do, and still refuses other characters', async () => {
    const r = await api(server, 'POST', `${V3}/register`, { body: { username: 'Mixed.Case', password: PASSWORD, auth: { type: 'm.login.dummy' } } });
    expect(r.status).toBe(200);
    expect(r.body.user_id).toBe(`@mixed.case:${server.homeserver.serverName}`);
    const again = await api(server, 'POST', `${V3}/register`, { body: { username: 'mixed.case', password: PASSWORD, auth: { type: 'm.login.dummy' } } });
    expect([again.status, again.body.errcode]).toEqual([400, 'M_USER_IN_USE']);
    const available = await api(server, 'GET', `${V3}/register/available?username=MIXED.CASE`);
    expect([available.status, available.body.errcode]).toEqual([400, 'M_USER_IN_USE']);
    expect((await api(server, 'GET', `${V3}/register/available?username=Fresh.Name`)).body).toEqual({ available: true });
    const signIn = await api(server, 'POST', `${V3}/login`, { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'Mixed.Case' }, password: PASSWORD } });
    expect(signIn.body.user_id).toBe(r.body.user_id);
    const bad = await api(server, 'POST', `${V3}/register`, { body: { username: 'Has Space', password: PASSWORD, auth: { type: 'm.login.dummy' } } });
    expect([bad.status, bad.body.errcode]).toEqual([400, 'M_INVALID_USERNAME']);
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 3).
describe('deleting devices', () => {
  const { newUser, passwordAuth, login } = clientCalls(() => server);
  it('needs the password of the user who owns the device: another user’s password is refused', async () => {
    const alice = await newUser('alice');
    const mallory = await newUser('mallory');
    const phone = await login(alice);
    const path = `${V3}/devices/${enc(phone.deviceId)}`;
    const challenge = await api(server, 'DELETE', path, { token: alice.accessToken, body: {} });
    expect(challenge.status).toBe(401);
    const session = challenge.body.session as string;
    // Mallory's own, correct, password, with and without naming herself: she authenticated, but as
    // someone else, which Synapse and Dendrite refuse with 403 (issue 24, client behaviour 1).
    for (const auth of [passwordAuth(mallory, PASSWORD, session), { type: 'm.login.password', password: PASSWORD, session, user: mallory.userId }]) {
      const refused = await api(server, 'DELETE', path, { token: alice.accessToken, body: { auth } });
      expect([refused.status, refused.body.errcode]).toEqual([403, 'M_FORBIDDEN']);
    }
    // A wrong password for another user is still a failed stage: 401 with the flows to try again.
    const wrong = await api(server, 'DELETE', path, { token: alice.accessToken, body: { auth: passwordAuth(mallory, 'not it', session) } });
    expect([wrong.status, wrong.body.errcode, wrong.body.session]).toEqual([401, 'M_FORBIDDEN', session]);
    // Mallory, signed in as herself, cannot delete Alice's device with Alice's device ID either.
    const viaMallory = await api(server, 'POST', `${V3}/delete_devices`, { token: mallory.accessToken, body: { devices: [phone.deviceId], auth: passwordAuth(mallory) } });
    expect(viaMallory.status).toBe(200);
    expect((await api(server, 'GET', `${V3}/account/whoami`, { token: phone.accessToken })).status).toBe(200);
    expect((await api(server, 'GET', path, { token: alice.accessToken })).status).toBe(200);
    // Alice's own password does it.
    const ok = await api(server, 'DELETE', path, { token: alice.accessToken, body: { auth: passwordAuth(alice, PASSWORD, session) } });
    expect(ok.status).toBe(200);
    expect((await api(server, 'GET', `${V3}/account/whoami`, { token: phone.accessToken })).status).toBe(401);
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 4).
describe('joined members', () => {
  const { newUser, createRoom, join } = clientCalls(() => server);
  it('gives display_name and avatar_url for each member, null when unset, as Synapse does', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    await api(server, 'PUT', `${V3}/profile/${enc(alice.userId)}/avatar_url`, { token: alice.accessToken, body: { avatar_url: 'mxc://example.org/alice' } });
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await join(bob, roomId);
    const path = `${V3}/rooms/${enc(roomId)}/joined_members`;
    // The spec's schema types both as strings; Synapse and Dendrite send null for an unset one.
    const r = await api(server, 'GET', path, { token: bob.accessToken, unchecked: true });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      joined: {
        [alice.userId]: { display_name: alice.userId.slice(1).split(':')[0], avatar_url: 'mxc://example.org/alice' },
        [bob.userId]: { display_name: bob.userId.slice(1).split(':')[0], avatar_url: null },
      },
    });
    const withoutNulls = JSON.parse(JSON.stringify(r.body, (_key, value) => (value === null ? undefined : value)));
    validateClientResponse('GET', path, 200, withoutNulls);
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 5).
describe('joining with a body', () => {
  const { newUser, createRoom, getState } = clientCalls(() => server);
  it('keeps the body’s reason and extra fields in the membership event, on both join endpoints', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const carol = await newUser('carol');
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    const viaJoin = await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: bob.accessToken, body: { reason: 'hello', 'org.example.colour': 'green' } });
    expect(viaJoin.status).toBe(200);
    const viaRoom = await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/join`, { token: carol.accessToken, body: { reason: 'hi too', 'org.example.size': 3 } });
    expect(viaRoom.status).toBe(200);
    expect(await getState(alice, roomId, 'm.room.member', bob.userId)).toMatchObject({ membership: 'join', reason: 'hello', 'org.example.colour': 'green' });
    expect(await getState(alice, roomId, 'm.room.member', carol.userId)).toMatchObject({ membership: 'join', reason: 'hi too', 'org.example.size': 3 });
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 10).
describe('profiles in rooms', () => {
  const { newUser, createRoom, join, leave, getState } = clientCalls(() => server);
  it('a display name or avatar change updates the member event in every room the user is joined to, and no other', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const own = await createRoom(alice, { preset: 'private_chat' });
    const bobs = await createRoom(bob, { preset: 'public_chat' });
    const left = await createRoom(bob, { preset: 'public_chat' });
    await join(alice, bobs);
    await join(alice, left);
    await leave(alice, left);
    const leftBefore = await api(server, 'GET', `${V3}/rooms/${enc(left)}/state/m.room.member/${enc(alice.userId)}?format=event`, { token: bob.accessToken, unchecked: true });
    await api(server, 'PUT', `${V3}/profile/${enc(alice.userId)}/displayname`, { token: alice.accessToken, body: { displayname: 'Alice Liddell' } });
    await api(server, 'PUT', `${V3}/profile/${enc(alice.userId)}/avatar_url`, { token: alice.accessToken, body: { avatar_url: 'mxc://example.org/rabbit' } });
    for (const roomId of [own, bobs]) {
      expect(await getState(alice, roomId, 'm.room.member', alice.userId)).toEqual({
        membership: 'join', displayname: 'Alice Liddell', avatar_url: 'mxc://example.org/rabbit',
      });
    }
    const leftAfter = await api(server, 'GET', `${V3}/rooms/${enc(left)}/state/m.room.member/${enc(alice.userId)}?format=event`, { token: bob.accessToken, unchecked: true });
    expect(leftAfter.body.event_id).toBe(leftBefore.body.event_id);
    const joined = await api(server, 'GET', `${V3}/rooms/${enc(bobs)}/joined_members`, { token: bob.accessToken, unchecked: true });
    expect(joined.body.joined[alice.userId]).toEqual({ display_name: 'Alice Liddell', avatar_url: 'mxc://example.org/rabbit' });
  });
});

// What Synapse and Dendrite have clients expect (issue 24, client behaviour 2).
describe('rejecting an invite', () => {
  const { newUser, createRoom, leave, sync } = clientCalls(() => server);
  it('works for a local room that every other member has left', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'private_chat', invite: [bob.userId] });
    await leave(alice, roomId);
    const before = await sync(bob, { timeout: 0 });
    expect(Object.keys(before.rooms?.invite ?? {})).toContain(roomId);
    await leave(bob, roomId);
    const after = await sync(bob, { timeout: 0, since: before.next_batch });
    expect(after.rooms?.leave?.[roomId]).toBeDefined();
    expect((await sync(bob, { timeout: 0 })).rooms?.invite?.[roomId]).toBeUndefined();
    const member = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/state/m.room.member/${enc(bob.userId)}`, { token: bob.accessToken });
    expect(member.body.membership).toBe('leave');
  });
});

// The page starts a direct message with createRoom, then invites apart (so an unreachable invitee leaves the room made):
// the invite carries is_direct as createRoom's would (issue 25).
describe('an invite marked is_direct', () => {
  const { newUser, createRoom, sync } = clientCalls(() => server);
  it('puts is_direct in the invite event, which the invitee sees', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'trusted_private_chat', is_direct: true });
    const invited = await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/invite`, { token: alice.accessToken, body: { user_id: bob.userId, is_direct: true } });
    expect(invited.status, JSON.stringify(invited.body)).toBe(200);
    const state = (await sync(bob, { timeout: 0 })).rooms?.invite?.[roomId]?.invite_state?.events ?? [];
    expect(state.find((e: any) => e.type === 'm.room.member' && e.state_key === bob.userId)?.content).toMatchObject({ membership: 'invite', is_direct: true });
    const bad = await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/invite`, { token: alice.accessToken, body: { user_id: bob.userId, is_direct: 'yes' }, unchecked: true });
    expect([bad.status, bad.body.errcode]).toEqual([400, 'M_BAD_JSON']);
  });
});

// What Synapse and Dendrite have clients expect (issue 24, client behaviour 3).
describe('profile fields', () => {
  const { newUser, createRoom, join, getState } = clientCalls(() => server);
  it('takes any string as avatar_url and displayname, and joined_members gives both for each member', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await join(bob, roomId);
    const values = { avatar_url: 'https://example.org/alice.png', displayname: ' Alice 🐇\n(not an mxc: nor a name) ' };
    for (const [field, value] of Object.entries(values)) {
      const set = await api(server, 'PUT', `${V3}/profile/${enc(alice.userId)}/${field}`, { token: alice.accessToken, body: { [field]: value } });
      expect([set.status, set.body]).toEqual([200, {}]);
      const got = await api(server, 'GET', `${V3}/profile/${enc(alice.userId)}/${field}`, { token: bob.accessToken });
      expect(got.body).toEqual({ [field]: value });
    }
    const bobsAvatar = await api(server, 'PUT', `${V3}/profile/${enc(bob.userId)}/avatar_url`, { token: bob.accessToken, body: { avatar_url: 'not a URI at all' } });
    expect(bobsAvatar.status).toBe(200);
    expect(await getState(bob, roomId, 'm.room.member', alice.userId)).toMatchObject({ membership: 'join', ...values });
    // The spec's schema wants an mxc: URI here; what the server holds is what it answers, as Synapse does.
    const joined = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/joined_members`, { token: bob.accessToken, unchecked: true });
    expect(joined.body.joined).toEqual({
      [alice.userId]: { display_name: values.displayname, avatar_url: values.avatar_url },
      [bob.userId]: { display_name: bob.userId.slice(1).split(':')[0], avatar_url: 'not a URI at all' },
    });
  });
});

// What Synapse still serves (issue 24, client behaviour 11): the legacy send without a transaction ID.
describe('sending without a transaction ID', () => {
  const { newUser, createRoom, join, history } = clientCalls(() => server);
  it('POST /rooms/{roomId}/send/{eventType} sends a new event each time, as Synapse does, with the rules of PUT', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await join(bob, roomId);
    const path = `${V3}/rooms/${enc(roomId)}/send/m.room.message`;
    // Not in the spec any more, so the validator knows it not.
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const sent = await api(server, 'POST', path, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'same again' }, unchecked: true });
      expect(sent.status).toBe(200);
      expect(sent.body.event_id).toMatch(/^\$/);
      ids.push(sent.body.event_id);
    }
    expect(ids[0]).not.toBe(ids[1]);
    const seen = (await history(bob, roomId)).filter((e) => e.type === 'm.room.message');
    expect(seen.map((e) => [e.event_id, e.sender, e.content.body])).toEqual(ids.map((id) => [id, alice.userId, 'same again']));
    const r0 = await api(server, 'POST', `/_matrix/client/r0/rooms/${enc(roomId)}/send/m.room.message`, { token: bob.accessToken, body: { msgtype: 'm.text', body: 'r0' }, unchecked: true });
    expect(r0.status).toBe(200);
    const redaction = await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/send/m.room.redaction`, { token: alice.accessToken, body: { redacts: ids[0] }, unchecked: true });
    expect([redaction.status, redaction.body.errcode]).toEqual([400, 'M_BAD_JSON']);
    const outsider = await newUser('carol');
    const refused = await api(server, 'POST', path, { token: outsider.accessToken, body: { msgtype: 'm.text', body: 'let me in' }, unchecked: true });
    expect([refused.status, refused.body.errcode]).toEqual([403, 'M_FORBIDDEN']);
  });
});
