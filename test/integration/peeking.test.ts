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
