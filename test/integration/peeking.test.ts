// Peeking: a user who is not in a room may read it when its history is world_readable
// (/messages, /state, /event, /context), by room ID or through its alias, and may do nothing
// else there; a room that is not world_readable stays closed. Raw HTTP, checked against the spec.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

let server: TestServer;
let alice: Account;
let reader: Account;
let openRoom: string;
let closedRoom: string;
let openEvent: string;
let closedEvent: string;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;

beforeAll(async () => {
  server = await startTestServer();
  [alice, reader] = [await register(server, 'alice'), await register(server, 'reader')];
  const create = async (name: string, visibility: string) => (await api(server, 'POST', `${V3}/createRoom`, {
    token: alice.accessToken,
    body: { room_alias_name: name, initial_state: [{ type: 'm.room.history_visibility', content: { history_visibility: visibility } }] },
  })).body.room_id as string;
  [openRoom, closedRoom] = [await create('open', 'world_readable'), await create('closed', 'shared')];
  const say = async (roomId: string, body: string) => (await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/${enc(body)}`, { token: alice.accessToken, body: { msgtype: 'm.text', body } })).body.event_id as string;
  openEvent = await say(openRoom, 'for anyone to read');
  closedEvent = await say(closedRoom, 'for members only');
});
afterAll(() => server.close());

const get = (path: string) => api(server, 'GET', `${V3}${path}`, { token: reader.accessToken });

describe('peeking into world-readable rooms', () => {
  it('reads /messages, /state, /event and /context of a world_readable room without joining', async () => {
    const messages = await get(`/rooms/${enc(openRoom)}/messages?dir=b&limit=10`);
    expect(messages.status).toBe(200);
    expect(messages.body.chunk.map((e: any) => e.content?.body).filter(Boolean)).toContain('for anyone to read');
    const state = await get(`/rooms/${enc(openRoom)}/state`);
    expect(state.status).toBe(200);
    expect(state.body.some((e: any) => e.type === 'm.room.create')).toBe(true);
    expect((await get(`/rooms/${enc(openRoom)}/event/${enc(openEvent)}`)).status).toBe(200);
    expect((await get(`/rooms/${enc(openRoom)}/context/${enc(openEvent)}`)).status).toBe(200);
  });

  it('finds the room through its alias, then reads it', async () => {
    const resolved = await get(`/directory/room/${enc(`#open:${server.homeserver.serverName}`)}`);
    expect(resolved.body.room_id).toBe(openRoom);
    expect((await get(`/rooms/${enc(resolved.body.room_id)}/messages?dir=b&limit=10`)).status).toBe(200);
  });

  it('may not write there: sending, typing and receipts are refused', async () => {
    const send = await api(server, 'PUT', `${V3}/rooms/${enc(openRoom)}/send/m.room.message/peek1`, { token: reader.accessToken, body: { msgtype: 'm.text', body: 'hello?' } });
    expect(send.status).toBe(403);
    const typing = await api(server, 'PUT', `${V3}/rooms/${enc(openRoom)}/typing/${enc(reader.userId)}`, { token: reader.accessToken, body: { typing: true, timeout: 1000 } });
    expect(typing.status).toBe(403);
    const receipt = await api(server, 'POST', `${V3}/rooms/${enc(openRoom)}/receipt/m.read/${enc(openEvent)}`, { token: reader.accessToken, body: {} });
    expect(receipt.status).toBe(403);
  });

  it('keeps a room that is not world_readable closed to non-members', async () => {
    for (const path of [`/rooms/${enc(closedRoom)}/messages?dir=b&limit=10`, `/rooms/${enc(closedRoom)}/state`, `/rooms/${enc(closedRoom)}/event/${enc(closedEvent)}`, `/rooms/${enc(closedRoom)}/context/${enc(closedEvent)}`]) {
      const answer = await get(path);
      expect([403, 404], path).toContain(answer.status);
      expect(answer.body.errcode).toMatch(/^M_(FORBIDDEN|NOT_FOUND)$/);
    }
  });
});

// MSC2753's peeking through /sync, as sytest checks it (Dendrite serves it; Synapse does not): POST
// /peek/{roomIdOrAlias}, then the room in rooms.peek of the peeking device's syncs only.
describe('peeking through /sync (MSC2753)', () => {
  const sync = (token: string, since?: string) => api(server, 'GET', `${V3}/sync?timeout=0${since ? `&since=${since}` : ''}`, { token, unchecked: true });
  let txn = 0;
  const say = async (body: string) => (await api(server, 'PUT', `${V3}/rooms/${enc(openRoom)}/send/m.room.message/p${++txn}`, { token: alice.accessToken, body: { msgtype: 'm.text', body } })).body.event_id as string;

  it('refuses rooms whose history is shared, invited or joined with 403 M_FORBIDDEN', async () => {
    for (const visibility of ['shared', 'invited', 'joined']) {
      const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: { initial_state: [{ type: 'm.room.history_visibility', content: { history_visibility: visibility } }] } })).body.room_id;
      const answer = await api(server, 'POST', `${V3}/peek/${enc(roomId)}`, { token: reader.accessToken, body: {}, unchecked: true });
      expect([answer.status, answer.body.errcode], visibility).toEqual([403, 'M_FORBIDDEN']);
    }
  });

  it('peeks by room ID: the room comes afresh under rooms.peek, then only with what is new; not under join', async () => {
    const peeker = await register(server, 'peeker1');
    const before = await sync(peeker.accessToken);
    const peek = await api(server, 'POST', `${V3}/peek/${enc(openRoom)}`, { token: peeker.accessToken, body: {}, unchecked: true });
    expect([peek.status, peek.body]).toEqual([200, { room_id: openRoom }]);
    await say('something to peek');
    const first = await sync(peeker.accessToken, before.body.next_batch);
    const room = first.body.rooms.peek[openRoom];
    expect(room.timeline.events[0].type).toBe('m.room.create');
    expect(room.timeline.events.at(-1).content.body).toBe('something to peek');
    expect(room.state.events).toEqual([]);
    expect(first.body.rooms.join).toEqual({});
    const quiet = await sync(peeker.accessToken, first.body.next_batch);
    expect(quiet.body.rooms.peek).toBeUndefined();
    await say('something else to peek');
    const next = await sync(peeker.accessToken, quiet.body.next_batch);
    expect(next.body.rooms.peek[openRoom].timeline.events.map((e: any) => e.content.body)).toEqual(['something else to peek']);
    // Unpeeked: no more.
    expect((await api(server, 'POST', `${V3}/rooms/${enc(openRoom)}/unpeek`, { token: peeker.accessToken, body: {}, unchecked: true })).status).toBe(200);
    await say('after the unpeek');
    expect((await sync(peeker.accessToken, next.body.next_batch)).body.rooms.peek).toBeUndefined();
  });

  it('peeks by alias', async () => {
    const peeker = await register(server, 'peeker2');
    const peek = await api(server, 'POST', `${V3}/peek/${enc(`#open:${server.homeserver.serverName}`)}`, { token: peeker.accessToken, body: {}, unchecked: true });
    expect([peek.status, peek.body]).toEqual([200, { room_id: openRoom }]);
    expect((await sync(peeker.accessToken)).body.rooms.peek[openRoom].timeline.events.length).toBeGreaterThan(0);
  });

  it('shows a peeked room only in the syncs of the device that peeked', async () => {
    const peeker = await register(server, 'peeker3');
    const login = await api(server, 'POST', `${V3}/login`, { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'peeker3' }, password: 'correct horse battery staple' } });
    const otherDevice = login.body.access_token as string;
    const otherBefore = await sync(otherDevice);
    await api(server, 'POST', `${V3}/peek/${enc(openRoom)}`, { token: peeker.accessToken, body: {}, unchecked: true });
    await say('for the peeking device');
    expect((await sync(peeker.accessToken)).body.rooms.peek[openRoom]).toBeDefined();
    expect((await sync(otherDevice)).body.rooms.peek).toBeUndefined();
    expect((await sync(otherDevice, otherBefore.body.next_batch)).body.rooms.peek).toBeUndefined();
  });
});

// The spec's peeking, as Synapse serves it: GET /rooms/{roomId}/initialSync, then GET /events?room_id= from its end.
describe('peeking through initialSync and /events', () => {
  it('reads the visible part of a world_readable room and then its new events; refuses a shared room', async () => {
    const initial = await get(`/rooms/${enc(openRoom)}/initialSync`);
    expect(initial.status).toBe(200);
    expect(initial.body).toMatchObject({ room_id: openRoom, messages: { start: expect.any(String), end: expect.any(String) } });
    expect(initial.body.state.some((e: any) => e.type === 'm.room.create')).toBe(true);
    expect(initial.body.membership).toBeUndefined();
    const listening = api(server, 'GET', `${V3}/events?room_id=${enc(openRoom)}&from=${initial.body.messages.end}&timeout=30000`, { token: reader.accessToken });
    const eventId = (await api(server, 'PUT', `${V3}/rooms/${enc(openRoom)}/send/m.room.message/events1`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'live' } })).body.event_id;
    const events = await listening;
    expect(events.body.chunk.map((e: any) => e.event_id)).toContain(eventId);

    expect((await get(`/rooms/${enc(closedRoom)}/initialSync`)).status).toBe(403);
    expect((await get(`/events?room_id=${enc(closedRoom)}&timeout=0`)).status).toBe(403);
  });
});
