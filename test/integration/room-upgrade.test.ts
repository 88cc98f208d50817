// POST /rooms/{roomId}/upgrade, driven by matrix-js-sdk's upgradeRoom: the old room gets a
// tombstone and is closed to ordinary members, the new one of the asked version carries its
// state, names its predecessor, takes its aliases and directory listing, and local members
// keep their push rules for it. Only someone who may send the tombstone may upgrade.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';
import { sdk } from './sdk.ts';

let server: TestServer;
let alice: Account;
let bob: Account;
let oldRoom: string;
let newRoom: string;
let alias: string;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;
const as = (account: Account) => ({ token: account.accessToken });
const stateOf = async (roomId: string, type: string) => (await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/state/${type}/`, as(alice))).body;

beforeAll(async () => {
  server = await startTestServer();
  [alice, bob] = [await register(server, 'alice'), await register(server, 'bob')];
  const created = await api(server, 'POST', `${V3}/createRoom`, {
    ...as(alice),
    body: {
      room_version: '10', preset: 'public_chat', visibility: 'public', room_alias_name: 'book-club', name: 'Book club', topic: 'Reading together',
      initial_state: [{ type: 'm.room.encryption', content: { algorithm: 'm.megolm.v1.aes-sha2' } }, { type: 'm.room.history_visibility', content: { history_visibility: 'joined' } }],
    },
  });
  oldRoom = created.body.room_id;
  alias = `#book-club:${server.homeserver.serverName}`;
  expect((await api(server, 'POST', `${V3}/join/${enc(oldRoom)}`, { ...as(bob), body: {} })).status).toBe(200);
  // Bob mutes the room, as Element does: an override rule named after it.
  const mute = await api(server, 'PUT', `${V3}/pushrules/global/override/${enc(oldRoom)}`, { ...as(bob), body: { actions: [], conditions: [{ kind: 'event_match', key: 'room_id', pattern: oldRoom }] } });
  expect(mute.status).toBe(200);
});
afterAll(() => server.close());

describe('room upgrades', () => {
  it('refuses a member without the power to send the tombstone, an unknown version and an unknown room', async () => {
    const byBob = await api(server, 'POST', `${V3}/rooms/${enc(oldRoom)}/upgrade`, { ...as(bob), body: { new_version: '11' } });
    expect(byBob.status).toBe(403);
    expect(byBob.body.errcode).toBe('M_FORBIDDEN');
    const badVersion = await api(server, 'POST', `${V3}/rooms/${enc(oldRoom)}/upgrade`, { ...as(alice), body: { new_version: '999' } });
    expect(badVersion.status).toBe(400);
    expect(badVersion.body.errcode).toBe('M_UNSUPPORTED_ROOM_VERSION');
    const unknown = await api(server, 'POST', `${V3}/rooms/${enc(`!nowhere:${server.homeserver.serverName}`)}/upgrade`, { ...as(alice), body: { new_version: '11' } });
    expect(unknown.status).toBe(404);
    expect(unknown.body.errcode).toBe('M_NOT_FOUND');
  });

  // The upgrade is done once, before the cases that read what it left, so each of them runs alone;
  // the refusals above run first, on the room as it was.
  describe('once alice has upgraded the room', () => {
    beforeAll(async () => {
      const client = sdk.createClient({ baseUrl: server.url, accessToken: alice.accessToken, userId: alice.userId });
      ({ replacement_room: newRoom } = await client.upgradeRoom(oldRoom, '11'));
    });

    it('makes a new room of the asked version with the old one as predecessor and its state carried over', async () => {
      expect(newRoom).not.toBe(oldRoom);

      const create = await stateOf(newRoom, 'm.room.create');
      expect(create.room_version).toBe('11');
      expect(create.predecessor.room_id).toBe(oldRoom);
      expect(await stateOf(newRoom, 'm.room.name')).toEqual({ name: 'Book club' });
      expect((await stateOf(newRoom, 'm.room.topic')).topic).toBe('Reading together');
      expect(await stateOf(newRoom, 'm.room.encryption')).toEqual({ algorithm: 'm.megolm.v1.aes-sha2' });
      expect(await stateOf(newRoom, 'm.room.history_visibility')).toEqual({ history_visibility: 'joined' });
      expect(await stateOf(newRoom, 'm.room.join_rules')).toEqual({ join_rule: 'public' });
      expect((await stateOf(newRoom, 'm.room.power_levels')).users[alice.userId]).toBe(100);
      expect(await stateOf(newRoom, 'm.room.canonical_alias')).toEqual({ alias });
    });

    it('tombstones the old room and stops ordinary members speaking there', async () => {
      expect(await stateOf(oldRoom, 'm.room.tombstone')).toEqual({ body: 'This room has been replaced', replacement_room: newRoom });
      const said = await api(server, 'PUT', `${V3}/rooms/${enc(oldRoom)}/send/m.room.message/late`, { ...as(bob), body: { msgtype: 'm.text', body: 'anyone?' } });
      expect(said.status).toBe(403);
    });

    it("names the old room's last event, its tombstone, as the predecessor's event_id, as Synapse does (issue 24, client behaviour 7)", async () => {
      const tombstone = await api(server, 'GET', `${V3}/rooms/${enc(oldRoom)}/state/m.room.tombstone/?format=event`, { ...as(alice), unchecked: true });
      expect(tombstone.body.event_id).toMatch(/^\$/);
      expect((await stateOf(newRoom, 'm.room.create')).predecessor).toEqual({ room_id: oldRoom, event_id: tombstone.body.event_id });
    });

    it('moves the aliases and the directory listing to the new room', async () => {
      expect((await api(server, 'GET', `${V3}/directory/room/${enc(alias)}`, as(bob))).body.room_id).toBe(newRoom);
      const listed = (await api(server, 'GET', `${V3}/publicRooms`, as(bob))).body.chunk.map((room: any) => room.room_id);
      expect(listed).toContain(newRoom);
      expect(listed).not.toContain(oldRoom);
    });

    it("copies local members' push rules for the room", async () => {
      const rule = await api(server, 'GET', `${V3}/pushrules/global/override/${enc(newRoom)}`, as(bob));
      expect(rule.status).toBe(200);
      expect(rule.body).toMatchObject({ rule_id: newRoom, actions: [], conditions: [{ kind: 'event_match', key: 'room_id', pattern: newRoom }] });
    });
  });
});

// What else Synapse carries over, which clients and the conformance suites expect (issue 41): bans, each local
// member's m.direct entry and tags for the room, its published or private visibility, and the user directory.
describe('room upgrades carry over what Synapse carries over', () => {
  let run = 0;
  const upgrade = async (owner: Account, roomId: string) => {
    const r = await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/upgrade`, { ...as(owner), body: { new_version: '11' } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body.replacement_room as string;
  };
  const users = async () => {
    run++;
    return [await register(server, `owner${run}`), await register(server, `friend${run}`)] as const;
  };

  it('bans, as the upgrader bans them in the new room', async () => {
    const [owner] = await users();
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { ...as(owner), body: { preset: 'public_chat' } })).body.room_id;
    const banned = '@bob:matrix.org';
    expect((await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/state/m.room.member/${enc(banned)}`, { ...as(owner), body: { membership: 'ban', reason: 'spam' } })).status).toBe(200);
    const replacement = await upgrade(owner, roomId);
    const member = await api(server, 'GET', `${V3}/rooms/${enc(replacement)}/state/m.room.member/${enc(banned)}?format=event`, { ...as(owner), unchecked: true });
    expect(member.status).toBe(200);
    expect(member.body).toMatchObject({ sender: owner.userId, content: { membership: 'ban', reason: 'spam' } });
  });

  it("every local member's m.direct entry and tags for the room", async () => {
    const [owner, friend] = await users();
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { ...as(owner), body: { preset: 'trusted_private_chat', is_direct: true, invite: [friend.userId] } })).body.room_id;
    expect((await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { ...as(friend), body: {} })).status).toBe(200);
    const direct = (account: Account, other: Account, rooms: string[]) =>
      api(server, 'PUT', `${V3}/user/${enc(account.userId)}/account_data/m.direct`, { ...as(account), body: { [other.userId]: rooms, '@someone:else.org': ['!other:else.org'] } });
    expect((await direct(owner, friend, [roomId])).status).toBe(200);
    expect((await direct(friend, owner, ['!older:else.org', roomId])).status).toBe(200);
    for (const [account, tag] of [[owner, 'm.favourite'], [friend, 'u.work']] as const) {
      expect((await api(server, 'PUT', `${V3}/user/${enc(account.userId)}/rooms/${enc(roomId)}/tags/${tag}`, { ...as(account), body: { order: 0.25 } })).status).toBe(200);
    }
    const replacement = await upgrade(owner, roomId);
    const directOf = async (account: Account) => (await api(server, 'GET', `${V3}/user/${enc(account.userId)}/account_data/m.direct`, as(account))).body;
    expect(await directOf(owner)).toEqual({ [friend.userId]: [roomId, replacement], '@someone:else.org': ['!other:else.org'] });
    expect(await directOf(friend)).toEqual({ [owner.userId]: ['!older:else.org', roomId, replacement], '@someone:else.org': ['!other:else.org'] });
    const tagsOf = async (account: Account) => (await api(server, 'GET', `${V3}/user/${enc(account.userId)}/rooms/${enc(replacement)}/tags`, as(account))).body.tags;
    expect(await tagsOf(owner)).toEqual({ 'm.favourite': { order: 0.25 } });
    expect(await tagsOf(friend)).toEqual({ 'u.work': { order: 0.25 } });
  });

  it("the room's visibility in the directory, public or private, and what the user directory finds", async () => {
    for (const visibility of ['public', 'private'] as const) {
      const [owner, friend] = await users();
      const roomId = (await api(server, 'POST', `${V3}/createRoom`, { ...as(owner), body: { preset: 'public_chat' } })).body.room_id;
      expect((await api(server, 'PUT', `${V3}/directory/list/room/${enc(roomId)}`, { ...as(owner), body: { visibility } })).status).toBe(200);
      expect((await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { ...as(friend), body: {} })).status).toBe(200);
      const stranger = await register(server, `stranger${run}${visibility}`);
      const finds = async (searcher: Account, user: Account) =>
        (await api(server, 'POST', `${V3}/user_directory/search`, { ...as(searcher), body: { search_term: user.userId.slice(1).split(':')[0]! } })).body.results.some((r: any) => r.user_id === user.userId);
      expect(await finds(stranger, friend)).toBe(true);
      const replacement = await upgrade(owner, roomId);
      expect((await api(server, 'GET', `${V3}/directory/list/room/${enc(replacement)}`)).body).toEqual({ visibility });
      expect((await api(server, 'GET', `${V3}/directory/list/room/${enc(roomId)}`)).body).toEqual({ visibility: 'private' });
      // friend is still in the old (public) room: as findable as before.
      expect(await finds(stranger, friend)).toBe(true);
      expect(await finds(friend, owner)).toBe(true);
    }
  });
});
