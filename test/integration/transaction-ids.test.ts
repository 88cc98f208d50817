import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientCalls, enc, V3 } from '../support/client-calls.ts';
import { api, startTestServer, type Account, type TestServer } from './harness.ts';

// Client-server §Transaction identifiers: "The scope of a transaction ID is for a single
// device, and a single HTTP endpoint": the same txnId on another endpoint (another room's
// /send, another event type, /redact, /sendToDevice) is another request; a retry on the same
// endpoint and device is the same request.

let server: TestServer;
const { newUser, createRoom, join, login, sync } = clientCalls(() => server);

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server?.close());

describe('transaction IDs are scoped to the device and the endpoint', () => {
  let alice: Account;
  let bob: Account;
  let roomA: string;
  let roomB: string;
  const txnId = 'same-txn';
  const sendIn = (account: Account, roomId: string, type: string, body: string) =>
    api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/${enc(type)}/${txnId}`, { token: account.accessToken, body: { msgtype: 'm.text', body } });

  beforeAll(async () => {
    alice = await newUser('alice');
    bob = await newUser('bob');
    roomA = await createRoom(alice, { preset: 'public_chat' });
    roomB = await createRoom(alice, { preset: 'public_chat' });
    await join(bob, roomA);
  });

  it('the same txnId in two rooms, and for two event types, makes distinct events; each retry gives its own', async () => {
    const a = await sendIn(alice, roomA, 'm.room.message', 'in A');
    const b = await sendIn(alice, roomB, 'm.room.message', 'in B');
    const other = await sendIn(alice, roomA, 'org.example.note', 'another type');
    for (const r of [a, b, other]) expect(r.status, JSON.stringify(r.body)).toBe(200);
    const ids = [a.body.event_id, b.body.event_id, other.body.event_id];
    expect(new Set(ids).size).toBe(3);
    expect((await server.homeserver.services.rooms.getEvent(b.body.event_id))?.event.room_id).toBe(roomB);
    // Retries on the same endpoint and device are the same request.
    expect((await sendIn(alice, roomA, 'm.room.message', 'in A')).body.event_id).toBe(ids[0]);
    expect((await sendIn(alice, roomB, 'm.room.message', 'in B')).body.event_id).toBe(ids[1]);
    expect((await sendIn(alice, roomA, 'org.example.note', 'another type')).body.event_id).toBe(ids[2]);
    // Only the sending device sees its txnId echoed.
    const timeline = (await sync(alice)).rooms.join[roomB].timeline.events;
    expect(timeline.find((e: any) => e.event_id === ids[1])?.unsigned?.transaction_id).toBe(txnId);
  });

  it('the same txnId on /redact is another request, and redacting two events with one txnId makes two redactions', async () => {
    const first = (await sendIn(alice, roomA, 'm.room.message', 'redact me')).body.event_id;
    const second = (await api(server, 'PUT', `${V3}/rooms/${enc(roomA)}/send/m.room.message/other-txn`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'me too' } })).body.event_id;
    const redact = (eventId: string) => api(server, 'PUT', `${V3}/rooms/${enc(roomA)}/redact/${enc(eventId)}/${txnId}`, { token: alice.accessToken, body: {} });
    const r1 = await redact(first);
    const r2 = await redact(second);
    expect([r1.status, r2.status]).toEqual([200, 200]);
    expect(r1.body.event_id).not.toBe(r2.body.event_id);
    expect((await redact(first)).body.event_id).toBe(r1.body.event_id);
    const redactsOf = async (id: string) => (await server.homeserver.services.rooms.getEvent(id))?.event.redacts;
    expect([await redactsOf(r1.body.event_id), await redactsOf(r2.body.event_id)]).toEqual([first, second]);
    // The redaction's echo names the client's own txnId.
    const timeline = (await sync(alice)).rooms.join[roomA].timeline.events;
    expect(timeline.find((e: any) => e.event_id === r1.body.event_id)?.unsigned?.transaction_id).toBe(txnId);
  });

  it('the same txnId on /sendToDevice for two event types delivers both, once each', async () => {
    const since = (await sync(bob)).next_batch;
    const toDevice = (type: string, n: number) =>
      api(server, 'PUT', `${V3}/sendToDevice/${enc(type)}/${txnId}`, { token: alice.accessToken, body: { messages: { [bob.userId]: { [bob.deviceId]: { n } } } } });
    for (const [type, n] of [['m.one', 1], ['m.two', 2], ['m.one', 1]] as const) expect((await toDevice(type, n)).status).toBe(200);
    expect((await sync(bob, since)).to_device.events).toEqual([
      { sender: alice.userId, type: 'm.one', content: { n: 1 } },
      { sender: alice.userId, type: 'm.two', content: { n: 2 } },
    ]);
  });

  it('another device of the same user with the same txnId makes another event', async () => {
    const phone = await login(alice);
    const fromLaptop = (await sendIn(alice, roomA, 'm.room.message', 'in A')).body.event_id;
    const fromPhone = await sendIn(phone, roomA, 'm.room.message', 'in A');
    expect(fromPhone.status).toBe(200);
    expect(fromPhone.body.event_id).not.toBe(fromLaptop);
  });
});
