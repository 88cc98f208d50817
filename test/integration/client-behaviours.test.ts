import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateClientResponse } from '../support/spec-schema.ts';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

// What established homeservers (Synapse, Dendrite) and the spec have clients
// expect of the client API, one behaviour at a time (issue 13, items 1–17).
// Raw HTTP, every request and response checked against the spec's OpenAPI
// unless said otherwise.

let server: TestServer;
const V3 = '/_matrix/client/v3';
const PASSWORD = 'correct horse battery staple';
const enc = encodeURIComponent;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

let users = 0;
const newUser = (name: string) => register(server, `${name}${++users}`);

const createRoom = async (account: Account, body: object = {}) => {
  const r = await api(server, 'POST', `${V3}/createRoom`, { token: account.accessToken, body });
  expect(r.status).toBe(200);
  return r.body.room_id as string;
};
const join = async (account: Account, roomId: string) => {
  const r = await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: account.accessToken, body: {} });
  expect(r.status).toBe(200);
};
const leave = async (account: Account, roomId: string) => {
  const r = await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/leave`, { token: account.accessToken, body: {} });
  expect(r.status).toBe(200);
};
const send = async (account: Account, roomId: string, body: string) => {
  const r = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/${enc(`t${Math.random()}`)}`, {
    token: account.accessToken, body: { msgtype: 'm.text', body },
  });
  expect(r.status).toBe(200);
  return r.body.event_id as string;
};
const putState = async (account: Account, roomId: string, type: string, key: string, content: object) => {
  const r = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/state/${enc(type)}/${enc(key)}`, { token: account.accessToken, body: content });
  expect(r.status).toBe(200);
  return r.body.event_id as string;
};
const getState = async (account: Account, roomId: string, type: string, key = '') =>
  (await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/state/${enc(type)}/${enc(key)}`, { token: account.accessToken })).body;
const sync = async (account: Account, query: Record<string, string | number | object> = {}) => {
  const params = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, typeof v === 'object' ? JSON.stringify(v) : String(v)]));
  const r = await api(server, 'GET', `${V3}/sync?${params}`, { token: account.accessToken });
  expect(r.status).toBe(200);
  return r.body;
};
const messages = async (account: Account, roomId: string, query: Record<string, string | number | object> = {}) => {
  const params = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, typeof v === 'object' ? JSON.stringify(v) : String(v)]));
  const r = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/messages?${params}`, { token: account.accessToken });
  expect(r.status).toBe(200);
  return r.body;
};
const bodies = (events: any[]) => events.filter((e) => e.type === 'm.room.message').map((e) => e.content.body);
const passwordAuth = (account: Account, password = PASSWORD, session?: string) => ({
  type: 'm.login.password', identifier: { type: 'm.id.user', user: account.userId }, password, ...(session ? { session } : {}),
});
const login = async (account: Account) => {
  const r = await api(server, 'POST', `${V3}/login`, { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: account.userId }, password: PASSWORD } });
  expect(r.status).toBe(200);
  return { userId: account.userId, accessToken: r.body.access_token as string, deviceId: r.body.device_id as string };
};
/** Every timeline event of a room a user can page back to, oldest first. */
const history = async (account: Account, roomId: string) => {
  const events: any[] = [];
  let from: string | undefined;
  for (;;) {
    const page = await messages(account, roomId, { dir: 'b', limit: 50, ...(from ? { from } : {}) });
    events.unshift(...[...page.chunk].reverse());
    if (!page.end) return events;
    from = page.end;
  }
};

describe('1. registration', () => {
  it('1. lower-cases a username given with capitals, as Synapse and Dendrite do, and still refuses other characters', async () => {
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

describe('2. request bodies', () => {
  const invalidUtf8 = (before: string, after: string) =>
    new Uint8Array([...new TextEncoder().encode(before), 0xff, 0xfe, 0xc3, ...new TextEncoder().encode(after)]);

  it('2. M_NOT_JSON for a body that is not valid UTF-8, before any other check', async () => {
    const alice = await newUser('alice');
    const headers = { 'content-type': 'application/json' };
    // A username the decoder would otherwise turn into U+FFFD and refuse as M_INVALID_USERNAME.
    const registration = await api(server, 'POST', `${V3}/register`, { rawBody: invalidUtf8('{"username":"x', '","auth":{"type":"m.login.dummy"}}'), headers });
    expect([registration.status, registration.body.errcode]).toEqual([400, 'M_NOT_JSON']);
    const roomId = await createRoom(alice);
    const message = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/utf8`, {
      token: alice.accessToken, rawBody: invalidUtf8('{"msgtype":"m.text","body":"', '"}'), headers,
    });
    expect([message.status, message.body.errcode]).toEqual([400, 'M_NOT_JSON']);
    expect(bodies(await history(alice, roomId))).toEqual([]);
    // Before the path, the auth and the shape are looked at.
    const badRoom = await api(server, 'PUT', `${V3}/rooms/not-a-room/send/m.room.message/utf8`, {
      token: alice.accessToken, rawBody: invalidUtf8('{"body":"', '"}'), headers, unchecked: true,
    });
    expect([badRoom.status, badRoom.body.errcode]).toEqual([400, 'M_NOT_JSON']);
    const noToken = await api(server, 'POST', `${V3}/createRoom`, { rawBody: invalidUtf8('{"name":"', '"}'), headers });
    expect([noToken.status, noToken.body.errcode]).toEqual([400, 'M_NOT_JSON']);
    // Valid UTF-8 beyond ASCII is still welcome.
    const fine = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/utf8-ok`, {
      token: alice.accessToken, rawBody: new TextEncoder().encode('{"msgtype":"m.text","body":"naïve ☃ 🐈"}'), headers,
    });
    expect(fine.status).toBe(200);
    expect(bodies(await history(alice, roomId))).toEqual(['naïve ☃ 🐈']);
  });
});

describe('3. deleting devices', () => {
  it('3. needs the password of the user who owns the device: another user’s password is refused', async () => {
    const alice = await newUser('alice');
    const mallory = await newUser('mallory');
    const phone = await login(alice);
    const path = `${V3}/devices/${enc(phone.deviceId)}`;
    const challenge = await api(server, 'DELETE', path, { token: alice.accessToken, body: {} });
    expect(challenge.status).toBe(401);
    const session = challenge.body.session as string;
    // Mallory's own, correct, password, with and without naming herself.
    for (const auth of [passwordAuth(mallory, PASSWORD, session), { type: 'm.login.password', password: PASSWORD, session, user: mallory.userId }]) {
      const refused = await api(server, 'DELETE', path, { token: alice.accessToken, body: { auth } });
      expect([refused.status, refused.body.errcode]).toEqual([401, 'M_FORBIDDEN']);
    }
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

describe('4. joined members', () => {
  it('4. gives display_name and avatar_url for each member, null when unset, as Synapse does', async () => {
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

describe('5. joining with a body', () => {
  it('5. keeps the body’s reason and extra fields in the membership event, on both join endpoints', async () => {
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

describe('6. /messages', () => {
  it('6. always returns start, returns end while more may exist, and lazy-loads the senders’ members as they were', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await join(bob, roomId);
    await send(alice, roomId, 'a1');
    await api(server, 'PUT', `${V3}/profile/${enc(bob.userId)}/displayname`, { token: bob.accessToken, body: { displayname: 'Bob the first' } });
    await send(bob, roomId, 'b1');
    await api(server, 'PUT', `${V3}/profile/${enc(bob.userId)}/displayname`, { token: bob.accessToken, body: { displayname: 'Bob the second' } });
    await send(alice, roomId, 'a2');
    const all = await history(alice, roomId);
    expect(all[0].type).toBe('m.room.create');

    // Backwards two at a time to the room's creation: every page has start, all but the last have end.
    const seen: string[] = [];
    let from: string | undefined;
    for (;;) {
      const page = await messages(alice, roomId, { dir: 'b', limit: 2, ...(from ? { from } : {}) });
      expect(typeof page.start).toBe('string');
      if (from) expect(page.start).toBe(from);
      seen.push(...page.chunk.map((e: any) => e.event_id));
      if (!page.end) break;
      from = page.end;
    }
    expect(seen).toEqual(all.map((e) => e.event_id).reverse());
    // Forwards from the start, the same, in order.
    const forward: string[] = [];
    from = undefined;
    for (;;) {
      const page = await messages(alice, roomId, { dir: 'f', limit: 3, ...(from ? { from } : {}) });
      expect(typeof page.start).toBe('string');
      forward.push(...page.chunk.map((e: any) => e.event_id));
      if (!page.end) break;
      from = page.end;
    }
    expect(forward).toEqual(all.map((e) => e.event_id));
    // A page with nothing left has start and no end.
    const empty = await messages(alice, roomId, { dir: 'f', from: (await sync(alice)).next_batch });
    expect(empty.chunk).toEqual([]);
    expect(typeof empty.start).toBe('string');
    expect(empty.end).toBeUndefined();

    // lazy_load_members: the senders' member events, as they were when they sent.
    const b1At = all.findIndex((e) => e.content.body === 'b1');
    const page = await messages(alice, roomId, { dir: 'b', limit: 1, from: (await messages(alice, roomId, { dir: 'b', limit: all.length - b1At - 1 })).end, filter: { lazy_load_members: true } });
    expect(bodies(page.chunk)).toEqual(['b1']);
    expect(page.state.map((e: any) => [e.type, e.state_key, e.content.displayname])).toEqual([['m.room.member', bob.userId, 'Bob the first']]);
    const latest = await messages(alice, roomId, { dir: 'b', limit: 4, filter: { lazy_load_members: true, types: ['m.room.message'] } });
    expect(bodies(latest.chunk)).toEqual(['a2', 'b1', 'a1']);
    expect(Object.fromEntries(latest.state.map((e: any) => [e.state_key, e.content.displayname]))).toEqual({
      [alice.userId]: alice.userId.slice(1).split(':')[0],
      [bob.userId]: 'Bob the first',
    });
    // Without lazy loading, no member state.
    expect((await messages(alice, roomId, { dir: 'b', limit: 4 })).state ?? []).toEqual([]);
  });
});

describe('7. pushers', () => {
  const pusher = (pushkey: string, extra: object = {}) => ({
    kind: 'http', app_id: 'org.example.app', pushkey, app_display_name: 'Example', device_display_name: 'Phone', lang: 'en',
    data: { url: 'https://push.example.org/_matrix/push/v1/notify', format: 'event_id_only', 'org.example.custom': 1 }, ...extra,
  });

  it('7. sets, lists, replaces and deletes pushers, and refuses incomplete ones', async () => {
    const alice = await newUser('alice');
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body).toEqual({ pushers: [] });
    expect((await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('k1', { profile_tag: 'tag' }) })).status).toBe(200);
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body).toEqual({ pushers: [pusher('k1', { profile_tag: 'tag' })] });
    // The same app and key again updates it.
    await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('k1', { lang: 'fr' }) });
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers).toEqual([pusher('k1', { lang: 'fr' })]);
    await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('k2') });
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['k1', 'k2']);
    // kind null deletes.
    await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: { kind: null, app_id: 'org.example.app', pushkey: 'k1' } });
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['k2']);
    // Another user taking the same app and key takes it over, unless appending.
    const bob = await newUser('bob');
    await api(server, 'POST', `${V3}/pushers/set`, { token: bob.accessToken, body: pusher('k2') });
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers).toEqual([]);
    await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('k2', { append: true }) });
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['k2']);
    expect((await api(server, 'GET', `${V3}/pushers`, { token: bob.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['k2']);

    const missing = await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: { kind: 'http', app_id: 'org.example.app', pushkey: 'k3', data: {} } });
    expect([missing.status, missing.body.errcode]).toEqual([400, 'M_MISSING_PARAM']);
    const noUrl = await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('k3', { data: {} }) });
    expect([noUrl.status, noUrl.body.errcode]).toEqual([400, 'M_MISSING_PARAM']);
    const badPath = await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('k3', { data: { url: 'https://push.example.org/notify' } }) });
    expect([badPath.status, badPath.body.errcode]).toEqual([400, 'M_INVALID_PARAM']);
    const longKey = await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('k'.repeat(513)) });
    expect([longKey.status, longKey.body.errcode]).toEqual([400, 'M_INVALID_PARAM']);
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['k2']);
  });

  it('7. on a password change, deletes the pushers other access tokens made and keeps the current token’s', async () => {
    const alice = await newUser('alice');
    const phone = await login(alice);
    const laptop = await login(alice);
    await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('mine') });
    await api(server, 'POST', `${V3}/pushers/set`, { token: phone.accessToken, body: pusher('phone') });
    await api(server, 'POST', `${V3}/pushers/set`, { token: laptop.accessToken, body: pusher('laptop') });
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['mine', 'phone', 'laptop']);
    const changed = await api(server, 'POST', `${V3}/account/password`, { token: alice.accessToken, body: { new_password: 'a new password', auth: passwordAuth(alice) } });
    expect(changed.status).toBe(200);
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['mine']);
    for (const other of [phone, laptop]) expect((await api(server, 'GET', `${V3}/account/whoami`, { token: other.accessToken })).status).toBe(401);
  });

  it('7. a device deleted or logged out takes its token’s pushers with it', async () => {
    const alice = await newUser('alice');
    const phone = await login(alice);
    await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('mine') });
    await api(server, 'POST', `${V3}/pushers/set`, { token: phone.accessToken, body: pusher('phone') });
    await api(server, 'POST', `${V3}/logout`, { token: phone.accessToken, body: {} });
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['mine']);
  });
});

describe('8. repeated state', () => {
  it('8. setting a state event identical to the current one returns its event ID and makes no new event', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    const first = await putState(alice, roomId, 'm.room.topic', '', { topic: 'Gardening' });
    const before = await history(alice, roomId);
    expect(await putState(alice, roomId, 'm.room.topic', '', { topic: 'Gardening' })).toBe(first);
    expect(await putState(alice, roomId, 'm.room.topic', '', { topic: 'Gardening' })).toBe(first);
    expect((await history(alice, roomId)).map((e) => e.event_id)).toEqual(before.map((e) => e.event_id));
    // A change, or the same content from someone else, is a new event.
    const changed = await putState(alice, roomId, 'm.room.topic', '', { topic: 'Cooking' });
    expect(changed).not.toBe(first);
    await putState(alice, roomId, 'm.room.power_levels', '', { ...(await getState(alice, roomId, 'm.room.power_levels')), users: { [alice.userId]: 100, [bob.userId]: 50 } });
    await join(bob, roomId);
    const bobs = await putState(bob, roomId, 'm.room.topic', '', { topic: 'Cooking' });
    expect(bobs).not.toBe(changed);
    // The same membership with the same content (a repeated profile-less rejoin) is no new event either.
    const member = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/state/m.room.member/${enc(bob.userId)}?format=event`, { token: bob.accessToken, unchecked: true });
    expect(await putState(bob, roomId, 'm.room.member', bob.userId, member.body.content)).toBe(member.body.event_id);
  });
});

describe('9. typing', () => {
  it('9. typing expires after its timeout, and a waiting /sync hears that the user stopped', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await join(bob, roomId);
    const typing = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/typing/${enc(alice.userId)}`, { token: alice.accessToken, body: { typing: true, timeout: 300 } });
    expect(typing.status).toBe(200);
    const now = await sync(bob);
    const typingNow = now.rooms.join[roomId].ephemeral.events.find((e: any) => e.type === 'm.typing');
    expect(typingNow.content.user_ids).toEqual([alice.userId]);
    const started = Date.now();
    const later = await sync(bob, { since: now.next_batch, timeout: 20_000 });
    expect(Date.now() - started).toBeLessThan(10_000);
    const stopped = later.rooms.join[roomId].ephemeral.events.find((e: any) => e.type === 'm.typing');
    expect(stopped.content.user_ids).toEqual([]);
  });
});

describe('10. profiles in rooms', () => {
  it('10. a display name or avatar change updates the member event in every room the user is joined to, and no other', async () => {
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

describe('11. a room joined since the token', () => {
  it('11. incremental /sync gives its full state, its recent timeline and its members’ presence', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(bob, { preset: 'public_chat', name: 'Joined later', topic: 'about it' });
    for (let i = 0; i < 3; i++) await send(bob, roomId, `before ${i}`);
    await api(server, 'PUT', `${V3}/presence/${enc(bob.userId)}/status`, { token: bob.accessToken, body: { presence: 'unavailable', status_msg: 'gardening' } });
    const since = (await sync(alice)).next_batch;
    await join(alice, roomId);
    const r = await sync(alice, { since });
    const room = r.rooms.join[roomId];
    const types = [...room.state.events, ...room.timeline.events].filter((e: any) => e.state_key !== undefined).map((e: any) => `${e.type}|${e.state_key}`);
    expect(types).toEqual(expect.arrayContaining([
      'm.room.create|', 'm.room.power_levels|', 'm.room.join_rules|', 'm.room.name|', 'm.room.topic|', 'm.room.history_visibility|',
      `m.room.member|${bob.userId}`, `m.room.member|${alice.userId}`,
    ]));
    expect(room.timeline.events.at(-1)).toMatchObject({ type: 'm.room.member', state_key: alice.userId });
    expect(bodies(room.timeline.events)).toEqual(['before 0', 'before 1', 'before 2']);
    expect(r.presence.events.find((e: any) => e.sender === bob.userId)?.content).toMatchObject({ presence: 'unavailable', status_msg: 'gardening' });
  });
});

describe('12. timeline limits', () => {
  it('12. honours a filter’s timeline limit and sets limited exactly when events were left out', async () => {
    const alice = await newUser('alice');
    const roomId = await createRoom(alice, { preset: 'private_chat' });
    const limit = (n: number, extra: object = {}) => ({ room: { rooms: [roomId], timeline: { limit: n, ...extra } } });
    const initial = await sync(alice, { filter: limit(3) });
    expect(initial.rooms.join[roomId].timeline.events).toHaveLength(3);
    expect(initial.rooms.join[roomId].timeline.limited).toBe(true);
    const everything = await sync(alice, { filter: limit(50) });
    expect(everything.rooms.join[roomId].timeline.events[0].type).toBe('m.room.create');
    expect(everything.rooms.join[roomId].timeline.limited).toBe(false);

    for (let i = 0; i < 3; i++) await send(alice, roomId, `m${i}`);
    await putState(alice, roomId, 'm.room.topic', '', { topic: 'after the messages' });
    // Only messages: the three there are fit, whatever else the room holds.
    const onlyMessages = await sync(alice, { filter: limit(3, { types: ['m.room.message'] }) });
    expect(bodies(onlyMessages.rooms.join[roomId].timeline.events)).toEqual(['m0', 'm1', 'm2']);
    expect(onlyMessages.rooms.join[roomId].timeline.limited).toBe(false);
    const fewer = await sync(alice, { filter: limit(2, { types: ['m.room.message'] }) });
    expect(bodies(fewer.rooms.join[roomId].timeline.events)).toEqual(['m1', 'm2']);
    expect(fewer.rooms.join[roomId].timeline.limited).toBe(true);

    // Incremental: exactly the limit is not limited; one more is.
    let since = (await sync(alice, { filter: limit(3) })).next_batch;
    for (let i = 0; i < 3; i++) await send(alice, roomId, `n${i}`);
    const exact = await sync(alice, { filter: limit(3), since });
    expect(bodies(exact.rooms.join[roomId].timeline.events)).toEqual(['n0', 'n1', 'n2']);
    expect(exact.rooms.join[roomId].timeline.limited).toBe(false);
    since = exact.next_batch;
    for (let i = 0; i < 4; i++) await send(alice, roomId, `o${i}`);
    const over = await sync(alice, { filter: limit(3), since });
    expect(bodies(over.rooms.join[roomId].timeline.events)).toEqual(['o1', 'o2', 'o3']);
    expect(over.rooms.join[roomId].timeline.limited).toBe(true);
    // A large limit is honoured too.
    const big = await sync(alice, { filter: limit(150) });
    expect(big.rooms.join[roomId].timeline.events[0].type).toBe('m.room.create');
    expect(big.rooms.join[roomId].timeline.limited).toBe(false);
    for (let i = 0; i < 150; i++) await send(alice, roomId, `p${i}`);
    const many = await sync(alice, { filter: limit(150) });
    expect(many.rooms.join[roomId].timeline.events).toHaveLength(150);
    expect(many.rooms.join[roomId].timeline.limited).toBe(true);
  });
});

describe('13. tokens', () => {
  it('13. a /sync next_batch is accepted as from in /messages, both ways', async () => {
    const alice = await newUser('alice');
    const roomId = await createRoom(alice);
    await send(alice, roomId, 'before');
    const token = (await sync(alice)).next_batch;
    await send(alice, roomId, 'after 1');
    await send(alice, roomId, 'after 2');
    const back = await messages(alice, roomId, { dir: 'b', limit: 1, from: token });
    expect(bodies(back.chunk)).toEqual(['before']);
    const forward = await messages(alice, roomId, { dir: 'f', limit: 10, from: token });
    expect(bodies(forward.chunk)).toEqual(['after 1', 'after 2']);
    const latest = await messages(alice, roomId, { dir: 'b', limit: 2, from: (await sync(alice)).next_batch });
    expect(bodies(latest.chunk)).toEqual(['after 2', 'after 1']);
  });
});

describe('14. display name changes in /sync', () => {
  it('14. appear in incremental /sync as a member event in the timeline, not as the whole state again', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat', name: 'Renames' });
    await join(bob, roomId);
    for (const [account, name] of [[alice, 'Alice Again'], [bob, 'Bob Again']] as const) {
      const sinceAlice = (await sync(alice)).next_batch;
      const sinceBob = (await sync(bob)).next_batch;
      await api(server, 'PUT', `${V3}/profile/${enc(account.userId)}/displayname`, { token: account.accessToken, body: { displayname: name } });
      for (const [viewer, since] of [[alice, sinceAlice], [bob, sinceBob]] as const) {
        const room = (await sync(viewer, { since })).rooms.join[roomId];
        expect(room.timeline.events.map((e: any) => [e.type, e.state_key, e.content.displayname])).toEqual([['m.room.member', account.userId, name]]);
        expect(room.timeline.limited).toBe(false);
        expect(room.state.events).toEqual([]);
      }
    }
  });
});

describe('15. joined and left in one sync window', () => {
  it('15. the next /sync has the room under leave, with its state', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat', name: 'Briefly' });
    await send(alice, roomId, 'before bob');
    const since = (await sync(bob)).next_batch;
    await join(bob, roomId);
    await send(alice, roomId, 'while bob is here');
    await leave(bob, roomId);
    await send(alice, roomId, 'after bob');
    const r = await sync(bob, { since });
    expect(r.rooms.join[roomId]).toBeUndefined();
    const left = r.rooms.leave[roomId];
    expect(left.timeline.events.at(-1)).toMatchObject({ type: 'm.room.member', state_key: bob.userId, content: { membership: 'leave' } });
    expect(bodies(left.timeline.events)).not.toContain('after bob');
    const state = [...left.state.events, ...left.timeline.events].filter((e: any) => e.state_key !== undefined).map((e: any) => `${e.type}|${e.state_key}`);
    expect(state).toEqual(expect.arrayContaining(['m.room.create|', 'm.room.name|', 'm.room.power_levels|', `m.room.member|${alice.userId}`]));
    expect(left.state.events.find((e: any) => e.type === 'm.room.name').content.name).toBe('Briefly');
  });
});

describe('16. history visibility', () => {
  for (const visibility of ['joined', 'invited'] as const) {
    it(`16. under ${visibility} visibility, a new member gets the room's current state, with many messages before and after the join`, async () => {
      const alice = await newUser('alice');
      const bob = await newUser('bob');
      const roomId = await createRoom(alice, { preset: 'private_chat', name: `Only ${visibility}`, initial_state: [{ type: 'm.room.history_visibility', content: { history_visibility: visibility } }] });
      for (let i = 0; i < 25; i++) await send(alice, roomId, `early ${i}`);
      await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/invite`, { token: alice.accessToken, body: { user_id: bob.userId } });
      await send(alice, roomId, 'while invited');
      const beforeJoin = (await sync(bob)).next_batch;
      await join(bob, roomId);
      // Incremental /sync across the join, and a fresh one, each with few and many messages after it.
      const expectState = (room: any) => {
        const all = [...room.state.events, ...room.timeline.events];
        const keys = all.filter((e: any) => e.state_key !== undefined).map((e: any) => `${e.type}|${e.state_key}`);
        expect(keys).toEqual(expect.arrayContaining([
          'm.room.create|', 'm.room.power_levels|', 'm.room.join_rules|', 'm.room.history_visibility|', 'm.room.name|', `m.room.member|${alice.userId}`, `m.room.member|${bob.userId}`,
        ]));
        expect(all.find((e: any) => e.type === 'm.room.name').content.name).toBe(`Only ${visibility}`);
        expect(bodies(room.timeline.events).some((b: string) => b.startsWith('early'))).toBe(false);
      };
      for (const after of [2, 25]) {
        for (let i = 0; i < after; i++) await send(alice, roomId, `late ${i}`);
        for (const query of [{ since: beforeJoin }, {}] as Record<string, string>[]) {
          const room = (await sync(bob, query)).rooms.join[roomId];
          expectState(room);
          expect(bodies(room.timeline.events).at(-1)).toBe(`late ${after - 1}`);
        }
      }
      // Paging back shows nothing from before bob could see.
      const seen = bodies(await history(bob, roomId));
      expect(seen.some((b) => b.startsWith('early'))).toBe(false);
      expect(seen.includes('while invited')).toBe(visibility === 'invited');
      expect(seen.filter((b) => b.startsWith('late'))).toHaveLength(27);
    });
  }

  it('16. a room the user left shows only history from before the leave', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat', name: 'Shared' });
    for (let i = 0; i < 15; i++) await send(alice, roomId, `before ${i}`);
    await join(bob, roomId);
    for (let i = 0; i < 15; i++) await send(alice, roomId, `during ${i}`);
    await leave(bob, roomId);
    for (let i = 0; i < 15; i++) await send(alice, roomId, `after ${i}`);
    await putState(alice, roomId, 'm.room.name', '', { name: 'Renamed after bob left' });
    // Shared history: bob, once a member, sees what came before his join, up to his leave.
    const seen = bodies(await history(bob, roomId));
    expect(seen).toEqual([...Array.from({ length: 15 }, (_, i) => `before ${i}`), ...Array.from({ length: 15 }, (_, i) => `during ${i}`)]);
    const left = (await sync(bob, { filter: { room: { include_leave: true, timeline: { limit: 5 } } } })).rooms.leave[roomId];
    expect(left.timeline.events.at(-1)).toMatchObject({ type: 'm.room.member', state_key: bob.userId, content: { membership: 'leave' } });
    expect(bodies(left.timeline.events)).toEqual(['during 11', 'during 12', 'during 13', 'during 14']);
    expect(left.state.events.find((e: any) => e.type === 'm.room.name').content.name).toBe('Shared');
    expect((await getState(bob, roomId, 'm.room.name')).name).toBe('Shared');
  });
});

describe('17. device keys', () => {
  it('17. /keys/upload takes key strings as opaque once the structure is right; /keys/query returns them; changes and leaves reach /sync and /keys/changes', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await join(bob, roomId);
    const since = (await sync(alice)).next_batch;
    const deviceKeys = {
      user_id: bob.userId, device_id: bob.deviceId, algorithms: ['m.olm.v1.curve25519-aes-sha2', 'm.megolm.v1.aes-sha2'],
      keys: { [`curve25519:${bob.deviceId}`]: 'an opaque curve key', [`ed25519:${bob.deviceId}`]: 'an opaque ed25519 key' },
      signatures: { [bob.userId]: { [`ed25519:${bob.deviceId}`]: 'an opaque signature' } },
    };
    const upload = await api(server, 'POST', `${V3}/keys/upload`, { token: bob.accessToken, body: { device_keys: deviceKeys } });
    expect(upload.status).toBe(200);
    const query = await api(server, 'POST', `${V3}/keys/query`, { token: alice.accessToken, body: { device_keys: { [bob.userId]: [] } } });
    expect(query.body.device_keys[bob.userId][bob.deviceId]).toMatchObject(deviceKeys);
    const changed = await sync(alice, { since });
    expect(changed.device_lists.changed).toContain(bob.userId);
    expect((await api(server, 'GET', `${V3}/keys/changes?from=${since}&to=${changed.next_batch}`, { token: alice.accessToken })).body.changed).toContain(bob.userId);

    // The structure is still checked.
    const otherUser = await api(server, 'POST', `${V3}/keys/upload`, { token: bob.accessToken, body: { device_keys: { ...deviceKeys, user_id: alice.userId } } });
    expect(otherUser.status).toBe(400);
    const otherDevice = await api(server, 'POST', `${V3}/keys/upload`, { token: bob.accessToken, body: { device_keys: { ...deviceKeys, device_id: 'NOTMINE' } } });
    expect(otherDevice.status).toBe(400);
    const wrongType = await api(server, 'POST', `${V3}/keys/upload`, { token: bob.accessToken, body: { device_keys: { ...deviceKeys, keys: { [`ed25519:${bob.deviceId}`]: 5 } } }, unchecked: true });
    expect([wrongType.status, wrongType.body.errcode]).toEqual([400, 'M_BAD_JSON']);

    // Bob leaves: alice no longer shares a room with him, and hears so.
    await leave(bob, roomId);
    const gone = await sync(alice, { since: changed.next_batch });
    expect(gone.device_lists.left).toContain(bob.userId);
    expect((await api(server, 'GET', `${V3}/keys/changes?from=${changed.next_batch}&to=${gone.next_batch}`, { token: alice.accessToken })).body.left).toContain(bob.userId);
  });
});

describe('18. push rules', () => {
  const sendContent = async (account: Account, roomId: string, content: object, type = 'm.room.message') => {
    const r = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/${type}/${enc(`t${Math.random()}`)}`, { token: account.accessToken, body: content });
    expect(r.status).toBe(200);
    return r.body.event_id as string;
  };
  const text = (body: string, extra: object = {}) => ({ msgtype: 'm.text', body, ...extra });
  const putRule = async (account: Account, kind: string, ruleId: string, body: object) =>
    expect((await api(server, 'PUT', `${V3}/pushrules/global/${kind}/${enc(ruleId)}`, { token: account.accessToken, body })).status).toBe(200);
  const setup = async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const carol = await newUser('carol');
    const roomId = await createRoom(alice, { preset: 'public_chat', name: 'Counts' });
    await join(bob, roomId);
    await join(carol, roomId);
    return { alice, bob, carol, roomId };
  };

  it('18. unread notification and highlight counts come from the push rules: the defaults with m.mentions, keywords, room and sender rules', async () => {
    const { alice, bob, carol, roomId } = await setup();
    const counts = async () => (await sync(bob, { filter: { room: { rooms: [roomId] } } })).rooms.join[roomId].unread_notifications;
    const expectCounts = async (notification_count: number, highlight_count: number) => expect(await counts()).toEqual({ notification_count, highlight_count });
    await expectCounts(0, 0); // the joins are member events, which do not notify
    await send(alice, roomId, 'hello');
    await expectCounts(1, 0);
    await sendContent(alice, roomId, { msgtype: 'm.notice', body: 'a bot speaking' });
    await expectCounts(1, 0);
    await sendContent(alice, roomId, text('hey you', { 'm.mentions': { user_ids: [bob.userId] } }));
    await expectCounts(2, 1);
    // @room needs the sender to hold the notifications.room level (50): carol does not, alice does.
    await sendContent(carol, roomId, text('everyone!', { 'm.mentions': { room: true } }));
    await expectCounts(3, 1);
    await sendContent(alice, roomId, text('everyone!', { 'm.mentions': { room: true } }));
    await expectCounts(4, 2);
    // An edit does not notify again.
    const original = await send(alice, roomId, 'tpyo');
    await sendContent(alice, roomId, text('* typo', { 'm.new_content': text('typo'), 'm.relates_to': { rel_type: 'm.replace', event_id: original } }));
    await expectCounts(5, 2);
    // A keyword, on word boundaries.
    await putRule(bob, 'content', 'cake', { pattern: 'cake', actions: ['notify', { set_tweak: 'highlight' }] });
    await send(alice, roomId, 'Who baked the CAKE?');
    await expectCounts(6, 3);
    await send(alice, roomId, 'pancakes');
    await expectCounts(7, 3);
    // A sender muted, then the room muted and unmuted.
    await putRule(bob, 'sender', carol.userId, { actions: [] });
    await send(carol, roomId, 'you will not hear me');
    await expectCounts(7, 3);
    await putRule(bob, 'room', roomId, { actions: [] });
    const muted = await send(alice, roomId, 'muted room');
    await expectCounts(7, 3);
    expect((await api(server, 'DELETE', `${V3}/pushrules/global/room/${enc(roomId)}`, { token: bob.accessToken })).status).toBe(200);
    await send(alice, roomId, 'unmuted');
    await expectCounts(8, 3);
    // Reading resets them; the master rule silences everything.
    const last = await send(alice, roomId, 'last one');
    await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/receipt/m.read/${enc(last)}`, { token: bob.accessToken, body: {} });
    await expectCounts(0, 0);
    await api(server, 'PUT', `${V3}/pushrules/global/override/.m.rule.master/enabled`, { token: bob.accessToken, body: { enabled: true } });
    await sendContent(alice, roomId, text('hey you', { 'm.mentions': { user_ids: [bob.userId] } }));
    await expectCounts(0, 0);
    void muted;
    // Counts are per user: alice's own messages never count for her; carol's count follows her own (default) rules.
    const aliceCounts = (await sync(alice, { filter: { room: { rooms: [roomId] } } })).rooms.join[roomId].unread_notifications;
    expect(aliceCounts.notification_count).toBe(2); // carol's two messages
    const carolCounts = (await sync(carol, { filter: { room: { rooms: [roomId] } } })).rooms.join[roomId].unread_notifications;
    expect(carolCounts).toEqual({ notification_count: 10, highlight_count: 1 }); // alice's ten, one an @room
  });

  it('18. one-to-one and encrypted rooms notify by the underride rules; a display name in the body does not highlight (that legacy rule is gone)', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'private_chat', invite: [bob.userId], initial_state: [{ type: 'm.room.encryption', content: { algorithm: 'm.megolm.v1.aes-sha2' } }] });
    await join(bob, roomId);
    await sendContent(alice, roomId, { algorithm: 'm.megolm.v1.aes-sha2', ciphertext: 'opaque', sender_key: 'k', session_id: 's', device_id: 'D' }, 'm.room.encrypted');
    await send(alice, roomId, `${bob.userId.slice(1).split(':')[0]} are you there?`);
    expect((await sync(bob)).rooms.join[roomId].unread_notifications).toEqual({ notification_count: 2, highlight_count: 0 });
  });

  it('18. /notifications lists what notified, newest first, with the actions, whether it was read, only=highlight and pages', async () => {
    const { alice, bob, roomId } = await setup();
    const other = await createRoom(alice, { preset: 'public_chat' });
    await join(bob, other);
    const first = await send(alice, roomId, 'one');
    await sendContent(alice, roomId, { msgtype: 'm.notice', body: 'not a notification' });
    const mention = await sendContent(alice, other, text('two', { 'm.mentions': { user_ids: [bob.userId] } }));
    const third = await send(alice, roomId, 'three');
    await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/receipt/m.read/${enc(first)}`, { token: bob.accessToken, body: {} });
    const all = (await api(server, 'GET', `${V3}/notifications`, { token: bob.accessToken })).body;
    expect(all.notifications.map((n: any) => [n.event.event_id, n.room_id, n.read])).toEqual([[third, roomId, false], [mention, other, false], [first, roomId, true]]);
    expect(all.notifications[1].actions).toEqual(['notify', { set_tweak: 'sound', value: 'default' }, { set_tweak: 'highlight' }]);
    expect(all.notifications[0].actions).toEqual(['notify']);
    expect(all.notifications.every((n: any) => typeof n.ts === 'number' && n.event.content.body)).toBe(true);
    expect(all.next_token).toBeUndefined();
    const highlights = (await api(server, 'GET', `${V3}/notifications?only=highlight`, { token: bob.accessToken })).body;
    expect(highlights.notifications.map((n: any) => n.event.event_id)).toEqual([mention]);
    const page1 = (await api(server, 'GET', `${V3}/notifications?limit=2`, { token: bob.accessToken })).body;
    expect(page1.notifications.map((n: any) => n.event.event_id)).toEqual([third, mention]);
    const page2 = (await api(server, 'GET', `${V3}/notifications?limit=2&from=${page1.next_token}`, { token: bob.accessToken })).body;
    expect(page2.notifications.map((n: any) => n.event.event_id)).toEqual([first]);
    expect(page2.next_token).toBeUndefined();
  });
});
