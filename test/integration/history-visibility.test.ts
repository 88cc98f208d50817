// History visibility changes take effect exactly at their place in the timeline: a user who
// joins later sees what was sent while the room was `shared`, not what was sent while it was
// `joined` (before they joined), and again what came after their join. Raw HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bodies, clientCalls } from '../support/client-calls.ts';
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

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 16).
describe('history visibility', () => {
  const { newUser, createRoom, join, leave, send, putState, getState, sync, history } = clientCalls(() => server);
  for (const visibility of ['joined', 'invited'] as const) {
    it(`under ${visibility} visibility, a new member gets the room's current state, with many messages before and after the join`, async () => {
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

  for (const visibility of ['joined', 'invited'] as const) {
    it(`under ${visibility} visibility, the current state set before the join is in the new member's timeline, as Synapse puts it, but the messages are not (issue 24, client behaviour 4)`, async () => {
      const alice = await newUser('alice');
      const bob = await newUser('bob');
      const roomId = await createRoom(alice, { preset: 'public_chat', initial_state: [{ type: 'm.room.history_visibility', content: { history_visibility: visibility } }] });
      for (let i = 0; i < 20; i++) await send(alice, roomId, `early ${i}`);
      await putState(alice, roomId, 'm.room.topic', '', { topic: 'set before bob came' });
      await send(alice, roomId, 'just before');
      const since = (await sync(bob)).next_batch;
      await join(bob, roomId);
      await send(alice, roomId, 'after');
      const room = (await sync(bob, { since })).rooms.join[roomId];
      const timeline = room.timeline.events.map((e: any) => (e.type === 'm.room.message' ? e.content.body : `${e.type}|${e.state_key}`));
      // The room's first state (visible: before the visibility was set) and the topic, current state it could not
      // see, then the join; none of the messages from before it.
      expect(timeline.slice(-3)).toEqual(['m.room.topic|', `m.room.member|${bob.userId}`, 'after']);
      expect(timeline.filter((e: string) => !e.includes('|'))).toEqual(['after']);
      expect(room.state.events.some((e: any) => e.type === 'm.room.topic')).toBe(false);
    });
  }

  it('a room the user left shows only history from before the leave', async () => {
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

// What Synapse answers (issue 24, client behaviour 8): an event one may not see is 403, not 404.
describe('/context', () => {
  const { newUser, createRoom, join, send, putState } = clientCalls(() => server);
  it('answers 403 M_FORBIDDEN for an event the user may not read, and 404 only for an unknown one', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const carol = await newUser('carol');
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await putState(alice, roomId, 'm.room.history_visibility', '', { history_visibility: 'joined' });
    const hidden = await send(alice, roomId, 'before bob');
    await join(bob, roomId);
    const seen = await send(alice, roomId, 'after bob');
    const context = (account: Account, eventId: string) =>
      api(server, 'GET', `${V3}/rooms/${enc(roomId)}/context/${enc(eventId)}`, { token: account.accessToken, unchecked: true });
    expect((await context(bob, seen)).status).toBe(200);
    for (const [account, eventId] of [[bob, hidden], [carol, seen], [carol, hidden]] as const) {
      const refused = await context(account, eventId);
      expect([refused.status, refused.body.errcode]).toEqual([403, 'M_FORBIDDEN']);
    }
    const unknown = await context(bob, '$nothing-like-it');
    expect([unknown.status, unknown.body.errcode]).toEqual([404, 'M_NOT_FOUND']);
  });
});
