import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

// A user with 500 rooms: the first screen builds the 20 rooms it shows, not all 500.

let server: TestServer;
let user: Account;
const roomIds: string[] = [];
beforeAll(async () => {
  server = await startTestServer();
  user = await register(server, 'many');
  const { rooms } = server.homeserver.services;
  for (let i = 0; i < 500; i++) {
    const { room_id: roomId } = (await api(server, 'POST', '/_matrix/client/v3/createRoom', { token: user.accessToken, body: { name: `room ${i}` } })).body;
    // The room's message in the same write as an ordinary send makes; the fill is not what is tested.
    await rooms.sendEvents(roomId, [{ type: 'm.room.message', sender: user.userId, content: { msgtype: 'm.text', body: `last in ${i}` } }]);
    roomIds.push(roomId);
  }
}, 300_000);
afterAll(() => server.close());

it('answers the first screen of 20 rooms, newest first, building only those 20', async () => {
  const sync = server.homeserver.services.sync;
  const built = vi.spyOn(sync, 'timelineWindow');
  const unread = vi.spyOn(sync.push, 'unread');
  const r = await api(server, 'POST', '/_matrix/client/unstable/org.matrix.simplified_msc3575/sync', {
    token: user.accessToken,
    unchecked: true,
    body: { lists: { rooms: { ranges: [[0, 19]], timeline_limit: 1, required_state: [['m.room.name', '']] } } },
  });
  expect(r.body.lists.rooms.count).toBe(500);
  const shown = Object.keys(r.body.rooms);
  expect(shown.sort()).toEqual(roomIds.slice(-20).sort());
  for (const roomId of shown) expect(r.body.rooms[roomId].timeline.map((e: any) => e.content.body)).toEqual([`last in ${roomIds.indexOf(roomId)}`]);
  expect(built).toHaveBeenCalledTimes(20);
  expect(unread).toHaveBeenCalledTimes(20);
  built.mockRestore();
  unread.mockRestore();
});
