// Room housekeeping as established servers do it: deleting the canonical alias clears it
// from the room's m.room.canonical_alias, and a redaction sent through one room's path for
// another room's event is refused. Raw HTTP, checked against the spec.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientCalls } from '../support/client-calls.ts';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

let server: TestServer;
let alice: Account;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;

beforeAll(async () => {
  server = await startTestServer();
  alice = await register(server, 'alice');
});
afterAll(() => server.close());

const createRoom = async (body: object = {}) => (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body })).body.room_id as string;
const canonical = async (roomId: string) => (await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/state/m.room.canonical_alias/`, { token: alice.accessToken })).body;

describe('room housekeeping', () => {
  it('deleting the canonical alias clears it from the room, keeping the others', async () => {
    const roomId = await createRoom({ room_alias_name: 'lounge' });
    const main = `#lounge:${server.homeserver.serverName}`;
    const other = `#den:${server.homeserver.serverName}`;
    expect((await api(server, 'PUT', `${V3}/directory/room/${enc(other)}`, { token: alice.accessToken, body: { room_id: roomId } })).status).toBe(200);
    const set = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/state/m.room.canonical_alias/`, { token: alice.accessToken, body: { alias: main, alt_aliases: [other] } });
    expect(set.status).toBe(200);

    expect((await api(server, 'DELETE', `${V3}/directory/room/${enc(main)}`, { token: alice.accessToken })).status).toBe(200);
    expect(await canonical(roomId)).toEqual({ alt_aliases: [other] });
    expect((await api(server, 'DELETE', `${V3}/directory/room/${enc(other)}`, { token: alice.accessToken })).status).toBe(200);
    expect(await canonical(roomId)).toEqual({});
  });

  it("refuses a redaction sent through one room's path for another room's event", async () => {
    const [first, second] = [await createRoom(), await createRoom()];
    const sent = await api(server, 'PUT', `${V3}/rooms/${enc(first)}/send/m.room.message/t1`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'keep me' } });
    const redaction = await api(server, 'PUT', `${V3}/rooms/${enc(second)}/redact/${enc(sent.body.event_id)}/r1`, { token: alice.accessToken, body: {}, unchecked: true });
    expect(redaction.status).toBe(400);
    expect(redaction.body).toMatchObject({ errcode: 'M_INVALID_PARAM', error: expect.stringContaining(sent.body.event_id) });
    const event = await api(server, 'GET', `${V3}/rooms/${enc(first)}/event/${enc(sent.body.event_id)}`, { token: alice.accessToken });
    expect(event.body.content).toEqual({ msgtype: 'm.text', body: 'keep me' });
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 8).
describe('repeated state', () => {
  const { newUser, createRoom, join, putState, getState, history } = clientCalls(() => server);
  it('setting a state event identical to the current one returns its event ID and makes no new event', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    const first = await putState(alice, roomId, 'm.room.topic', '', { topic: 'Gardening' });
    const before = await history(alice, roomId);
    expect(await putState(alice, roomId, 'm.room.topic', '', { topic: 'Gardening' })).toBe(first);
    expect(await putState(alice, roomId, 'm.room.topic', '', { topic: 'Gardening' })).toBe(first);
    expect((await history(alice, roomId)).map((e) => e.event_id)).toEqual(before.map((e) => e.event_id));
    // A change, or the same content from someone else, is a new event.
    const changed = await putState(alice, roomId, 'm.room.topic', '', { topic: 'Cooking' });
    expect(changed).not.toBe(first);
    await putState(alice, roomId, 'm.room.power_levels', '', { ...(await getState(alice, roomId, 'm.room.power_levels')), users: { [alice.userId]: 100, [bob.userId]: 50 } });
    await join(bob, roomId);
    const bobs = await putState(bob, roomId, 'm.room.topic', '', { topic: 'Cooking' });
    expect(bobs).not.toBe(changed);
    // The same membership with the same content (a repeated profile-less rejoin) is no new event either.
    const member = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/state/m.room.member/${enc(bob.userId)}?format=event`, { token: bob.accessToken, unchecked: true });
    expect(await putState(bob, roomId, 'm.room.member', bob.userId, member.body.content)).toBe(member.body.event_id);
  });
});
