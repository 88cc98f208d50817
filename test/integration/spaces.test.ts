// Space hierarchies (client-server GET /_matrix/client/v1/rooms/{roomId}/hierarchy) through
// matrix-js-sdk and raw HTTP: a space of nested spaces walked depth first in the spec's child
// order, max_depth, suggested_only, pagination with `from`, rooms the user may not see left out,
// and the errors. Raw responses are checked against the spec's OpenAPI definitions by the harness.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { federatedServers } from '../support/federated-homeservers.ts';
import { validateFederationResponse } from '../support/spec-schema.ts';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';
import { sdk, startClient } from './sdk.ts';

let server: TestServer;
let alice: Account;
let bob: Account;
let bobClient: sdk.MatrixClient;
const V1 = '/_matrix/client/v1';
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;
const ids: Record<string, string> = {};

const names = (rooms: { room_id: string }[]): string[] => rooms.map((r) => Object.entries(ids).find(([, id]) => id === r.room_id)?.[0] ?? r.room_id);

const hierarchy = (account: Account, roomId: string, query = '') => api(server, 'GET', `${V1}/rooms/${enc(roomId)}/hierarchy${query}`, { token: account.accessToken });

beforeAll(async () => {
  server = await startTestServer();
  [alice, bob] = [await register(server, 'alice'), await register(server, 'bob')];
  const create = async (name: string, body: Record<string, unknown>) => {
    const created = await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: { name, ...body } });
    expect(created.status).toBe(200);
    ids[name] = created.body.room_id;
  };
  const space = { creation_content: { type: 'm.space' } };
  await create('root', { ...space, preset: 'public_chat', topic: 'Everything', room_alias_name: 'root' });
  await create('A', { ...space, preset: 'public_chat' });
  await create('B', { ...space, preset: 'private_chat' });
  await create('a1', { preset: 'public_chat' });
  await create('a2', { preset: 'public_chat' });
  await create('b1', { preset: 'public_chat' });
  await create('secret', { preset: 'private_chat' });
  await create('open', { preset: 'private_chat', initial_state: [{ type: 'm.room.history_visibility', content: { history_visibility: 'world_readable' } }] });
  const via = [server.homeserver.serverName];
  const child = async (parent: string, name: string, content: Record<string, unknown> = {}) => {
    const put = await api(server, 'PUT', `${V3}/rooms/${enc(ids[parent]!)}/state/m.space.child/${enc(ids[name]!)}`, { token: alice.accessToken, body: { via, ...content } });
    expect(put.status).toBe(200);
  };
  await child('root', 'open', { suggested: true });
  await child('root', 'secret', { order: 'c' });
  await child('root', 'B', { order: 'b' });
  await child('root', 'A', { order: 'a', suggested: true });
  await child('A', 'a2');
  await child('A', 'a1', { suggested: true });
  await child('A', 'root'); // a cycle: walked once
  await child('B', 'b1');
  // No servers to reach it through: not a child at all.
  await api(server, 'PUT', `${V3}/rooms/${enc(ids['A']!)}/state/m.space.child/${enc(ids['b1']!)}`, { token: alice.accessToken, body: { via: [] } });
  // bob has joined the space itself only.
  expect((await api(server, 'POST', `${V3}/join/${enc(ids['root']!)}`, { token: bob.accessToken, body: {} })).status).toBe(200);
  bobClient = await startClient(server.url, bob);
});
afterAll(async () => {
  bobClient?.stopClient();
  await server?.close();
});

describe('GET /hierarchy through matrix-js-sdk', () => {
  it('walks a space of nested spaces depth first, in the children order, leaving out rooms bob may not see', async () => {
    const result = await bobClient.getRoomHierarchy(ids['root']!);
    // Children with an `order` come first, by it; the rest by when they were added (a2 before a1).
    // B (private) and secret (invite only) are left out, and so is b1, reached only through B.
    expect(names(result.rooms)).toEqual(['root', 'A', 'a2', 'a1', 'open']);
    expect(result.next_batch).toBeUndefined();
    const root = result.rooms[0]!;
    expect(root).toMatchObject({ room_type: 'm.space', name: 'root', topic: 'Everything', canonical_alias: `#root:${server.homeserver.serverName}`, join_rule: 'public', num_joined_members: 2, world_readable: false, guest_can_join: false });
    // Every child is listed in the space's children_state, seen or not.
    expect(root.children_state.map((c) => c.state_key).sort()).toEqual([ids['A'], ids['B'], ids['secret'], ids['open']].sort());
    expect(result.rooms.find((r) => r.room_id === ids['a1'])!.children_state).toEqual([]);
    expect(result.rooms.find((r) => r.room_id === ids['open'])).toMatchObject({ world_readable: true, join_rule: 'invite' });
  });

  it('shows alice every room, and follows max_depth', async () => {
    const everything = await hierarchy(alice, ids['root']!);
    expect(names(everything.body.rooms)).toEqual(['root', 'A', 'a2', 'a1', 'B', 'b1', 'secret', 'open']);
    const shallow = await hierarchy(alice, ids['root']!, '?max_depth=1');
    expect(names(shallow.body.rooms)).toEqual(['root', 'A', 'B', 'secret', 'open']);
    const rootOnly = await hierarchy(alice, ids['root']!, '?max_depth=0');
    expect(names(rootOnly.body.rooms)).toEqual(['root']);
  });

  it('keeps to suggested children with suggested_only', async () => {
    const result = await bobClient.getRoomHierarchy(ids['root']!, undefined, undefined, true);
    expect(names(result.rooms)).toEqual(['root', 'A', 'a1', 'open']);
  });

  it('pages with from, each room once', async () => {
    const seen: string[] = [];
    let from: string | undefined;
    let pages = 0;
    do {
      const page = await bobClient.getRoomHierarchy(ids['root']!, 2, 5, false, from);
      expect(page.rooms.length).toBeLessThanOrEqual(2);
      seen.push(...names(page.rooms));
      from = page.next_batch;
      pages++;
    } while (from);
    expect(seen).toEqual(['root', 'A', 'a2', 'a1', 'open']);
    expect(pages).toBe(3);
  });
});

describe('GET /hierarchy errors', () => {
  it('refuses a space the user may not see, and one that does not exist, with M_FORBIDDEN', async () => {
    const privateSpace = await hierarchy(bob, ids['B']!);
    expect(privateSpace.status).toBe(403);
    expect(privateSpace.body.errcode).toBe('M_FORBIDDEN');
    expect((await hierarchy(bob, `!nowhere:${server.homeserver.serverName}`)).status).toBe(403);
  });

  it('refuses a changed max_depth or suggested_only between pages, an unknown token and bad numbers', async () => {
    const first = await hierarchy(alice, ids['root']!, '?limit=1&max_depth=3');
    expect(first.body.next_batch).toBeDefined();
    const changed = await hierarchy(alice, ids['root']!, `?limit=1&max_depth=2&from=${enc(first.body.next_batch)}`);
    expect(changed.status).toBe(400);
    expect(changed.body.errcode).toBe('M_INVALID_PARAM');
    const suggested = await hierarchy(alice, ids['root']!, `?limit=1&max_depth=3&suggested_only=true&from=${enc(first.body.next_batch)}`);
    expect(suggested.status).toBe(400);
    for (const query of ['?from=nonsense', '?limit=0', '?limit=-3', '?max_depth=-1', '?limit=many', '?suggested_only=maybe']) {
      const bad = await hierarchy(alice, ids['root']!, query);
      expect(bad.status, query).toBe(400);
      expect(bad.body.errcode, query).toBe('M_INVALID_PARAM');
    }
    const anonymous = await api(server, 'GET', `${V1}/rooms/${enc(ids['root']!)}/hierarchy`, {});
    expect(anonymous.status).toBe(401);
  });
});

describe('spaces across servers', () => {
  it('summarises children held by another server through its /federation/v1/hierarchy, leaving out what it keeps private', async () => {
    const network = await federatedServers(2);
    try {
      const [a, b] = network.servers as [(typeof network.servers)[0], (typeof network.servers)[0]];
      const [erin, frank] = [await a.register('erin'), await b.register('frank')];
      const createOn = async (server: typeof a, token: string, body: Record<string, unknown>) => (await server.api('POST', `${V3}/createRoom`, { token, body })).body.room_id as string;
      const farSpace = await createOn(b, frank.accessToken, { name: 'far space', preset: 'public_chat', creation_content: { type: 'm.space' } });
      const farRoom = await createOn(b, frank.accessToken, { name: 'far room', topic: 'on B', preset: 'public_chat' });
      const farSecret = await createOn(b, frank.accessToken, { name: 'far secret', preset: 'private_chat' });
      const child = async (server: typeof a, token: string, parent: string, childId: string, via: string) =>
        expect((await server.api('PUT', `${V3}/rooms/${enc(parent)}/state/m.space.child/${enc(childId)}`, { token, body: { via: [via] } })).status).toBe(200);
      await child(b, frank.accessToken, farSpace, farRoom, b.serverName);
      await child(b, frank.accessToken, farSpace, farSecret, b.serverName);

      // B answers A's server directly: the space, its child A may see, and the one it may not.
      const direct = await a.homeserver.federation.component.client.request<any>(b.serverName, 'GET', `/_matrix/federation/v1/hierarchy/${enc(farSpace)}`);
      validateFederationResponse('GET', `/_matrix/federation/v1/hierarchy/${enc(farSpace)}`, 200, direct);
      expect(direct.room).toMatchObject({ room_id: farSpace, name: 'far space', room_type: 'm.space', num_joined_members: 1 });
      expect(direct.children.map((r: any) => r.room_id)).toEqual([farRoom]);
      expect(direct.inaccessible_children).toEqual([farSecret]);
      await expect(a.homeserver.federation.component.client.request(b.serverName, 'GET', `/_matrix/federation/v1/hierarchy/${enc(farSecret)}`)).rejects.toMatchObject({ status: 404 });

      // A space on A whose children live on B: walked through B.
      const home = await createOn(a, erin.accessToken, { name: 'home', preset: 'public_chat', creation_content: { type: 'm.space' } });
      await child(a, erin.accessToken, home, farSpace, b.serverName);
      const walked = await a.api('GET', `${V1}/rooms/${enc(home)}/hierarchy`, { token: erin.accessToken });
      expect(walked.status).toBe(200);
      expect(walked.body.rooms.map((r: any) => r.name)).toEqual(['home', 'far space', 'far room']);
      expect(walked.body.rooms[2]).toMatchObject({ room_id: farRoom, topic: 'on B', join_rule: 'public', children_state: [] });
    } finally {
      await network.close();
    }
  });
});
