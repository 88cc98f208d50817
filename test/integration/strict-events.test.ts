// Strict event JSON and limits: in room versions that require canonical JSON, content with
// integers outside ±(2^53 − 1), floats, or NaN/Infinity is refused; identifiers are limited
// field by field (type, state_key at most 255 bytes); and a user-interactive auth session is
// bound to the operation that started it. Raw HTTP, errors in the Matrix shape.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

let server: TestServer;
let alice: Account;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;
const PASSWORD = 'correct horse battery staple';

beforeAll(async () => {
  server = await startTestServer();
  alice = await register(server, 'alice', PASSWORD);
});
afterAll(() => server.close());

const createRoom = async (version: string) => (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: { room_version: version } })).body.room_id as string;
let txn = 0;
const sendRaw = (roomId: string, type: string, raw: string) =>
  fetch(`${server.url}${V3}/rooms/${enc(roomId)}/send/${enc(type)}/t${++txn}`, { method: 'PUT', headers: { authorization: `Bearer ${alice.accessToken}`, 'content-type': 'application/json' }, body: raw })
    .then(async (r) => ({ status: r.status, body: await r.json() }));

describe('strict canonical JSON', () => {
  it('refuses floats and integers beyond ±(2^53 − 1) in a room version that requires canonical JSON', async () => {
    const roomId = await createRoom('10');
    for (const raw of ['{"n": 1.5}', '{"n": 9007199254740992}', '{"n": -9007199254740992}', '{"deep": {"list": [1, 2.25]}}']) {
      const answer = await sendRaw(roomId, 'org.example.numbers', raw);
      expect(answer.status, raw).toBe(400);
      expect(answer.body).toMatchObject({ errcode: 'M_BAD_JSON', error: expect.any(String) });
    }
    expect((await sendRaw(roomId, 'org.example.numbers', '{"n": 9007199254740991}')).status).toBe(200);
  });

  it('refuses NaN and Infinity, which are not JSON at all', async () => {
    const roomId = await createRoom('10');
    for (const raw of ['{"n": NaN}', '{"n": Infinity}']) {
      const answer = await sendRaw(roomId, 'org.example.numbers', raw);
      expect(answer.status, raw).toBe(400);
      expect(answer.body.errcode).toBe('M_NOT_JSON');
    }
  });

  it('accepts floats in a room version before strict canonical JSON (v5)', async () => {
    const roomId = await createRoom('5');
    expect((await sendRaw(roomId, 'org.example.numbers', '{"n": 1.5}')).status).toBe(200);
  });
});

describe('event limits by field', () => {
  it('refuses a type or state key over 255 bytes', async () => {
    const roomId = await createRoom('10');
    const long = 'é'.repeat(128); // 256 bytes in UTF-8, 128 characters
    const byType = await sendRaw(roomId, long, '{}');
    expect(byType.status).toBe(400);
    expect(byType.body.errcode).toMatch(/^M_(BAD_JSON|INVALID_PARAM|TOO_LARGE)$/);
    const byKey = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/state/org.example.state/${enc(long)}`, { token: alice.accessToken, body: {}, unchecked: true });
    expect(byKey.status).toBe(400);
    expect((await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/state/org.example.state/${enc('é'.repeat(127))}`, { token: alice.accessToken, body: {} })).status).toBe(200);
  });
});

describe('user-interactive auth', () => {
  it('refuses a session used for another operation than the one that started it', async () => {
    const second = await api(server, 'POST', `${V3}/login`, { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'alice' }, password: PASSWORD, device_id: 'SECOND' } });
    const third = await api(server, 'POST', `${V3}/login`, { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'alice' }, password: PASSWORD, device_id: 'THIRD' } });
    expect(second.status).toBe(200);
    expect(third.status).toBe(200);
    const started = await api(server, 'POST', `${V3}/delete_devices`, { token: alice.accessToken, body: { devices: ['SECOND'] } });
    expect(started.status).toBe(401);
    const auth = { type: 'm.login.password', identifier: { type: 'm.id.user', user: alice.userId }, password: PASSWORD, session: started.body.session };
    const switched = await api(server, 'POST', `${V3}/delete_devices`, { token: alice.accessToken, body: { devices: ['THIRD'], auth }, unchecked: true });
    expect(switched.status).toBe(403);
    expect(switched.body).toMatchObject({ errcode: 'M_FORBIDDEN', error: expect.stringContaining('changed') });
    const devices = (await api(server, 'GET', `${V3}/devices`, { token: alice.accessToken })).body.devices.map((d: any) => d.device_id);
    expect(devices).toEqual(expect.arrayContaining(['SECOND', 'THIRD']));
  });
});
