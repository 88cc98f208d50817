// Server-side search (client-server §Server Side Search) through matrix-js-sdk and raw HTTP:
// words found through the FTS4 index, history visibility per event, room filters, both orders,
// next_batch pagination, highlights, event context and the errors. Raw responses are checked
// against the spec's OpenAPI definitions by the harness.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { federatedServers, sharedRoom, syncUntil } from '../support/federated-homeservers.ts';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';
import { sdk, startClient } from './sdk.ts';

let server: TestServer;
let alice: Account;
let bob: Account;
let aliceClient: sdk.MatrixClient;
let bobClient: sdk.MatrixClient;
let joinedOnly: string;
let other: string;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;
let txn = 0;

async function say(account: Account, roomId: string, body: string): Promise<string> {
  const sent = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/t${txn++}`, { token: account.accessToken, body: { msgtype: 'm.text', body } });
  expect(sent.status).toBe(200);
  return sent.body.event_id;
}

const search = (account: Account, roomEvents: Record<string, unknown>, nextBatch?: string) =>
  api(server, 'POST', `${V3}/search${nextBatch ? `?next_batch=${enc(nextBatch)}` : ''}`, { token: account.accessToken, body: { search_categories: { room_events: roomEvents } } });

const bodies = (response: { body: any }): string[] => response.body.search_categories.room_events.results.map((r: any) => r.result.content.body);

beforeAll(async () => {
  server = await startTestServer();
  [alice, bob] = [await register(server, 'alice'), await register(server, 'bob')];
  await api(server, 'PUT', `${V3}/profile/${enc(alice.userId)}/displayname`, { token: alice.accessToken, body: { displayname: 'Alice' } });
  const create = async (body: Record<string, unknown>) => (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body })).body.room_id as string;
  joinedOnly = await create({
    preset: 'public_chat',
    name: 'Interplanetary council',
    topic: 'Where Mars is discussed',
    initial_state: [{ type: 'm.room.history_visibility', content: { history_visibility: 'joined' } }],
  });
  other = await create({ preset: 'public_chat' });
  await say(alice, joinedOnly, 'secret: the martians landed before bob came');
  await api(server, 'POST', `${V3}/join/${enc(joinedOnly)}`, { token: bob.accessToken, body: {} });
  await api(server, 'POST', `${V3}/join/${enc(other)}`, { token: bob.accessToken, body: {} });
  await say(alice, joinedOnly, 'welcome bob, we talk about martians and men here');
  await say(bob, joinedOnly, 'martians martians everywhere');
  await say(alice, joinedOnly, 'Crème brûlée for the martians');
  await say(alice, other, 'the martians of the other room');
  [aliceClient, bobClient] = [await startClient(server.url, alice), await startClient(server.url, bob)];
});
afterAll(async () => {
  aliceClient?.stopClient();
  bobClient?.stopClient();
  await server?.close();
});

describe('POST /search through matrix-js-sdk', () => {
  it('finds messages by their words, newest first, with highlights and one event of context either side', async () => {
    const results = await aliceClient.searchRoomEvents({ term: 'martians' });
    const found = results.results.map((r) => r.context.getEvent().getContent()['body']);
    expect(found).toEqual([
      'the martians of the other room',
      'Crème brûlée for the martians',
      'martians martians everywhere',
      'welcome bob, we talk about martians and men here',
      'secret: the martians landed before bob came',
    ]);
    expect(results.count).toBe(5);
    expect(results.highlights).toContain('martians');
    // The middle message of the room comes with the events on either side of it.
    const middle = results.results.find((r) => r.context.getEvent().getContent()['body'] === 'martians martians everywhere')!;
    const around = middle.context.getTimeline().map((e) => e.getContent()['body']);
    expect(around).toEqual(['welcome bob, we talk about martians and men here', 'martians martians everywhere', 'Crème brûlée for the martians']);
  });

  it('does not show a user who joined later what was said before, under joined visibility', async () => {
    const results = await bobClient.searchRoomEvents({ term: 'martians' });
    const found = results.results.map((r) => r.context.getEvent().getContent()['body']);
    expect(found).not.toContain('secret: the martians landed before bob came');
    expect(found).toHaveLength(4);
    expect(results.count).toBe(4);
    expect((await bobClient.searchRoomEvents({ term: 'secret' })).results).toHaveLength(0);
  });

  it('keeps to the rooms the filter names', async () => {
    const results = await aliceClient.searchRoomEvents({ term: 'martians', filter: { rooms: [other] } });
    expect(results.results.map((r) => r.context.getEvent().getRoomId())).toEqual([other]);
  });

  it('pages through every result with next_batch, none twice', async () => {
    const room = await aliceClient.createRoom({});
    for (let i = 0; i < 12; i++) await say(alice, room.room_id, `pagination probe number ${i}`);
    const results = await aliceClient.searchRoomEvents({ term: 'probe', filter: { limit: 5 } });
    expect(results.results).toHaveLength(5);
    expect(results.next_batch).toBeDefined();
    while (results.next_batch) await aliceClient.backPaginateRoomEventsSearch(results);
    const found = results.results.map((r) => r.context.getEvent().getContent()['body']);
    expect(found).toEqual(Array.from({ length: 12 }, (_, i) => `pagination probe number ${11 - i}`));
  });
});

describe('POST /search over raw HTTP', () => {
  it('orders by rank: a short message saying the word twice before a long one saying it once', async () => {
    const response = await search(alice, { search_term: 'martians', order_by: 'rank', filter: { rooms: [joinedOnly] } });
    expect(response.status).toBe(200);
    const results = response.body.search_categories.room_events.results;
    expect(results[0].result.content.body).toBe('martians martians everywhere');
    const ranks = results.map((r: any) => r.rank);
    expect([...ranks].sort((a: number, b: number) => b - a)).toEqual(ranks);
    expect(ranks.every((r: number) => r > 0)).toBe(true);
  });

  it('folds case and diacritics, and highlights the words as they are written', async () => {
    const response = await search(alice, { search_term: 'CREME brulee' });
    expect(bodies(response)).toEqual(['Crème brûlée for the martians']);
    expect(response.body.search_categories.room_events.highlights).toEqual(expect.arrayContaining(['Crème', 'brûlée']));
  });

  it('matches words as prefixes, quoted phrases exactly, and leaves out -words', async () => {
    expect(bodies(await search(alice, { search_term: 'marti', filter: { rooms: [other] } }))).toEqual(['the martians of the other room']);
    expect(bodies(await search(alice, { search_term: '"martians and men"' }))).toEqual(['welcome bob, we talk about martians and men here']);
    expect(bodies(await search(alice, { search_term: '"men and martians"' }))).toEqual([]);
    expect(bodies(await search(alice, { search_term: 'martians -bob -crème', filter: { rooms: [joinedOnly] } }))).toEqual(['martians martians everywhere']);
    expect(bodies(await search(alice, { search_term: 'everywhere OR welcome', order_by: 'recent' }))).toEqual([
      'martians martians everywhere',
      'welcome bob, we talk about martians and men here',
    ]);
  });

  it('searches room names and topics, and only the keys asked for', async () => {
    const names = await search(alice, { search_term: 'interplanetary', keys: ['content.name'] });
    expect(names.body.search_categories.room_events.results.map((r: any) => r.result.type)).toEqual(['m.room.name']);
    const topics = await search(alice, { search_term: 'mars', keys: ['content.topic'] });
    expect(topics.body.search_categories.room_events.results.map((r: any) => r.result.type)).toEqual(['m.room.topic']);
    expect(bodies(await search(alice, { search_term: 'interplanetary', keys: ['content.body'] }))).toEqual([]);
  });

  it('filters by sender and type', async () => {
    expect(bodies(await search(alice, { search_term: 'martians', filter: { senders: [bob.userId] } }))).toEqual(['martians martians everywhere']);
    expect(bodies(await search(alice, { search_term: 'martians', filter: { not_senders: [alice.userId] } }))).toEqual(['martians martians everywhere']);
    expect(bodies(await search(alice, { search_term: 'martians', filter: { types: ['m.room.topic'] } }))).toEqual([]);
  });

  it('gives the context asked for, with the senders profiles, and the rooms state', async () => {
    const response = await search(alice, {
      search_term: 'crème',
      event_context: { before_limit: 2, after_limit: 1, include_profile: true },
      include_state: true,
    });
    expect(response.status).toBe(200);
    const [result] = response.body.search_categories.room_events.results;
    expect(result.context.events_before.map((e: any) => e.content.body)).toEqual(['martians martians everywhere', 'welcome bob, we talk about martians and men here']);
    expect(result.context.events_after).toEqual([]);
    expect(result.context.profile_info[alice.userId]).toEqual({ displayname: 'Alice' });
    expect(result.context.profile_info[bob.userId]).toBeDefined();
    expect(typeof result.context.start).toBe('string');
    // The context tokens are ordinary /messages tokens.
    const more = await api(server, 'GET', `${V3}/rooms/${enc(joinedOnly)}/messages?dir=b&limit=1&from=${enc(result.context.start)}`, { token: alice.accessToken });
    expect(more.status).toBe(200);
    const state = response.body.search_categories.room_events.state[joinedOnly];
    expect(state.some((e: any) => e.type === 'm.room.create')).toBe(true);
  });

  it('takes a redacted message out of the index', async () => {
    const eventId = await say(alice, other, 'an ephemeral zeppelin');
    expect(bodies(await search(alice, { search_term: 'zeppelin' }))).toEqual(['an ephemeral zeppelin']);
    const redacted = await api(server, 'PUT', `${V3}/rooms/${enc(other)}/redact/${enc(eventId)}/r1`, { token: alice.accessToken, body: {} });
    expect(redacted.status).toBe(200);
    expect(bodies(await search(alice, { search_term: 'zeppelin' }))).toEqual([]);
  });

  it('answers a term with nothing to search for, and a category it was not asked for, with nothing', async () => {
    const empty = await search(alice, { search_term: '!!! ???' });
    expect(empty.status).toBe(200);
    expect(empty.body.search_categories.room_events).toEqual({ count: 0, highlights: [], results: [] });
    const none = await api(server, 'POST', `${V3}/search`, { token: alice.accessToken, body: { search_categories: {} } });
    expect(none.body).toEqual({ search_categories: {} });
  });

  it('refuses bad input with the Matrix error shape', async () => {
    const post = (body: unknown, query = '') => api(server, 'POST', `${V3}/search${query}`, { token: alice.accessToken, body, unchecked: true });
    const sideways = await post({ search_categories: { room_events: { search_term: 'x', order_by: 'sideways' } } });
    expect(sideways.status).toBe(400);
    expect(sideways.body.errcode).toBe('M_BAD_JSON');
    const noTerm = await post({ search_categories: { room_events: { order_by: 'rank' } } });
    expect(noTerm.status).toBe(400);
    expect(noTerm.body.errcode).toBe('M_BAD_JSON');
    expect((await post({})).status).toBe(400);
    expect((await post({ search_categories: { room_events: { search_term: 'x', keys: ['content.sender'] } } })).status).toBe(400);
    const badToken = await post({ search_categories: { room_events: { search_term: 'x', order_by: 'recent' } } }, '?next_batch=k1.5_3');
    expect(badToken.status).toBe(400);
    expect(badToken.body.errcode).toBe('M_INVALID_PARAM');
    const anonymous = await api(server, 'POST', `${V3}/search`, { body: { search_categories: { room_events: { search_term: 'x' } } }, unchecked: true });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.errcode).toBe('M_MISSING_TOKEN');
  });
});

describe('POST /search over events from another server', () => {
  it('finds what a user of another server said, and loses it when they redact it', async () => {
    const network = await federatedServers(2);
    try {
      const [a, b] = network.servers as [(typeof network.servers)[0], (typeof network.servers)[0]];
      const [carol, dave] = [await a.register('carol'), await b.register('dave')];
      const roomId = await sharedRoom(a, carol, [[b, dave]]);
      const sent = await b.api('PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/far1`, { token: dave.accessToken, body: { msgtype: 'm.text', body: 'greetings from afar about zeppelins' } });
      expect(sent.status).toBe(200);
      const eventId = sent.body.event_id as string;
      const arrived = (body: any) => (body.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.event_id === eventId);
      const synced = await syncUntil(a, carol, arrived);
      const searchA = () => a.api('POST', `${V3}/search`, { token: carol.accessToken, body: { search_categories: { room_events: { search_term: 'zeppelins' } } } });
      const found = await searchA();
      expect(found.status).toBe(200);
      expect(found.body.search_categories.room_events.results.map((r: any) => r.result.event_id)).toEqual([eventId]);

      expect((await b.api('PUT', `${V3}/rooms/${enc(roomId)}/redact/${enc(eventId)}/far2`, { token: dave.accessToken, body: {} })).status).toBe(200);
      await syncUntil(a, carol, (body) => (body.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.type === 'm.room.redaction'), synced.next_batch);
      expect((await searchA()).body.search_categories.room_events.results).toEqual([]);
    } finally {
      await network.close();
    }
  });
});
