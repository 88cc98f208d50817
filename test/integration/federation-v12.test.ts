import { afterEach, describe, expect, it } from 'vitest';
import { federatedServers, syncUntil as syncUntilOn, until, type Account, type FederatedServer } from '../support/federated-homeservers.ts';
import { validateFederationResponse } from '../support/spec-schema.ts';

// Room version 12 between two Hearth servers (issue 35, item 9): room IDs that are the create
// event's hash (no server to reach the room through, so joins name one), creators with
// infinite power who never appear in the power levels, moderation under those rules, history
// back to the create event, and upgrades to a v12 room with additional creators.

let net: Awaited<ReturnType<typeof federatedServers>> | undefined;
afterEach(async () => {
  await net?.close();
  net = undefined;
});
async function twoServers(): Promise<{ a: FederatedServer; b: FederatedServer; alice: Account; bob: Account; carol: Account }> {
  net = await federatedServers(2);
  const [a, b] = net.servers as [FederatedServer, FederatedServer];
  const [alice, bob, carol] = await Promise.all([a.register('alice'), b.register('bob'), b.register('carol')]);
  return { a, b, alice, bob, carol };
}

const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;
const HASHED_ROOM_ID = /^![A-Za-z0-9_-]{43}$/;
const syncUntil = (server: FederatedServer, account: Account, predicate: (body: any) => boolean) =>
  syncUntilOn(server, account, predicate, undefined, { rounds: 60, pollMs: 1000 });
const timeline = (roomId: string) => (s: any): any[] => s.rooms?.join?.[roomId]?.timeline?.events ?? [];
const membership = (userId: string, value: string) => (e: any) => e.type === 'm.room.member' && e.state_key === userId && e.content.membership === value;
const say = (server: FederatedServer, account: Account, roomId: string, body: string) =>
  server.api('PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/${crypto.randomUUID()}`, { token: account.accessToken, body: { msgtype: 'm.text', body } });
const putState = (server: FederatedServer, account: Account, roomId: string, type: string, content: object) =>
  server.api('PUT', `${V3}/rooms/${enc(roomId)}/state/${type}/`, { token: account.accessToken, body: content });
const getState = async (server: FederatedServer, account: Account, roomId: string, type: string) =>
  (await server.api('GET', `${V3}/rooms/${enc(roomId)}/state/${type}/`, { token: account.accessToken })).body;
const join = (server: FederatedServer, account: Account, roomId: string, via?: string) =>
  server.api('POST', `${V3}/join/${enc(roomId)}${via ? `?via=${enc(via)}` : ''}`, { token: account.accessToken, body: {} });

describe('room version 12 across two Hearth servers', () => {
  it('creates a room whose ID is its create event\'s hash, joined from the other server through a named server, messages both ways and history back to the create event', async () => {
    const { a, b, alice, bob } = await twoServers();
    const capabilities = await a.api('GET', `${V3}/capabilities`, { token: alice.accessToken });
    expect(capabilities.body.capabilities['m.room_versions'].available['12']).toBe('stable');
    expect(capabilities.body.capabilities['m.room_versions'].default).toBe('10');

    const created = await a.api('POST', `${V3}/createRoom`, { token: alice.accessToken, body: { room_version: '12', preset: 'public_chat', name: 'Twelve' } });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const roomId = created.body.room_id as string;
    expect(roomId).toMatch(HASHED_ROOM_ID);
    const create = (await a.api('GET', `${V3}/rooms/${enc(roomId)}/state/m.room.create/?format=event`, { token: alice.accessToken, unchecked: true })).body;
    expect(create.event_id).toBe('$' + roomId.slice(1));
    expect(create.room_id).toBe(roomId); // clients see the room ID on the create event too, as Synapse shows it
    expect(create.content).toEqual({ room_version: '12' });
    const powerLevels = await getState(a, alice, roomId, 'm.room.power_levels');
    expect(powerLevels.users).toEqual({});
    expect(powerLevels.events['m.room.tombstone']).toBe(150);

    for (let i = 0; i < 12; i++) expect((await say(a, alice, roomId, `before bob ${i}`)).status).toBe(200);

    // The room ID names no server: without one to ask, there is no way in.
    const lost = await join(b, bob, roomId);
    expect(lost.status).toBe(404);
    const joined = await join(b, bob, roomId, a.serverName);
    expect(joined.status, JSON.stringify(joined.body)).toBe(200);
    expect(joined.body.room_id).toBe(roomId);

    // What crossed: a make_join of version 12, and a send_join answer whose create event has no room_id and
    // whose other events do not list it, while the auth chain still carries it.
    const makeJoin = b.sent.find((x) => x.path.startsWith('/_matrix/federation/v1/make_join/'))!;
    expect(makeJoin.response.room_version).toBe('12');
    expect(makeJoin.response.event.auth_events).not.toContain(create.event_id);
    const sendJoin = b.sent.find((x) => x.path.startsWith('/_matrix/federation/v2/send_join/'))!;
    validateFederationResponse('PUT', sendJoin.path, sendJoin.status, sendJoin.response);
    const wireCreate = [...sendJoin.response.state, ...sendJoin.response.auth_chain].find((e: any) => e.type === 'm.room.create');
    expect(wireCreate).toBeDefined();
    expect('room_id' in wireCreate).toBe(false);
    for (const e of [...sendJoin.response.state, ...sendJoin.response.auth_chain]) expect(e.auth_events).not.toContain(create.event_id);
    expect(sendJoin.request.auth_events).not.toContain(create.event_id);

    expect((await say(b, bob, roomId, 'hello from b')).status).toBe(200);
    await syncUntil(a, alice, (s) => timeline(roomId)(s).some((e) => e.content?.body === 'hello from b'));
    expect((await say(a, alice, roomId, 'hello from a')).status).toBe(200);
    await syncUntil(b, bob, (s) => timeline(roomId)(s).some((e) => e.content?.body === 'hello from a'));

    // Bob's server joined late: paging back fetches the history by /backfill, down to the create event.
    const seen: any[] = [];
    let from: string | undefined;
    for (let page = 0; page < 20; page++) {
      const { status, body } = await b.api('GET', `${V3}/rooms/${enc(roomId)}/messages?dir=b&limit=5${from ? `&from=${from}` : ''}`, { token: bob.accessToken });
      expect(status, JSON.stringify(body)).toBe(200);
      seen.push(...body.chunk);
      if (!body.end) break;
      from = body.end;
    }
    expect(seen.filter((e) => e.type === 'm.room.message').map((e) => e.content.body).reverse()).toEqual([...Array.from({ length: 12 }, (_, i) => `before bob ${i}`), 'hello from b', 'hello from a']);
    expect(seen.at(-1)).toMatchObject({ type: 'm.room.create', event_id: create.event_id, room_id: roomId });
    expect(b.sent.some((x) => x.path.startsWith(`/_matrix/federation/v1/backfill/${enc(roomId)}`))).toBe(true);

    // Having left, bob comes back with no server named: his server still holds the room, whose creator's server it asks.
    expect((await b.api('POST', `${V3}/rooms/${enc(roomId)}/leave`, { token: bob.accessToken, body: {} })).status).toBe(200);
    await until(async () => (await a.homeserver.services.rooms.membership(roomId, bob.userId)) === 'leave');
    const makeJoins = () => b.sent.filter((x) => x.destination === a.serverName && x.path.startsWith('/_matrix/federation/v1/make_join/')).length;
    const before = makeJoins();
    const back = await join(b, bob, roomId);
    expect(back.status, JSON.stringify(back.body)).toBe(200);
    expect(makeJoins()).toBe(before + 1);
    await until(async () => (await a.homeserver.services.rooms.membership(roomId, bob.userId)) === 'join');
  });

  it('moderates with creators: power levels never list them, no one kicks or bans them, they kick and ban anyone', async () => {
    const { a, b, alice, bob, carol } = await twoServers();
    const { body: created } = await a.api('POST', `${V3}/createRoom`, { token: alice.accessToken, body: { room_version: '12', preset: 'public_chat' } });
    const roomId = created.room_id as string;
    for (const user of [bob, carol]) expect((await join(b, user, roomId, a.serverName)).status).toBe(200);
    await until(async () => (await a.homeserver.services.rooms.membership(roomId, carol.userId)) === 'join');

    // Bob becomes a moderator; alice, a creator, may not be listed at any level.
    const listsAlice = await putState(a, alice, roomId, 'm.room.power_levels', { ...(await getState(a, alice, roomId, 'm.room.power_levels')), users: { [alice.userId]: 100, [bob.userId]: 50 } });
    expect(listsAlice.status).toBe(403);
    expect(listsAlice.body.errcode).toBe('M_FORBIDDEN');
    const promoted = await putState(a, alice, roomId, 'm.room.power_levels', { ...(await getState(a, alice, roomId, 'm.room.power_levels')), users: { [bob.userId]: 50 } });
    expect(promoted.status, JSON.stringify(promoted.body)).toBe(200);
    await until(async () => (await b.homeserver.services.rooms.currentStateEvent(roomId, 'm.room.power_levels', ''))?.event.event_id === promoted.body.event_id);

    // Bob (50) kicks carol (0) on his own server; alice sees it.
    const kick = await b.api('POST', `${V3}/rooms/${enc(roomId)}/kick`, { token: bob.accessToken, body: { user_id: carol.userId, reason: 'out' } });
    expect(kick.status, JSON.stringify(kick.body)).toBe(200);
    await syncUntil(a, alice, (s) => timeline(roomId)(s).some(membership(carol.userId, 'leave')));
    // Neither bob nor anyone below infinity may kick or ban alice.
    const kickAlice = await b.api('POST', `${V3}/rooms/${enc(roomId)}/kick`, { token: bob.accessToken, body: { user_id: alice.userId } });
    expect(kickAlice.status).toBe(403);
    const banAlice = await b.api('POST', `${V3}/rooms/${enc(roomId)}/ban`, { token: bob.accessToken, body: { user_id: alice.userId } });
    expect(banAlice.status).toBe(403);
    // Alice bans bob, her moderator, and the ban holds on bob's server: he can no longer speak.
    const ban = await a.api('POST', `${V3}/rooms/${enc(roomId)}/ban`, { token: alice.accessToken, body: { user_id: bob.userId } });
    expect(ban.status, JSON.stringify(ban.body)).toBe(200);
    await until(async () => (await b.homeserver.services.rooms.membership(roomId, bob.userId)) === 'ban');
    expect((await say(b, bob, roomId, 'still here?')).status).toBe(403);
    const unban = await a.api('POST', `${V3}/rooms/${enc(roomId)}/unban`, { token: alice.accessToken, body: { user_id: bob.userId } });
    expect(unban.status).toBe(200);
    await until(async () => (await b.homeserver.services.rooms.membership(roomId, bob.userId)) === 'leave');
  });

  it('makes invitees of a trusted private chat creators, whom another creator cannot kick, and redactions cross', async () => {
    const { a, b, alice, bob } = await twoServers();
    const created = await a.api('POST', `${V3}/createRoom`, { token: alice.accessToken, body: { room_version: '12', preset: 'trusted_private_chat', invite: [bob.userId], is_direct: true } });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const roomId = created.body.room_id as string;
    const create = await getState(a, alice, roomId, 'm.room.create');
    expect(create.additional_creators).toEqual([bob.userId]);
    expect((await getState(a, alice, roomId, 'm.room.power_levels')).users).toEqual({});
    await syncUntil(b, bob, (s) => !!s.rooms?.invite?.[roomId]);
    expect((await join(b, bob, roomId)).status).toBe(200); // through the inviter's server

    // Bob, a creator, changes what only the highest may: the power to upgrade.
    const raised = await putState(b, bob, roomId, 'm.room.power_levels', { ...(await getState(b, bob, roomId, 'm.room.power_levels')), events: { 'm.room.tombstone': 9007199254740991 } });
    expect(raised.status, JSON.stringify(raised.body)).toBe(200);
    await until(async () => (await a.homeserver.services.rooms.currentStateEvent(roomId, 'm.room.power_levels', ''))?.event.event_id === raised.body.event_id);
    const kickBob = await a.api('POST', `${V3}/rooms/${enc(roomId)}/kick`, { token: alice.accessToken, body: { user_id: bob.userId } });
    expect(kickBob.status).toBe(403);

    const said = await say(b, bob, roomId, 'take this back');
    await syncUntil(a, alice, (s) => timeline(roomId)(s).some((e) => e.event_id === said.body.event_id));
    const redaction = await a.api('PUT', `${V3}/rooms/${enc(roomId)}/redact/${enc(said.body.event_id)}/r1`, { token: alice.accessToken, body: { reason: 'no' } });
    expect(redaction.status, JSON.stringify(redaction.body)).toBe(200);
    await until(async () => (await b.homeserver.services.rooms.getEvent(said.body.event_id))?.redactedBy === redaction.body.event_id);
  });

  it('upgrades a room to version 12 with an additional creator; the tombstone names the new room, which names its predecessor', async () => {
    const { a, b, alice, bob } = await twoServers();
    const { body: created } = await a.api('POST', `${V3}/createRoom`, { token: alice.accessToken, body: { room_version: '10', preset: 'public_chat', name: 'Old' } });
    const oldRoom = created.room_id as string;
    expect((await join(b, bob, oldRoom)).status).toBe(200);
    await until(async () => (await a.homeserver.services.rooms.membership(oldRoom, bob.userId)) === 'join');
    await putState(a, alice, oldRoom, 'm.room.power_levels', { ...(await getState(a, alice, oldRoom, 'm.room.power_levels')), users: { [alice.userId]: 100, [bob.userId]: 50 } });

    const upgraded = await a.api('POST', `${V3}/rooms/${enc(oldRoom)}/upgrade`, { token: alice.accessToken, body: { new_version: '12', additional_creators: [bob.userId] } });
    expect(upgraded.status, JSON.stringify(upgraded.body)).toBe(200);
    const newRoom = upgraded.body.replacement_room as string;
    expect(newRoom).toMatch(HASHED_ROOM_ID);
    const create = await getState(a, alice, newRoom, 'm.room.create');
    expect(create).toEqual({ room_version: '12', predecessor: { room_id: oldRoom }, additional_creators: [bob.userId] });
    const powerLevels = await getState(a, alice, newRoom, 'm.room.power_levels');
    expect(powerLevels.users).toEqual({}); // alice and bob are creators now: listed nowhere
    expect(await getState(a, alice, newRoom, 'm.room.name')).toEqual({ name: 'Old' });

    await syncUntil(b, bob, (s) => timeline(oldRoom)(s).some((e) => e.type === 'm.room.tombstone' && e.content.replacement_room === newRoom));
    expect((await join(b, bob, newRoom, a.serverName)).status).toBe(200);
    // Bob, an additional creator, has the power to upgrade the new room again, as a v12 room of his server's making.
    const again = await b.api('POST', `${V3}/rooms/${enc(newRoom)}/upgrade`, { token: bob.accessToken, body: { new_version: '12' } });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    const third = again.body.replacement_room as string;
    expect(await getState(b, bob, third, 'm.room.create')).toEqual({ room_version: '12', predecessor: { room_id: newRoom } });
    await syncUntil(a, alice, (s) => timeline(newRoom)(s).some((e) => e.type === 'm.room.tombstone' && e.content.replacement_room === third));
    // Alice is not a creator of the third room and was not carried over: she joins it, with no power there.
    expect((await join(a, alice, third, b.serverName)).status).toBe(200);
    expect((await putState(a, alice, third, 'm.room.topic', { topic: 'mine?' })).status).toBe(403);
  });
});
