// History visibility changes take effect exactly at their place in the timeline: a user who
// joins later sees what was sent while the room was `shared`, not what was sent while it was
// `joined` (before they joined), and again what came after their join. Raw HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

let server: TestServer;
let alice: Account;
let bob: Account;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;

beforeAll(async () => {
  server = await startTestServer();
  [alice, bob] = [await register(server, 'alice'), await register(server, 'bob')];
});
afterAll(() => server.close());

let txn = 0;
const say = (roomId: string, body: string) => api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/t${++txn}`, { token: alice.accessToken, body: { msgtype: 'm.text', body } });
const setVisibility = (roomId: string, visibility: string) => api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/state/m.room.history_visibility/`, { token: alice.accessToken, body: { history_visibility: visibility } });

describe('history visibility changes', () => {
  it('apply from their place in the timeline, for /messages and the initial /sync alike', async () => {
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: { preset: 'public_chat' } })).body.room_id;
    await say(roomId, 'shared 1');
    await setVisibility(roomId, 'joined');
    await say(roomId, 'joined-only 1');
    await say(roomId, 'joined-only 2');
    await setVisibility(roomId, 'shared');
    await say(roomId, 'shared 2');
    expect((await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: bob.accessToken, body: {} })).status).toBe(200);
    await say(roomId, 'after the join');

    const history = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/messages?dir=b&limit=50`, { token: bob.accessToken });
    const bodies = history.body.chunk.filter((e: any) => e.type === 'm.room.message').map((e: any) => e.content.body).reverse();
    expect(bodies).toEqual(['shared 1', 'shared 2', 'after the join']);
    const sync = await api(server, 'GET', `${V3}/sync?timeout=0&filter=${enc(JSON.stringify({ room: { timeline: { limit: 50 } } }))}`, { token: bob.accessToken });
    const timeline = sync.body.rooms.join[roomId].timeline.events.filter((e: any) => e.type === 'm.room.message').map((e: any) => e.content.body);
    expect(timeline).toEqual(['shared 1', 'shared 2', 'after the join']);
  });
});
