// The user directory (POST /user_directory/search): whom a user can find to start a
// chat with. Raw HTTP checked against the spec, and matrix-js-sdk's own call.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';
import { sdk } from './sdk.ts';
import { sharedRoom, threeServers, until, type FederatedServer } from '../support/federated-homeservers.ts';

let server: TestServer;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;
let run = 0;
const newUser = (name: string) => register(server, `${name}${++run}`);

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

const search = async (account: Account, term: string, limit?: number) => {
  const r = await api(server, 'POST', `${V3}/user_directory/search`, { token: account.accessToken, body: { search_term: term, ...(limit === undefined ? {} : { limit }) } });
  expect(r.status).toBe(200);
  return r.body as { results: { user_id: string; display_name?: string }[]; limited: boolean };
};
const ids = (body: { results: { user_id: string }[] }) => body.results.map((r) => r.user_id).sort();
const createRoom = async (account: Account, body: object = {}) => (await api(server, 'POST', `${V3}/createRoom`, { token: account.accessToken, body })).body.room_id as string;
const join = (account: Account, roomId: string) => api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: account.accessToken, body: {} });
const leave = (account: Account, roomId: string) => api(server, 'POST', `${V3}/rooms/${enc(roomId)}/leave`, { token: account.accessToken, body: {} });
const setName = (account: Account, name: string) => api(server, 'PUT', `${V3}/profile/${enc(account.userId)}/displayname`, { token: account.accessToken, body: { displayname: name } });

describe('user directory', () => {
  it('finds users who share a room, by display name or user ID, and follows joins, leaves and name changes', async () => {
    const [searcher, friend, stranger] = [await newUser('sam'), await newUser('frieda'), await newUser('stan')];
    await setName(friend, 'Frieda Kahlo');
    await setName(stranger, 'Frieda Stranger');
    const roomId = await createRoom(searcher, { preset: 'private_chat', invite: [friend.userId] });
    expect(ids(await search(searcher, 'frieda'))).toEqual([]);
    expect((await join(friend, roomId)).status).toBe(200);

    // The stranger shares no room and is in no public room: never found.
    expect(ids(await search(searcher, 'frieda'))).toEqual([friend.userId]);
    expect(ids(await search(searcher, 'kahlo fri'))).toEqual([friend.userId]);
    expect(ids(await search(searcher, friend.userId.slice(1, 5)))).toEqual([friend.userId]);
    expect((await search(searcher, 'frieda')).results[0]!.display_name).toBe('Frieda Kahlo');

    await setName(friend, 'Frida');
    expect((await search(searcher, 'frida')).results).toEqual([{ user_id: friend.userId, display_name: 'Frida' }]);
    expect(ids(await search(searcher, 'kahlo'))).toEqual([]);

    expect((await leave(friend, roomId)).status).toBe(200);
    expect(ids(await search(searcher, 'frida'))).toEqual([]);
  });

  it('finds users in rooms anyone may join, until the join rule changes', async () => {
    const [searcher, host] = [await newUser('seeker'), await newUser('penelope')];
    const roomId = await createRoom(host, { preset: 'public_chat' });
    expect(ids(await search(searcher, 'penelope'))).toEqual([host.userId]);
    const rule = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/state/m.room.join_rules/`, { token: host.accessToken, body: { join_rule: 'invite' } });
    expect(rule.status).toBe(200);
    expect(ids(await search(searcher, 'penelope'))).toEqual([]);
  });

  it('drops users whose only room in common becomes private, by join rule or history visibility, and keeps them while it is world_readable, as Synapse does (issue 24, client behaviour 6)', async () => {
    const [searcher, host] = [await newUser('quester'), await newUser('odysseus')];
    const roomId = await createRoom(host, { preset: 'public_chat' });
    const put = async (type: string, content: object) =>
      expect((await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/state/${type}/`, { token: host.accessToken, body: content })).status).toBe(200);
    await put('m.room.history_visibility', { history_visibility: 'world_readable' });
    expect(ids(await search(searcher, 'odysseus'))).toEqual([host.userId]);
    // Invite only, but anyone may read it: still public, for the directory.
    await put('m.room.join_rules', { join_rule: 'invite' });
    expect(ids(await search(searcher, 'odysseus'))).toEqual([host.userId]);
    await put('m.room.history_visibility', { history_visibility: 'shared' });
    expect(ids(await search(searcher, 'odysseus'))).toEqual([]);
    await put('m.room.history_visibility', { history_visibility: 'world_readable' });
    expect(ids(await search(searcher, 'odysseus'))).toEqual([host.userId]);
    await put('m.room.history_visibility', { history_visibility: 'joined' });
    expect(ids(await search(searcher, 'odysseus'))).toEqual([]);
  });

  it('finds the searcher themselves only through a room anyone may join or read, as Synapse: a private room shares nothing with oneself (issue 41)', async () => {
    for (const [type, open, closed] of [
      ['m.room.join_rules', { join_rule: 'public' }, { join_rule: 'invite' }],
      ['m.room.history_visibility', { history_visibility: 'world_readable' }, { history_visibility: 'shared' }],
    ] as const) {
      const [creator, user] = [await newUser('creator'), await newUser('narcissus')];
      const displayname = `Narcissus ${run}`;
      await setName(user, displayname);
      const roomId = await createRoom(creator, { preset: 'private_chat', invite: [user.userId] });
      expect((await join(user, roomId)).status).toBe(200);
      const findsSelf = async () => ids(await search(user, displayname)).includes(user.userId);
      expect(await findsSelf()).toBe(false);
      expect((await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/state/${type}/`, { token: creator.accessToken, body: open })).status).toBe(200);
      expect(await findsSelf(), `${type} made open`).toBe(true);
      expect((await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/state/${type}/`, { token: creator.accessToken, body: closed })).status).toBe(200);
      expect(await findsSelf(), `${type} made private again`).toBe(false);
      // The creator, who shares the room, finds the user all along.
      expect(ids(await search(creator, displayname))).toEqual([user.userId]);
    }
  });

  it('limits the results and says when more exist', async () => {
    const searcher = await newUser('lim');
    const roomId = await createRoom(searcher, { preset: 'public_chat' });
    for (let i = 0; i < 3; i++) expect((await join(await newUser(`quokka${i}x`), roomId)).status).toBe(200);
    const limited = await search(searcher, 'quokka', 2);
    expect(limited.results).toHaveLength(2);
    expect(limited.limited).toBe(true);
    expect((await search(searcher, 'quokka', 3)).limited).toBe(false);
  });

  it('refuses a body without a search term, in the Matrix error shape', async () => {
    const searcher = await newUser('bad');
    const r = await api(server, 'POST', `${V3}/user_directory/search`, { token: searcher.accessToken, body: { limit: 3 }, unchecked: true });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ errcode: 'M_BAD_JSON', error: expect.any(String) });
  });

  it("answers matrix-js-sdk's searchUserDirectory", async () => {
    const [searcher, other] = [await newUser('sdkuser'), await newUser('zebedee')];
    await createRoom(other, { preset: 'public_chat' });
    const client = sdk.createClient({ baseUrl: server.url, accessToken: searcher.accessToken, userId: searcher.userId });
    const found = await client.searchUserDirectory({ term: 'zebedee' });
    expect(found.results.map((r) => r.user_id)).toEqual([other.userId]);
    expect(found.limited).toBe(false);
  });
});

describe('user directory across servers', () => {
  const find = async (server: FederatedServer, account: { accessToken: string }, term: string) => {
    const r = await server.api('POST', `${V3}/user_directory/search`, { token: account.accessToken, body: { search_term: term } });
    expect(r.status).toBe(200);
    return (r.body.results as { user_id: string }[]).map((u) => u.user_id);
  };

  for (const preset of ['invite-only', 'public']) {
    it(`drops a remote user once their server leaves the last shared room (${preset} room), on both sides`, async () => {
      const { a, b, alice, bob, close } = await threeServers();
      try {
        const roomId = await sharedRoom(a, alice, [[b, bob]]);
        if (preset === 'public') {
          expect((await a.api('PUT', `${V3}/rooms/${enc(roomId)}/state/m.room.join_rules/`, { token: alice.accessToken, body: { join_rule: 'public' } })).status).toBe(200);
        }
        await until(async () => (await find(b, bob, 'alice')).includes(alice.userId));
        expect(await find(a, alice, 'bob')).toEqual([bob.userId]);

        expect((await b.api('POST', `${V3}/rooms/${enc(roomId)}/leave`, { token: bob.accessToken, body: {} })).status).toBe(200);
        await until(async () => (await a.homeserver.services.rooms.membership(roomId, bob.userId)) === 'leave');
        expect(await find(a, alice, 'bob')).toEqual([]);
        // B is in the room no more: its copy of the room names no one it can find.
        expect(await find(b, bob, 'alice')).toEqual([]);
      } finally {
        await close();
      }
    });
  }
});
