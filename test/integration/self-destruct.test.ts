// Self-destructing messages (MSC2228, `org.matrix.self_destruct_after`, a time in ms its sender sets), as the
// conformance suites check them (issue 41): until then a message reads as sent; from then on every way a client
// reads it gives it as if redacted (content {}), and search no longer finds its words. Messages from another
// server alike. The servers' clock is the test's, so time passes without waiting.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { federatedServers, syncUntil, type FederatedServer } from '../support/federated-homeservers.ts';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

let clock = Date.now();
const now = () => clock;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;
const MESSAGES_ONLY = enc(JSON.stringify({ types: ['m.room.message'] }));

describe('a message with org.matrix.self_destruct_after, sent here', () => {
  let server: TestServer;
  let alice: Account;
  beforeAll(async () => {
    server = await startTestServer({ now });
    alice = await register(server, 'alice');
  });
  afterAll(() => server.close());

  it('reads as sent until its time, then as if redacted everywhere, and search stops finding it', async () => {
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: {} })).body.room_id as string;
    const send = async (txn: string, content: object) =>
      (await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/${txn}`, { token: alice.accessToken, body: content })).body.event_id as string;
    const ephemeral = await send('e', { msgtype: 'm.text', body: 'This is a message', 'org.matrix.self_destruct_after': clock + 1000 });
    // Not a time: nothing happens to it.
    const odd = await send('o', { msgtype: 'm.text', body: 'Not a time', 'org.matrix.self_destruct_after': 'soon' });
    const topic = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/state/m.room.topic/`, { token: alice.accessToken, body: { topic: 'stays', 'org.matrix.self_destruct_after': clock } });
    expect(topic.status).toBe(200);

    const page = async () => (await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/messages?dir=b&filter=${MESSAGES_ONLY}`, { token: alice.accessToken })).body.chunk;
    const searchFinds = async (word: string) =>
      (await api(server, 'POST', `${V3}/search`, { token: alice.accessToken, body: { search_categories: { room_events: { search_term: word } } } })).body.search_categories.room_events.results.length;
    expect((await page()).map((e: any) => e.content.body)).toEqual(['Not a time', 'This is a message']);
    expect(await searchFinds('message')).toBe(1);

    clock += 1000;
    const chunk = await page();
    expect(chunk.map((e: any) => e.event_id)).toEqual([odd, ephemeral]);
    expect(chunk[1].content).toEqual({});
    expect(chunk[0].content.body).toBe('Not a time');
    const timeline = (await api(server, 'GET', `${V3}/sync`, { token: alice.accessToken })).body.rooms.join[roomId].timeline.events;
    expect(timeline.find((e: any) => e.event_id === ephemeral).content).toEqual({});
    expect((await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/event/${enc(ephemeral)}`, { token: alice.accessToken })).body.content).toEqual({});
    expect((await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/context/${enc(odd)}`, { token: alice.accessToken })).body.events_before.find((e: any) => e.event_id === ephemeral)?.content).toEqual({});
    expect(await searchFinds('message')).toBe(0);
    expect((await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/state/m.room.topic/`, { token: alice.accessToken })).body.topic).toBe('stays');
  });
});

describe('a message with org.matrix.self_destruct_after, from another server', () => {
  let net: Awaited<ReturnType<typeof federatedServers>>;
  beforeAll(async () => {
    net = await federatedServers(2, { now });
  });
  afterAll(() => net.close());

  it('reads as if redacted on this server too once its time has come', async () => {
    const [a, b] = net.servers as [FederatedServer, FederatedServer];
    const [alice, bob] = [await a.register('alice'), await b.register('bob')];
    const roomId = (await a.api('POST', `${V3}/createRoom`, { token: alice.accessToken, body: { preset: 'public_chat' } })).body.room_id as string;
    expect((await b.api('POST', `${V3}/join/${enc(roomId)}?server_name=${enc(a.serverName)}`, { token: bob.accessToken, body: {} })).status).toBe(200);
    const sent = await b.api('PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/e`, { token: bob.accessToken, body: { msgtype: 'm.text', body: 'This is a message', 'org.matrix.self_destruct_after': clock + 1000 } });
    const eventId = sent.body.event_id as string;
    await syncUntil(a, alice, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.event_id === eventId && e.content.body === 'This is a message'));
    clock += 1000;
    const chunk = (await a.api('GET', `${V3}/rooms/${enc(roomId)}/messages?dir=b&filter=${MESSAGES_ONLY}`, { token: alice.accessToken })).body.chunk;
    expect(chunk.map((e: any) => [e.event_id, e.content])).toEqual([[eventId, {}]]);
  });
});
