import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, nextLongPoll, register, startTestServer, UNTIL_WOKEN_MS, type Account, type TestServer } from './harness.ts';

// Simplified sliding sync (MSC4186) over raw HTTP: each field and error.

let server: TestServer;
let alice: Account;
let bob: Account;

beforeAll(async () => {
  server = await startTestServer();
  alice = await register(server, 'alice');
  bob = await register(server, 'bob');
});
afterAll(() => server.close());

const enc = encodeURIComponent;
const SS = '/_matrix/client/unstable/org.matrix.simplified_msc3575/sync';
const ss = (account: Account, body: object, query = '') => api(server, 'POST', `${SS}${query}`, { token: account.accessToken, body, unchecked: true });
const send = (account: Account, roomId: string, body: string) =>
  api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/${enc(`t${Math.random()}`)}`, { token: account.accessToken, body: { msgtype: 'm.text', body } });
const createRoom = async (account: Account, body: object = {}) =>
  (await api(server, 'POST', '/_matrix/client/v3/createRoom', { token: account.accessToken, body })).body.room_id as string;
const list = (extra: object = {}) => ({ ranges: [[0, 9]], required_state: [['m.room.name', '']], timeline_limit: 1, ...extra });

describe('sliding sync', () => {
  it('is advertised in /versions', async () => {
    const { body } = await api(server, 'GET', '/_matrix/client/versions');
    expect(body.unstable_features['org.matrix.simplified_msc3575']).toBe(true);
  });

  it('refuses an unknown pos with 400 M_UNKNOWN_POS, a bad body with M_BAD_JSON, and no token with 401', async () => {
    const unknown = await ss(alice, { lists: {} }, '?pos=999999');
    expect(unknown.status).toBe(400);
    expect(unknown.body.errcode).toBe('M_UNKNOWN_POS');
    expect((await ss(alice, { lists: {} }, '?pos=not-a-pos')).body.errcode).toBe('M_UNKNOWN_POS');
    const bad = await ss(alice, { lists: { a: { ranges: [[5, 1]] } } });
    expect(bad.status).toBe(400);
    expect(bad.body.errcode).toBe('M_BAD_JSON');
    expect((await ss(alice, { lists: 'x' })).body.errcode).toBe('M_BAD_JSON');
    const anonymous = await api(server, 'POST', SS, { body: {}, unchecked: true });
    expect(anonymous.status).toBe(401);
    // Another user's pos is unknown to this one.
    const mine = await ss(alice, { lists: {} });
    expect((await ss(bob, { lists: {} }, `?pos=${mine.body.pos}`)).body.errcode).toBe('M_UNKNOWN_POS');
    // So is a pos of another connection of the same device.
    expect((await ss(alice, { lists: {}, conn_id: 'other' }, `?pos=${mine.body.pos}`)).body.errcode).toBe('M_UNKNOWN_POS');
  });

  it("forgets a device's connections when it signs out", async () => {
    const name = `leaving${Date.now()}`;
    await register(server, name);
    const login = async () => {
      const r = await api(server, 'POST', '/_matrix/client/v3/login', { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: name }, password: 'correct horse battery staple', device_id: 'SAMEDEVICE' } });
      return { userId: r.body.user_id, accessToken: r.body.access_token, deviceId: r.body.device_id } as Account;
    };
    const first = await login();
    const pos = (await ss(first, { lists: {} })).body.pos;
    expect((await ss(first, { lists: {} }, `?pos=${pos}&timeout=0`)).status).toBe(200);
    await api(server, 'POST', '/_matrix/client/v3/logout', { token: first.accessToken, body: {} });
    const again = await login();
    expect((await ss(again, { lists: {} }, `?pos=${pos}`)).body.errcode).toBe('M_UNKNOWN_POS');
  });

  it('sorts a list by recency, counts it, builds only the rooms in range and reorders on a new message', async () => {
    const user = await register(server, `sorter${Date.now()}`);
    const rooms: string[] = [];
    for (let i = 0; i < 4; i++) {
      const roomId = await createRoom(user, { name: `room ${i}` });
      await send(user, roomId, `hello ${i}`);
      rooms.push(roomId);
    }
    const first = await ss(user, { lists: { all: list({ ranges: [[0, 1]] }) } });
    expect(first.status).toBe(200);
    expect(first.body.lists.all.count).toBe(4);
    expect(Object.keys(first.body.rooms).sort()).toEqual([rooms[3], rooms[2]].sort());
    const room = first.body.rooms[rooms[3]!];
    expect(room).toMatchObject({ name: 'room 3', initial: true, joined_count: 1, invited_count: 0, notification_count: 0, highlight_count: 0, num_live: 0, limited: true });
    expect(room.timeline.map((e: any) => e.content.body)).toEqual(['hello 3']);
    expect(room.required_state.map((e: any) => e.type)).toEqual(['m.room.name']);
    expect(typeof room.prev_batch).toBe('string');
    expect(room.bump_stamp).toBeGreaterThan(first.body.rooms[rooms[2]!].bump_stamp);

    // A message in the oldest room brings it into range; nothing else changed.
    await send(user, rooms[0]!, 'back on top');
    const second = await ss(user, { lists: { all: list({ ranges: [[0, 1]] }) } }, `?pos=${first.body.pos}`);
    expect(Object.keys(second.body.rooms)).toEqual([rooms[0]]);
    expect(second.body.rooms[rooms[0]!]).toMatchObject({ initial: true, name: 'room 0' });
    expect(second.body.rooms[rooms[0]!].timeline.map((e: any) => e.content.body)).toEqual(['back on top']);

    // A new message in a room the connection has: only the delta, with num_live.
    await send(user, rooms[3]!, 'more');
    const third = await ss(user, { lists: { all: list({ ranges: [[0, 1]] }) } }, `?pos=${second.body.pos}`);
    expect(Object.keys(third.body.rooms)).toEqual([rooms[3]]);
    const delta = third.body.rooms[rooms[3]!];
    expect(delta.initial).toBeUndefined();
    expect(delta.name).toBeUndefined();
    expect(delta.required_state).toBeUndefined();
    expect(delta.timeline.map((e: any) => e.content.body)).toEqual(['more']);
    expect(delta.num_live).toBe(1);
    expect(delta.limited).toBe(false);
  });

  it('answers empty with the same pos when the timeout runs out, and wakes on a new message', async () => {
    const user = await register(server, `poller${Date.now()}`);
    const roomId = await createRoom(user);
    const first = await ss(user, { lists: { all: list() } });
    const idle = await ss(user, { lists: { all: list() } }, `?pos=${first.body.pos}&timeout=50`);
    expect(idle.body.pos).toBe(first.body.pos);
    expect(idle.body.rooms).toEqual({});
    const waiting = nextLongPoll(server);
    const polled = ss(user, { lists: { all: list() } }, `?pos=${first.body.pos}&timeout=20000`);
    await waiting;
    await send(user, roomId, 'wake up');
    const woken = await polled;
    expect(woken.body.pos).not.toBe(first.body.pos);
    expect(woken.body.rooms[roomId].timeline.map((e: any) => e.content.body)).toEqual(['wake up']);
  });

  it('ends an older long poll of the connection when the client resends from the same pos', async () => {
    const user = await register(server, `resender${Date.now()}`);
    const roomId = await createRoom(user);
    const first = await ss(user, { lists: { all: list() } });
    const waiting = nextLongPoll(server);
    const older = ss(user, { lists: { all: list() } }, `?pos=${first.body.pos}&timeout=30000`);
    await waiting;
    const newer = ss(user, { lists: { all: list() } }, `?pos=${first.body.pos}&timeout=30000`);
    // The older one answers at once, with nothing and the pos it was asked from.
    expect((await older).body).toEqual({ pos: first.body.pos, lists: {}, rooms: {}, extensions: {} });
    // The newer one is then the only long poll (it took the older one's place).
    await server.homeserver.services.sync.notifier.untilWaiting(1);
    await send(user, roomId, 'for the newer');
    const answer = await newer;
    expect(answer.body.rooms[roomId].timeline.at(-1).content.body).toBe('for the newer');
    expect((await ss(user, { lists: { all: list() } }, `?pos=${answer.body.pos}&timeout=0`)).status).toBe(200);
  });

  it('counts notifications and highlights, and clears them on a read receipt', async () => {
    const user = await register(server, `counted${Date.now()}`);
    const roomId = await createRoom(bob, { preset: 'public_chat' });
    await api(server, 'POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: user.accessToken, body: {} });
    const first = await ss(user, { lists: { all: list() } });
    await send(bob, roomId, 'plain');
    const mention = await api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/m${Date.now()}`, {
      token: bob.accessToken,
      body: { msgtype: 'm.text', body: `hey ${user.userId}`, 'm.mentions': { user_ids: [user.userId] } },
    });
    const second = await ss(user, { lists: { all: list() } }, `?pos=${first.body.pos}`);
    expect(second.body.rooms[roomId]).toMatchObject({ notification_count: 2, highlight_count: 1 });
    await api(server, 'POST', `/_matrix/client/v3/rooms/${enc(roomId)}/receipt/m.read/${enc(mention.body.event_id)}`, { token: user.accessToken, body: {} });
    const third = await ss(user, { lists: { all: list() } }, `?pos=${second.body.pos}`);
    expect(third.body.rooms[roomId]).toMatchObject({ notification_count: 0, highlight_count: 0 });
    expect(third.body.rooms[roomId].timeline).toBeUndefined();
  });

  it('serves required_state with ["*","*"], $LAZY and $ME, and sends a state change as a delta', async () => {
    const user = await register(server, `stater${Date.now()}`);
    const other = await register(server, `other${Date.now()}`);
    const roomId = await createRoom(user, { preset: 'public_chat', name: 'stateful', topic: 'a topic' });
    await api(server, 'POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: other.accessToken, body: {} });
    await send(other, roomId, 'from the other');
    const all = await ss(user, { room_subscriptions: { [roomId]: { required_state: [['*', '*']], timeline_limit: 0 } } });
    const types = all.body.rooms[roomId].required_state.map((e: any) => e.type);
    expect(types).toEqual(expect.arrayContaining(['m.room.create', 'm.room.name', 'm.room.topic', 'm.room.power_levels', 'm.room.join_rules', 'm.room.member']));
    expect(all.body.rooms[roomId].timeline).toEqual([]);

    const lazy = await ss(user, { conn_id: 'lazy', room_subscriptions: { [roomId]: { required_state: [['m.room.member', '$LAZY']], timeline_limit: 1 } } });
    expect(lazy.body.rooms[roomId].required_state.map((e: any) => e.state_key)).toEqual([other.userId]);
    const me = await ss(user, { conn_id: 'me', room_subscriptions: { [roomId]: { required_state: [['m.room.member', '$ME']], timeline_limit: 0 } } });
    expect(me.body.rooms[roomId].required_state.map((e: any) => e.state_key)).toEqual([user.userId]);

    // A rename reaches the '*' connection as one changed state event in the timeline, with the new name.
    await api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.name/`, { token: user.accessToken, body: { name: 'renamed' } });
    const next = await ss(user, {}, `?pos=${all.body.pos}`);
    expect(next.body.rooms[roomId].name).toBe('renamed');
    expect(next.body.rooms[roomId].required_state.map((e: any) => e.content.name)).toEqual(['renamed']);

    // An avatar set, then taken away: its mxc URI, then null.
    await api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.avatar/`, { token: user.accessToken, body: { url: 'mxc://example.org/abc' } });
    const withAvatar = await ss(user, {}, `?pos=${next.body.pos}`);
    expect(withAvatar.body.rooms[roomId].avatar).toBe('mxc://example.org/abc');
    await api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.avatar/`, { token: user.accessToken, body: {} });
    const withoutAvatar = await ss(user, {}, `?pos=${withAvatar.body.pos}`);
    expect(withoutAvatar.body.rooms[roomId].avatar).toBeNull();
  });

  it('serves invites with invite_state and filters by is_invite, is_dm, is_encrypted and room_types', async () => {
    const user = await register(server, `filtered${Date.now()}`);
    const plain = await createRoom(user, { name: 'plain' });
    const encrypted = await createRoom(user, { name: 'secret', initial_state: [{ type: 'm.room.encryption', state_key: '', content: { algorithm: 'm.megolm.v1.aes-sha2' } }] });
    const space = await createRoom(user, { name: 'space', creation_content: { type: 'm.space' } });
    const dm = await createRoom(bob, { is_direct: true, invite: [user.userId] });
    await api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(space)}/state/m.space.child/${enc(plain)}`, { token: user.accessToken, body: { via: ['x'] } });
    const r = await ss(user, {
      lists: {
        invites: list({ filters: { is_invite: true } }),
        dms: list({ filters: { is_dm: true } }),
        encrypted: list({ filters: { is_encrypted: true } }),
        spaces: list({ filters: { room_types: ['m.space'] } }),
        rooms: list({ filters: { not_room_types: ['m.space'], is_invite: false } }),
        children: list({ filters: { spaces: [space] } }),
      },
    });
    expect(r.body.lists).toEqual({ invites: { count: 1 }, dms: { count: 1 }, encrypted: { count: 1 }, spaces: { count: 1 }, rooms: { count: 2 }, children: { count: 1 } });
    expect(r.body.rooms[dm]).toMatchObject({ initial: true, is_dm: true });
    expect(r.body.rooms[dm].invite_state.some((e: any) => e.type === 'm.room.member' && e.state_key === user.userId && e.content.membership === 'invite')).toBe(true);
    expect(r.body.rooms[encrypted].name).toBe('secret');
    expect(r.body.rooms[plain]).toBeDefined();
    expect(r.body.rooms[space]).toBeDefined();
  });

  it('serves a knock with knock_state, and a ban keeps the room in the list with the ban in its timeline', async () => {
    const user = await register(server, `knocker${Date.now()}`);
    const knockable = await createRoom(bob, { name: 'knock here', room_version: '10', initial_state: [{ type: 'm.room.join_rules', state_key: '', content: { join_rule: 'knock' } }] });
    expect((await api(server, 'POST', `/_matrix/client/v3/knock/${enc(knockable)}`, { token: user.accessToken, body: {} })).status).toBe(200);
    const banning = await createRoom(bob, { preset: 'public_chat', name: 'banning' });
    await api(server, 'POST', `/_matrix/client/v3/join/${enc(banning)}`, { token: user.accessToken, body: {} });
    const first = await ss(user, { lists: { all: list() } });
    expect(first.body.rooms[knockable].initial).toBe(true);
    expect(first.body.rooms[knockable].knock_state.some((e: any) => e.type === 'm.room.member' && e.state_key === user.userId && e.content.membership === 'knock')).toBe(true);
    expect(first.body.rooms[knockable].name).toBe('knock here');
    await api(server, 'POST', `/_matrix/client/v3/rooms/${enc(banning)}/ban`, { token: bob.accessToken, body: { user_id: user.userId, reason: 'test' } });
    const second = await ss(user, { lists: { all: list({ required_state: [['m.room.member', '$ME']] }) } }, `?pos=${first.body.pos}`);
    expect(second.body.rooms[banning].timeline.at(-1)).toMatchObject({ type: 'm.room.member', content: { membership: 'ban' } });
    expect(second.body.rooms[banning].required_state).toEqual([expect.objectContaining({ state_key: user.userId, content: expect.objectContaining({ membership: 'ban' }) })]);
    // Banned by another: it stays in the list (Synapse shows kicks and bans), not sent again.
    const third = await ss(user, { lists: { all: list({ required_state: [['m.room.member', '$ME']] }) } }, `?pos=${second.body.pos}&timeout=0`);
    expect(third.body.lists.all.count).toBe(2);
    expect(third.body.rooms).toEqual({});
  });

  it('serves heroes for an unnamed room, and a leave as the room with the leave in its timeline', async () => {
    const user = await register(server, `leaver${Date.now()}`);
    const roomId = await createRoom(bob, { preset: 'public_chat' });
    await api(server, 'PUT', `/_matrix/client/v3/profile/${enc(bob.userId)}/displayname`, { token: bob.accessToken, body: { displayname: 'Bob' } });
    await api(server, 'POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: user.accessToken, body: {} });
    const first = await ss(user, { lists: { all: list() } });
    expect(first.body.rooms[roomId].heroes).toEqual([{ user_id: bob.userId, displayname: 'Bob' }]);
    expect(first.body.rooms[roomId].joined_count).toBe(2);
    await api(server, 'POST', `/_matrix/client/v3/rooms/${enc(roomId)}/leave`, { token: user.accessToken, body: {} });
    const second = await ss(user, { lists: { all: list() } }, `?pos=${first.body.pos}`);
    const left = second.body.rooms[roomId];
    expect(left.timeline.at(-1)).toMatchObject({ type: 'm.room.member', state_key: user.userId, content: { membership: 'leave' } });
    expect(second.body.lists.all.count).toBe(1);
    // Told once: the room then leaves the list.
    const third = await ss(user, { lists: { all: list() } }, `?pos=${second.body.pos}&timeout=0`);
    expect(third.body.lists.all.count).toBe(0);
  });

  it('replays an answer when the client retries a pos, and forgets positions before the one used', async () => {
    const user = await register(server, `retrier${Date.now()}`);
    const roomId = await createRoom(user);
    const first = await ss(user, { lists: { all: list() } });
    await send(user, roomId, 'once');
    const a = await ss(user, { lists: { all: list() } }, `?pos=${first.body.pos}`);
    const b = await ss(user, { lists: { all: list() } }, `?pos=${first.body.pos}`);
    expect(b.body.rooms[roomId].timeline.map((e: any) => e.content.body)).toEqual(['once']);
    expect(a.body.pos).not.toBe(b.body.pos);
    await send(user, roomId, 'twice');
    const c = await ss(user, { lists: { all: list() } }, `?pos=${b.body.pos}`);
    expect(c.body.rooms[roomId].timeline.map((e: any) => e.content.body)).toEqual(['twice']);
    expect((await ss(user, { lists: {} }, `?pos=${first.body.pos}`)).body.errcode).toBe('M_UNKNOWN_POS');
    expect((await ss(user, { lists: {} }, `?pos=${a.body.pos}`)).body.errcode).toBe('M_UNKNOWN_POS');
  });

  it('keeps room subscriptions until unsubscribed, and echoes txn_id', async () => {
    const user = await register(server, `subscriber${Date.now()}`);
    const roomId = await createRoom(user, { name: 'subscribed' });
    const first = await ss(user, { txn_id: 'abc', room_subscriptions: { [roomId]: { required_state: [], timeline_limit: 5 } } });
    expect(first.body.txn_id).toBe('abc');
    expect(first.body.rooms[roomId].timeline.length).toBeGreaterThan(0);
    await send(user, roomId, 'still subscribed');
    const second = await ss(user, {}, `?pos=${first.body.pos}`);
    expect(second.body.rooms[roomId].timeline.map((e: any) => e.content.body)).toEqual(['still subscribed']);
    const third = await ss(user, { unsubscribe_rooms: [roomId] }, `?pos=${second.body.pos}`);
    await send(user, roomId, 'not subscribed');
    const fourth = await ss(user, {}, `?pos=${third.body.pos}&timeout=0`);
    expect(fourth.body.rooms).toEqual({});
  });

  it('serves to_device (deleted once acknowledged), e2ee, account_data, receipts and typing', async () => {
    const user = await register(server, `extended${Date.now()}`);
    const roomId = await createRoom(user, { preset: 'public_chat' });
    await api(server, 'POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: bob.accessToken, body: {} });
    const sent = await send(user, roomId, 'read me');
    await api(server, 'PUT', `/_matrix/client/v3/user/${enc(user.userId)}/account_data/m.global`, { token: user.accessToken, body: { a: 1 } });
    await api(server, 'PUT', `/_matrix/client/v3/user/${enc(user.userId)}/rooms/${enc(roomId)}/account_data/m.tag.like`, { token: user.accessToken, body: { b: 2 } });
    await api(server, 'PUT', `/_matrix/client/v3/sendToDevice/m.test/${Date.now()}`, { token: bob.accessToken, body: { messages: { [user.userId]: { [user.deviceId]: { hi: 1 } } } } });
    await api(server, 'POST', `/_matrix/client/v3/rooms/${enc(roomId)}/receipt/m.read/${enc(sent.body.event_id)}`, { token: bob.accessToken, body: {} });
    await api(server, 'POST', `/_matrix/client/v3/keys/upload`, { token: user.accessToken, body: { one_time_keys: { 'signed_curve25519:AAAA': { key: 'k', signatures: {} } } }, unchecked: true });
    await api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/typing/${enc(bob.userId)}`, { token: bob.accessToken, body: { typing: true, timeout: 30000 } });
    const extensions = { to_device: { enabled: true }, e2ee: { enabled: true }, account_data: { enabled: true }, receipts: { enabled: true }, typing: { enabled: true } };
    const first = await ss(user, { lists: { all: list() }, extensions });
    const ext = first.body.extensions;
    expect(ext.to_device.events).toEqual([{ sender: bob.userId, type: 'm.test', content: { hi: 1 } }]);
    expect(typeof ext.to_device.next_batch).toBe('string');
    expect(ext.e2ee.device_one_time_keys_count).toEqual({ signed_curve25519: 1 });
    expect(ext.e2ee.device_unused_fallback_key_types).toEqual([]);
    expect(ext.account_data.global).toEqual(expect.arrayContaining([{ type: 'm.global', content: { a: 1 } }]));
    expect(ext.account_data.rooms[roomId]).toEqual([{ type: 'm.tag.like', content: { b: 2 } }]);
    expect(ext.receipts.rooms[roomId]).toEqual({ type: 'm.receipt', content: { [sent.body.event_id]: { 'm.read': { [bob.userId]: { ts: expect.any(Number) } } } } });
    expect(ext.typing.rooms[roomId]).toEqual({ type: 'm.typing', content: { user_ids: [bob.userId] } });

    // Sent again until acknowledged; gone once the next request names its next_batch.
    const retried = await ss(user, { conn_id: 'again', lists: { all: list() }, extensions: { to_device: { enabled: true } } });
    expect(retried.body.extensions.to_device.events).toHaveLength(1);
    await ss(user, { conn_id: 'again', lists: { all: list() }, extensions: { to_device: { enabled: true, since: retried.body.extensions.to_device.next_batch } } }, `?pos=${retried.body.pos}&timeout=0`);
    expect(await server.homeserver.services.keys.toDevice.pending(user.userId, user.deviceId)).toBe(0);

    // Incremental: device lists of a new member, and typing that stopped.
    const carol = await register(server, `carol${Date.now()}`);
    await api(server, 'POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: carol.accessToken, body: {} });
    await api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/typing/${enc(bob.userId)}`, { token: bob.accessToken, body: { typing: false } });
    const next = await ss(user, { lists: { all: list() } }, `?pos=${first.body.pos}`);
    expect(next.body.extensions.e2ee.device_lists.changed).toContain(carol.userId);
    expect(next.body.extensions.typing.rooms[roomId]).toEqual({ type: 'm.typing', content: { user_ids: [] } });
    expect(next.body.extensions.account_data).toEqual({ global: [], rooms: {} });
  });

  it('carries m.fully_read set through POST /read_markers in account_data: in a first answer, and to a waiting long poll it wakes', async () => {
    const user = await register(server, `marker${Date.now()}`);
    const roomId = await createRoom(bob, { preset: 'public_chat' });
    await api(server, 'POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: user.accessToken, body: {} });
    const first = (await send(bob, roomId, 'first')).body.event_id as string;
    const second = (await send(bob, roomId, 'second')).body.event_id as string;
    const markers = (eventId: string) =>
      api(server, 'POST', `/_matrix/client/v3/rooms/${enc(roomId)}/read_markers`, { token: user.accessToken, body: { 'm.fully_read': eventId, 'm.read': eventId, 'm.read.private': eventId } });
    expect((await markers(first)).status).toBe(200);
    const extensions = { account_data: { enabled: true }, receipts: { enabled: true } };
    const initial = await ss(user, { lists: { all: list() }, extensions });
    expect(initial.body.extensions.account_data.rooms[roomId]).toEqual([{ type: 'm.fully_read', content: { event_id: first } }]);

    // The client waits; moving the marker answers it with the new one (the m.read receipt rides along).
    const waiting = nextLongPoll(server);
    const polled = ss(user, { lists: { all: list() }, extensions }, `?pos=${initial.body.pos}&timeout=${UNTIL_WOKEN_MS}`);
    await waiting;
    expect((await markers(second)).status).toBe(200);
    const woken = (await polled).body.extensions;
    expect(woken.account_data.rooms[roomId]).toEqual([{ type: 'm.fully_read', content: { event_id: second } }]);
    expect(woken.receipts.rooms[roomId].content[second]['m.read'][user.userId]).toBeDefined();
  });

  it('restricts account data to the lists and rooms asked', async () => {
    const user = await register(server, `scoped${Date.now()}`);
    const inList = await createRoom(user);
    const outside = await createRoom(user, { creation_content: { type: 'm.space' } });
    for (const roomId of [inList, outside]) {
      await api(server, 'PUT', `/_matrix/client/v3/user/${enc(user.userId)}/rooms/${enc(roomId)}/account_data/m.x`, { token: user.accessToken, body: { roomId } });
    }
    const r = await ss(user, {
      lists: { rooms: list({ filters: { not_room_types: ['m.space'] } }), spaces: list({ filters: { room_types: ['m.space'] } }) },
      extensions: { account_data: { enabled: true, lists: ['rooms'], rooms: [] } },
    });
    expect(Object.keys(r.body.extensions.account_data.rooms)).toEqual([inList]);
  });
});
