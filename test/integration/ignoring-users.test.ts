// Ignoring users (m.ignored_user_list): their messages leave the ignorer's timelines and
// history, in rooms already shared too; their invites leave full and incremental syncs;
// unignoring brings their new events back. matrix-js-sdk sets the list, as clients do.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';
import { sdk } from './sdk.ts';

let server: TestServer;
let alice: Account;
let bob: Account;
let carol: Account;
let roomId: string;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;

beforeAll(async () => {
  server = await startTestServer();
  [bob, carol] = [await register(server, 'bob'), await register(server, 'carol')];
});
afterAll(() => server.close());

// Each case has an ignorer and a room of its own, so it runs alone and what one ignores leaves the others alone.
let run = 0;
beforeEach(async () => {
  alice = await register(server, `alice${++run}`);
  roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: carol.accessToken, body: { preset: 'public_chat' } })).body.room_id;
  for (const account of [alice, bob]) expect((await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: account.accessToken, body: {} })).status).toBe(200);
});

let txn = 0;
const say = async (account: Account, body: string, room = roomId) =>
  expect((await api(server, 'PUT', `${V3}/rooms/${enc(room)}/send/m.room.message/t${++txn}`, { token: account.accessToken, body: { msgtype: 'm.text', body } })).status).toBe(200);
const sync = async (since?: string) => (await api(server, 'GET', `${V3}/sync?timeout=0${since ? `&since=${since}` : ''}`, { token: alice.accessToken })).body;
const bodies = (body: any, room = roomId) => (body.rooms?.join?.[room]?.timeline?.events ?? []).filter((e: any) => e.type === 'm.room.message').map((e: any) => e.content.body);
const setIgnored = (users: string[]) => sdk.createClient({ baseUrl: server.url, accessToken: alice.accessToken, userId: alice.userId }).setIgnoredUsers(users);

/** Alice ignores bob; the sync position just after. */
async function ignoringBob(): Promise<string> {
  await setIgnored([bob.userId]);
  return (await sync()).next_batch;
}

describe('ignoring users', () => {
  it("hides what an ignored user says, in a room already shared, and keeps the room's state", async () => {
    await say(bob, 'before the ignore');
    const since = (await sync()).next_batch;
    await setIgnored([bob.userId]);
    await say(bob, 'while ignored');
    await say(carol, 'carol still speaks');
    const incremental = await sync(since);
    expect(bodies(incremental)).toEqual(['carol still speaks']);

    const initial = await sync();
    expect(bodies(initial)).toEqual(['carol still speaks']);
    const bobMember = [...initial.rooms.join[roomId].state.events, ...initial.rooms.join[roomId].timeline.events].find((e: any) => e.type === 'm.room.member' && e.state_key === bob.userId);
    expect(bobMember?.content.membership).toBe('join');

    const history = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/messages?dir=b&limit=50`, { token: alice.accessToken });
    expect(history.body.chunk.filter((e: any) => e.type === 'm.room.message').map((e: any) => e.content.body)).toEqual(['carol still speaks']);
  });

  it("leaves an ignored user's invites out of incremental and full syncs", async () => {
    const since = await ignoringBob();
    const other = (await api(server, 'POST', `${V3}/createRoom`, { token: bob.accessToken, body: { invite: [alice.userId] } })).body.room_id;
    const incremental = await sync(since);
    expect(incremental.rooms?.invite?.[other]).toBeUndefined();
    expect((await sync()).rooms?.invite?.[other]).toBeUndefined();
    // Carol's invite, sent the same way, shows.
    const carols = (await api(server, 'POST', `${V3}/createRoom`, { token: carol.accessToken, body: { invite: [alice.userId] } })).body.room_id;
    expect((await sync(incremental.next_batch)).rooms?.invite?.[carols]).toBeDefined();
  });

  it('brings new events back once unignored', async () => {
    await ignoringBob();
    const before = (await sync()).next_batch;
    await setIgnored([]);
    await say(bob, 'after the unignore');
    expect(bodies(await sync(before))).toContain('after the unignore');
  });

  it('refuses a malformed list, and ignoring oneself, in the Matrix error shape', async () => {
    const put = (content: unknown) => api(server, 'PUT', `${V3}/user/${enc(alice.userId)}/account_data/m.ignored_user_list`, { token: alice.accessToken, body: content, unchecked: true });
    for (const [content, errcode] of [[{ ignored_users: [bob.userId] }, 'M_BAD_JSON'], [{ ignored_users: { 'not a user': {} } }, 'M_INVALID_PARAM'], [{ ignored_users: { [alice.userId]: {} } }, 'M_INVALID_PARAM']] as const) {
      const r = await put(content);
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ errcode, error: expect.any(String) });
    }
  });
});
