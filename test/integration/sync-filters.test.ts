// /sync filters as Element and other clients use them: an invalid filter is refused with
// 400 (stored or inline), `event_format: federation` and `event_fields` are honoured, and
// `set_presence` on /sync sets the user's presence. Raw HTTP, checked against the spec.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bodies, clientCalls } from '../support/client-calls.ts';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

let server: TestServer;
let alice: Account;
let roomId: string;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;

beforeAll(async () => {
  server = await startTestServer();
  alice = await register(server, 'alice');
  roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: {} })).body.room_id;
  await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/t1`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'hello' } });
});
afterAll(() => server.close());

const sync = (query: string) => api(server, 'GET', `${V3}/sync?timeout=0&${query}`, { token: alice.accessToken, unchecked: true });
const timeline = (body: any) => body.rooms.join[roomId].timeline.events as any[];

describe('sync filters', () => {
  it('refuses an invalid filter, stored or inline, with 400 in the Matrix error shape', async () => {
    const stored = await api(server, 'POST', `${V3}/user/${enc(alice.userId)}/filter`, { token: alice.accessToken, body: { room: { timeline: { limit: 'ten' } } }, unchecked: true });
    expect(stored.status).toBe(400);
    expect(stored.body.errcode).toMatch(/^M_(BAD_JSON|INVALID_PARAM)$/);
    for (const inline of ['{not json', JSON.stringify({ event_format: 'xml' }), JSON.stringify({ room: { timeline: { types: 'm.room.message' } } })]) {
      const answer = await sync(`filter=${enc(inline)}`);
      expect(answer.status, inline).toBe(400);
      expect(answer.body).toMatchObject({ errcode: expect.stringMatching(/^M_(BAD_JSON|INVALID_PARAM|NOT_JSON)$/), error: expect.any(String) });
    }
  });

  it('refuses a stored filter whose fields are invalid, as Synapse does: wrong types, and senders or rooms that are not IDs (issue 24, client behaviour 5)', async () => {
    const invalid: object[] = [
      { presence: 'not an object' },
      { account_data: { limit: 'ten' } },
      { room: 'not an object' },
      { room: { include_leave: 'yes' } },
      { room: { rooms: 'not a list' } },
      { room: { rooms: ['not a room ID'] } },
      { room: { not_rooms: ['#alias:example.org'] } },
      { room: { timeline: { senders: ['not a user ID'] } } },
      { room: { state: { not_senders: ['alice'] } } },
      { room: { ephemeral: { rooms: ['@alice:example.org'] } } },
      { room: { account_data: { contains_url: 'no' } } },
      { presence: { senders: ['example.org'] } },
      { event_fields: ['content.body', 3] },
      { event_format: 'xml' },
    ];
    for (const filter of invalid) {
      const answer = await api(server, 'POST', `${V3}/user/${enc(alice.userId)}/filter`, { token: alice.accessToken, body: filter, unchecked: true });
      expect([answer.status, answer.body.errcode], JSON.stringify(filter)).toEqual([400, expect.stringMatching(/^M_(BAD_JSON|INVALID_PARAM)$/)]);
    }
    // IDs of any server, and fields the server does not know, are fine.
    const valid = { room: { rooms: ['!a:example.org'], timeline: { senders: ['@bob:example.org'], not_senders: [alice.userId], 'org.example.flag': true } }, presence: { not_senders: ['@x:y'] }, 'org.example.other': 1 };
    const stored = await api(server, 'POST', `${V3}/user/${enc(alice.userId)}/filter`, { token: alice.accessToken, body: valid });
    expect(stored.status).toBe(200);
    const back = await api(server, 'GET', `${V3}/user/${enc(alice.userId)}/filter/${enc(stored.body.filter_id)}`, { token: alice.accessToken });
    expect(back.body).toEqual(valid);
  });

  it('gives events in the federation format when asked', async () => {
    const answer = await sync(`filter=${enc(JSON.stringify({ event_format: 'federation' }))}`);
    expect(answer.status).toBe(200);
    const message = timeline(answer.body).find((e) => e.type === 'm.room.message');
    expect(message).toMatchObject({ room_id: roomId, depth: expect.any(Number), hashes: { sha256: expect.any(String) }, signatures: { [server.homeserver.serverName]: expect.any(Object) } });
    expect(Array.isArray(message.prev_events) && Array.isArray(message.auth_events)).toBe(true);
    const client = timeline((await sync('')).body).find((e) => e.type === 'm.room.message');
    expect(client.hashes).toBeUndefined();
  });

  it('keeps only the event_fields asked for', async () => {
    const answer = await sync(`filter=${enc(JSON.stringify({ event_fields: ['type', 'content.body'] }))}`);
    const message = timeline(answer.body).find((e) => e.type === 'm.room.message');
    expect(message).toEqual({ type: 'm.room.message', content: { body: 'hello' } });
  });

  it('sets presence with set_presence', async () => {
    expect((await sync('set_presence=unavailable')).status).toBe(200);
    const presence = await api(server, 'GET', `${V3}/presence/${enc(alice.userId)}/status`, { token: alice.accessToken });
    expect(presence.body.presence).toBe('unavailable');
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 12).
describe('timeline limits', () => {
  const { newUser, createRoom, send, putState, sync } = clientCalls(() => server);
  it('honours a filter’s timeline limit and sets limited exactly when events were left out', async () => {
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
