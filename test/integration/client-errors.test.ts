import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bodies, clientCalls, enc, V3 } from '../support/client-calls.ts';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

// Raw HTTP: every failure gets the spec's error code and status, and the
// request changes nothing.

let server: TestServer;
let alice: Account;
let bob: Account;
let roomId: string;

beforeAll(async () => {
  server = await startTestServer();
  alice = await register(server, 'alice');
  bob = await register(server, 'bob');
  roomId = (await api(server, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'private_chat' } })).body.room_id;
});
afterAll(() => server.close());

const expectError = (response: { status: number; body: any }, status: number, errcode: string) => {
  expect({ status: response.status, errcode: response.body?.errcode }).toEqual({ status, errcode });
  expect(typeof response.body.error).toBe('string');
};

describe('request bodies', () => {
  it('M_NOT_JSON for a body that is not JSON', async () => {
    const r = await api(server, 'POST', '/_matrix/client/v3/login', { rawBody: '{not json', headers: { 'content-type': 'application/json' } });
    expectError(r, 400, 'M_NOT_JSON');
  });
  it('M_NOT_JSON for JSON that is not an object', async () => {
    const r = await api(server, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/t-array`, {
      token: alice.accessToken, rawBody: '[1,2]', unchecked: true,
    });
    expectError(r, 400, 'M_NOT_JSON');
  });
  it('M_BAD_JSON for the wrong shape', async () => {
    const r = await api(server, 'POST', '/_matrix/client/v3/login', { body: { type: 5, password: [] }, unchecked: true });
    expectError(r, 400, 'M_BAD_JSON');
  });
  it('M_BAD_JSON for a float in a room version 6+ event', async () => {
    const r = await api(server, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/t-float`, {
      token: alice.accessToken, rawBody: '{"msgtype":"m.text","body":"x","n":1.5}',
    });
    expectError(r, 400, 'M_BAD_JSON');
  });
  it('M_TOO_LARGE for an event over 65,536 bytes', async () => {
    const r = await api(server, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/t-big`, {
      token: alice.accessToken, body: { msgtype: 'm.text', body: 'x'.repeat(70_000) },
    });
    expectError(r, 413, 'M_TOO_LARGE');
  });
  it('M_TOO_LARGE for a body over the request limit', async () => {
    const r = await api(server, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/t-huge`, {
      token: alice.accessToken, body: { msgtype: 'm.text', body: 'x'.repeat(2_000_000) },
    });
    expectError(r, 413, 'M_TOO_LARGE');
  });
});

describe('authentication', () => {
  it('M_MISSING_TOKEN without a token', async () => {
    expectError(await api(server, 'GET', '/_matrix/client/v3/account/whoami'), 401, 'M_MISSING_TOKEN');
  });
  it('M_UNKNOWN_TOKEN with a wrong token', async () => {
    expectError(await api(server, 'GET', '/_matrix/client/v3/account/whoami', { token: 'nope' }), 401, 'M_UNKNOWN_TOKEN');
  });
  it('accepts the token in the access_token query parameter', async () => {
    const r = await api(server, 'GET', `/_matrix/client/v3/account/whoami?access_token=${alice.accessToken}`);
    expect(r.status).toBe(200);
    expect(r.body.user_id).toBe(alice.userId);
  });
  it('M_FORBIDDEN for a wrong password', async () => {
    const r = await api(server, 'POST', '/_matrix/client/v3/login', {
      body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'alice' }, password: 'wrong' },
    });
    expectError(r, 403, 'M_FORBIDDEN');
  });
});

describe('registration', () => {
  it('M_USER_IN_USE for a taken name, on /register and /register/available', async () => {
    expectError(await api(server, 'POST', '/_matrix/client/v3/register', { body: { username: 'alice', password: 'p', auth: { type: 'm.login.dummy' } } }), 400, 'M_USER_IN_USE');
    expectError(await api(server, 'GET', '/_matrix/client/v3/register/available?username=alice'), 400, 'M_USER_IN_USE');
    expect((await api(server, 'GET', '/_matrix/client/v3/register/available?username=carol')).body).toEqual({ available: true });
  });
  it('M_INVALID_USERNAME for a bad name', async () => {
    expectError(await api(server, 'POST', '/_matrix/client/v3/register', { body: { username: 'Bad Name', password: 'p', auth: { type: 'm.login.dummy' } } }), 400, 'M_INVALID_USERNAME');
  });
  it('asks for user-interactive auth, then accepts m.login.dummy with the session', async () => {
    const first = await api(server, 'POST', '/_matrix/client/v3/register', { body: { username: 'dave', password: 'p' } });
    expect(first.status).toBe(401);
    expect(first.body.flows).toEqual([{ stages: ['m.login.dummy'] }]);
    const second = await api(server, 'POST', '/_matrix/client/v3/register', {
      body: { username: 'dave', password: 'p', auth: { type: 'm.login.dummy', session: first.body.session } },
    });
    expect(second.status).toBe(200);
    expect(second.body.user_id).toBe(`@dave:${server.homeserver.serverName}`);
  });
  it('refuses registration when it is turned off', async () => {
    const closed = await startTestServer({ registrationEnabled: false });
    try {
      expectError(await api(closed, 'POST', '/_matrix/client/v3/register', { body: { username: 'x', password: 'p', auth: { type: 'm.login.dummy' } } }), 403, 'M_FORBIDDEN');
    } finally {
      await closed.close();
    }
  });
});

describe('rooms', () => {
  it('M_FORBIDDEN when sending to a room one is not in, and nothing is stored', async () => {
    const r = await api(server, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/t1`, {
      token: bob.accessToken, body: { msgtype: 'm.text', body: 'hi' },
    });
    expectError(r, 403, 'M_FORBIDDEN');
    const messages = await api(server, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=50`, { token: alice.accessToken });
    expect(messages.body.chunk.filter((e: any) => e.sender === bob.userId)).toEqual([]);
  });
  it('M_UNSUPPORTED_ROOM_VERSION for an unknown room version', async () => {
    expectError(await api(server, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { room_version: '99' } }), 400, 'M_UNSUPPORTED_ROOM_VERSION');
  });
  it('M_NOT_FOUND for an unknown alias and profile', async () => {
    expectError(await api(server, 'GET', `/_matrix/client/v3/directory/room/${encodeURIComponent('#nope:' + server.homeserver.serverName)}`), 404, 'M_NOT_FOUND');
    expectError(await api(server, 'GET', `/_matrix/client/v3/profile/${encodeURIComponent('@nobody:' + server.homeserver.serverName)}`), 404, 'M_NOT_FOUND');
  });
  it('M_ROOM_IN_USE for a taken alias', async () => {
    await api(server, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { room_alias_name: 'taken' } });
    expectError(await api(server, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { room_alias_name: 'taken' } }), 400, 'M_ROOM_IN_USE');
  });
  it('M_INVALID_PARAM for a bad since token', async () => {
    expectError(await api(server, 'GET', '/_matrix/client/v3/sync?since=garbage', { token: alice.accessToken }), 400, 'M_INVALID_PARAM');
  });
});

describe('routing', () => {
  it('M_UNRECOGNIZED 404 for an unknown endpoint and 405 for a wrong method', async () => {
    expectError(await api(server, 'GET', '/_matrix/client/v3/no/such/endpoint', { unchecked: true }), 404, 'M_UNRECOGNIZED');
    expectError(await api(server, 'DELETE', '/_matrix/client/v3/login', { unchecked: true }), 405, 'M_UNRECOGNIZED');
  });
  it('M_INVALID_PARAM 400 for a server name that is none (found by fuzzing: /publicRooms?server= was a 500)', async () => {
    for (const server_ of ['{"a":1}', 'white space', 'a/b', '[zz]']) {
      expectError(await api(server, 'GET', `/_matrix/client/v3/publicRooms?server=${enc(server_)}`, { token: alice.accessToken, unchecked: true }), 400, 'M_INVALID_PARAM');
      expectError(await api(server, 'POST', `/_matrix/client/v3/publicRooms?server=${enc(server_)}`, { token: alice.accessToken, body: {}, unchecked: true }), 400, 'M_INVALID_PARAM');
    }
  });
  it('answers the legacy r0 paths like v3', async () => {
    const r = await api(server, 'GET', '/_matrix/client/r0/account/whoami', { token: alice.accessToken });
    expect(r.body.user_id).toBe(alice.userId);
  });
  it('answers CORS preflights as the spec asks', async () => {
    const r = await fetch(server.url + '/_matrix/client/v3/sync', {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
    });
    expect(r.status).toBeLessThan(300);
    expect(r.headers.get('access-control-allow-origin')).toBe('*');
    expect(r.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('authorization');
    expect(r.headers.get('access-control-allow-methods')).toContain('PUT');
  });
});

describe('rate limits', () => {
  it('M_LIMIT_EXCEEDED with retry_after_ms, per device', async () => {
    const limited = await startTestServer({ rateLimits: { perSecond: 0.1, burst: 3 } });
    try {
      const carol = await register(limited, 'carol');
      const room = (await api(limited, 'POST', '/_matrix/client/v3/createRoom', { token: carol.accessToken, body: {} })).body.room_id;
      const statuses: number[] = [];
      let last: { status: number; body: any } | undefined;
      for (let i = 0; i < 5; i++) {
        last = await api(limited, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(room)}/send/m.room.message/r${i}`, {
          token: carol.accessToken, body: { msgtype: 'm.text', body: String(i) },
        });
        statuses.push(last.status);
      }
      expect(statuses).toContain(429);
      expectError(last!, 429, 'M_LIMIT_EXCEEDED');
      expect(last!.body.retry_after_ms).toBeGreaterThan(0);
    } finally {
      await limited.close();
    }
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 2).
describe('request bodies that are not UTF-8', () => {
  const { newUser, createRoom, history } = clientCalls(() => server);
  const invalidUtf8 = (before: string, after: string) =>
    new Uint8Array([...new TextEncoder().encode(before), 0xff, 0xfe, 0xc3, ...new TextEncoder().encode(after)]);

  it('M_NOT_JSON for a body that is not valid UTF-8, before any other check', async () => {
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
