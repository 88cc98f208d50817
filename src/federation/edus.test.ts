import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedRoom, syncUntil, threeServers, until, type Account, type FederatedServer, type ThreeServers } from '../../test/support/federated-homeservers.ts';
import { validateFederationRequest, validateFederationResponse } from '../../test/support/spec-schema.ts';
import type { Edu } from './queue.ts';

// Typing, receipts, presence and to-device messages between real homeservers: a
// local user's action on A goes out as an EDU to the servers that should hear it
// (B shares the room, C does not), B applies it, and B's client sees it in /sync.

const enc = encodeURIComponent;
let servers: ThreeServers;
let a: FederatedServer;
let b: FederatedServer;
let c: FederatedServer;
let alice: Account;
let bob: Account;
let carol: Account;
let roomId: string;
let txn = 0;

beforeAll(async () => {
  servers = await threeServers();
  ({ a, b, c, alice, bob, carol } = servers);
  roomId = await sharedRoom(a, alice, [[b, bob]]);
});
afterAll(() => servers.close());

/** The EDUs of a type a server sent to a destination in /send transactions, each transaction checked against the spec. */
function edusSent(from: FederatedServer, destination: string, type: string): Edu[] {
  return from.sent
    .filter((e) => e.destination === destination && e.path.startsWith('/_matrix/federation/v1/send/'))
    .flatMap((e) => {
      validateFederationRequest(e.method, e.path, e.request);
      validateFederationResponse(e.method, e.path, e.status, e.response);
      return (e.request.edus ?? []) as Edu[];
    })
    .filter((edu) => edu.edu_type === type);
}

/** A transaction of EDUs from one server to another, signed as any would be. */
function sendEdus(from: FederatedServer, to: FederatedServer, edus: Edu[]) {
  return from.homeserver.federation.component.client.sendTransaction(to.serverName, `crafted-${++txn}`, {
    origin: from.serverName, origin_server_ts: Date.now(), pdus: [], edus,
  });
}

const ephemeralOf = (body: any, type: string): any[] => (body.rooms?.join?.[roomId]?.ephemeral?.events ?? []).filter((e: any) => e.type === type);

describe('typing', () => {
  it('a local user\'s typing goes to the other servers in the room and shows in their clients\' /sync', async () => {
    const since = (await b.api('GET', '/_matrix/client/v3/sync?timeout=0', { token: bob.accessToken })).body.next_batch;
    expect((await a.api('PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/typing/${enc(alice.userId)}`, { token: alice.accessToken, body: { typing: true, timeout: 10_000 } })).status).toBe(200);

    const seen = await syncUntil(b, bob, (s) => ephemeralOf(s, 'm.typing').some((e) => e.content.user_ids.includes(alice.userId)), since);
    expect(edusSent(a, b.serverName, 'm.typing').at(-1)!.content).toEqual({ room_id: roomId, user_id: alice.userId, typing: true });
    expect(edusSent(a, c.serverName, 'm.typing')).toEqual([]);

    await a.api('PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/typing/${enc(alice.userId)}`, { token: alice.accessToken, body: { typing: false } });
    await syncUntil(b, bob, (s) => ephemeralOf(s, 'm.typing').some((e) => e.content.user_ids.length === 0), seen.next_batch);
  });

  it('a client renewing its typing is not re-announced on every call', async () => {
    const before = edusSent(a, b.serverName, 'm.typing').length;
    for (let i = 0; i < 5; i++) a.homeserver.services.sync.typing.set(roomId, alice.userId, true, 10_000);
    await until(() => edusSent(a, b.serverName, 'm.typing').length > before);
    a.homeserver.services.sync.typing.set(roomId, alice.userId, false);
    await until(() => edusSent(a, b.serverName, 'm.typing').length === before + 2);
    expect(edusSent(a, b.serverName, 'm.typing').slice(before).map((e) => e.content['typing'])).toEqual([true, false]);
  });
});

describe('receipts', () => {
  it('a public read receipt goes to the room\'s other servers; a private one stays home', async () => {
    const { body: sent } = await a.api('PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/r1`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'read me' } });
    const eventId = sent.event_id as string;
    const since = (await b.api('GET', '/_matrix/client/v3/sync?timeout=0', { token: bob.accessToken })).body.next_batch;
    await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/receipt/m.read.private/${enc(eventId)}`, { token: alice.accessToken, body: {} });
    await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/receipt/m.read/${enc(eventId)}`, { token: alice.accessToken, body: {} });

    const seen = await syncUntil(b, bob, (s) => ephemeralOf(s, 'm.receipt').some((e) => e.content[eventId]?.['m.read']?.[alice.userId]), since);
    expect(ephemeralOf(seen, 'm.receipt').flatMap((e) => Object.values(e.content).flatMap((byType: any) => Object.keys(byType)))).not.toContain('m.read.private');
    const edus = edusSent(a, b.serverName, 'm.receipt');
    expect(edus.at(-1)!.content).toEqual({ [roomId]: { 'm.read': { [alice.userId]: { event_ids: [eventId], data: { ts: expect.any(Number) } } } } });
    expect(JSON.stringify(edus)).not.toContain('m.read.private');
    expect(edusSent(a, c.serverName, 'm.receipt')).toEqual([]);
  });
});

describe('presence', () => {
  it('a presence change goes to the servers sharing a room with the user, and shows in /sync there', async () => {
    const since = (await b.api('GET', '/_matrix/client/v3/sync?timeout=0', { token: bob.accessToken })).body.next_batch;
    const put = await a.api('PUT', `/_matrix/client/v3/presence/${enc(alice.userId)}/status`, { token: alice.accessToken, body: { presence: 'unavailable', status_msg: 'baking' } });
    expect(put.status).toBe(200);

    const seen = await syncUntil(b, bob, (s) => (s.presence?.events ?? []).some((e: any) => e.sender === alice.userId && e.content.presence === 'unavailable'), since);
    expect(seen.presence.events.find((e: any) => e.sender === alice.userId).content).toMatchObject({ presence: 'unavailable', status_msg: 'baking' });
    expect(edusSent(a, b.serverName, 'm.presence').at(-1)!.content).toMatchObject({ push: [{ user_id: alice.userId, presence: 'unavailable', status_msg: 'baking', last_active_ago: expect.any(Number) }] });
    expect(edusSent(a, c.serverName, 'm.presence')).toEqual([]);
  });
});

describe('to-device messages', () => {
  it('reach a remote device through its server, once even when the EDU comes again', async () => {
    const since = (await b.api('GET', '/_matrix/client/v3/sync?timeout=0', { token: bob.accessToken })).body.next_batch;
    const messages = { [bob.userId]: { [bob.deviceId]: { secret: 'for bob' } }, [`@ghost:${b.serverName}`]: { X: { lost: true } } };
    expect((await a.api('PUT', '/_matrix/client/v3/sendToDevice/m.hearth.test/td1', { token: alice.accessToken, body: { messages } })).status).toBe(200);

    const seen = await syncUntil(b, bob, (s) => (s.to_device?.events ?? []).length > 0, since);
    expect(seen.to_device.events).toEqual([{ sender: alice.userId, type: 'm.hearth.test', content: { secret: 'for bob' } }]);
    const [edu, ...more] = edusSent(a, b.serverName, 'm.direct_to_device');
    expect(more).toEqual([]);
    expect(edu!.content).toMatchObject({ sender: alice.userId, type: 'm.hearth.test', message_id: expect.any(String), messages });

    // The same message ID in another transaction is not delivered again.
    await sendEdus(a, b, [edu!]);
    const after = await b.api('GET', `/_matrix/client/v3/sync?timeout=0&since=${seen.next_batch}`, { token: bob.accessToken });
    expect(after.body.to_device?.events ?? []).toEqual([]);
    expect(await b.homeserver.services.keys.toDevice.pending(bob.userId, bob.deviceId)).toBe(0);
  });
});

describe('EDUs about other servers\' users', () => {
  it('are dropped: a server speaks only for its own users, and typing only for members of the room', async () => {
    const strangerOfA = `@stranger:${a.serverName}`;
    const since = (await b.api('GET', '/_matrix/client/v3/sync?timeout=0', { token: bob.accessToken })).body.next_batch;
    const response = await sendEdus(a, b, [
      { edu_type: 'm.typing', content: { room_id: roomId, user_id: carol.userId, typing: true } },
      { edu_type: 'm.typing', content: { room_id: roomId, user_id: strangerOfA, typing: true } },
      { edu_type: 'm.receipt', content: { [roomId]: { 'm.read': { [carol.userId]: { event_ids: ['$forged'], data: { ts: 1 } } } } } },
      { edu_type: 'm.presence', content: { push: [{ user_id: carol.userId, presence: 'online', last_active_ago: 0 }] } },
      { edu_type: 'm.direct_to_device', content: { sender: carol.userId, type: 'm.forged', message_id: 'forged-1', messages: { [bob.userId]: { '*': { forged: true } } } } },
      { edu_type: 'm.typing', content: { room_id: roomId, typing: 'yes' } },
      { edu_type: 'org.example.unknown', content: {} },
    ]);
    expect(response).toEqual({ pdus: {} });

    const { sync } = b.homeserver.services;
    expect(sync.typing.get(roomId).userIds).not.toContain(carol.userId);
    expect(sync.typing.get(roomId).userIds).not.toContain(strangerOfA);
    expect(await sync.receipts.since(roomId, bob.userId, 0, Number.MAX_SAFE_INTEGER)).not.toContainEqual(expect.objectContaining({ user_id: carol.userId }));
    expect(sync.presence.get(carol.userId).presence).toBe('offline');
    expect(await b.homeserver.services.keys.toDevice.pending(bob.userId, bob.deviceId)).toBe(0);
    const after = await b.api('GET', `/_matrix/client/v3/sync?timeout=0&since=${since}`, { token: bob.accessToken });
    expect(JSON.stringify(after.body)).not.toContain(carol.userId);
  });

  it('from the user\'s own server are applied: typing of a member, straight from a transaction', async () => {
    await sendEdus(a, b, [{ edu_type: 'm.typing', content: { room_id: roomId, user_id: alice.userId, typing: true } }]);
    expect(b.homeserver.services.sync.typing.get(roomId).userIds).toContain(alice.userId);
    await sendEdus(a, b, [{ edu_type: 'm.typing', content: { room_id: roomId, user_id: alice.userId, typing: false } }]);
    expect(b.homeserver.services.sync.typing.get(roomId).userIds).not.toContain(alice.userId);
  });
});
