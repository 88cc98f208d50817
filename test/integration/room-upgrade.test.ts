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

  it('makes a new room of the asked version with the old one as predecessor and its state carried over', async () => {
    const client = sdk.createClient({ baseUrl: server.url, accessToken: alice.accessToken, userId: alice.userId });
    ({ replacement_room: newRoom } = await client.upgradeRoom(oldRoom, '11'));
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
