// /messages and /context over a room joined from afar whose history is backfilled
// afterwards: history takes its place by the DAG, across pages, whatever order it
// arrived in. The backfiller takes the history from the room's other server, a real
// room engine, as federation's /backfill would.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultEd25519Backend } from '../../src/crypto/ed25519.ts';
import type { Homeserver } from '../../src/homeserver.ts';
import { creationEvents } from '../../src/rooms/create-room.ts';
import type { Rooms, StoredEvent } from '../../src/rooms/rooms.ts';
import type { Backfiller } from '../../src/sync/history.ts';
import { backfillFrom, joinFromAfar, roomServer, wire } from '../support/federated-rooms.ts';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

let homeserver: Homeserver;
let http: TestServer;
let remote: Rooms;
let backfiller: ReturnType<typeof backfillFrom>;
/** What the homeserver's history asks; the other server's engine, once the homeserver (whose engine it fills) exists. */
let answering: Backfiller;
let bob: Account;

beforeAll(async () => {
  const seed = crypto.getRandomValues(new Uint8Array(32));
  http = await startTestServer({ seed, backfiller: { backfill: (roomId, fromEventIds, limit) => answering.backfill(roomId, fromEventIds, limit) } });
  homeserver = http.homeserver;
  const local = { rooms: homeserver.services.rooms, signingKey: await (await defaultEd25519Backend()).keyFromSeed(seed) };
  remote = (await roomServer()).rooms;
  answering = backfiller = backfillFrom(remote, local.rooms);
  bob = await register(http, 'bob');
  joinRoom = (roomId) => joinFromAfar(remote, local, roomId, bob.userId);
});
afterAll(() => http.close());

let joinRoom: (roomId: string) => Promise<StoredEvent>;
let roomId: string;
/** The room's history on the other server before bob joined, oldest first. */
let history: StoredEvent[];
let join: StoredEvent;
/** What came after the join, received live. */
let live: StoredEvent[];

const enc = encodeURIComponent;
const bodyOf = (e: any) => e.content.body ?? e.type;
const messages = (query: string) => api(http, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?${query}`, { token: bob.accessToken });
const sync = (query = '') => api(http, 'GET', `/_matrix/client/v3/sync${query}`, { token: bob.accessToken });
const send = async (body: string) => (await remote.sendEvents(roomId, [{ type: 'm.room.message', sender: alice(), content: { msgtype: 'm.text', body } }]))[0]!;
const alice = () => `@alice:${remote.serverName}`;

/** Pages back through /messages until `end` is omitted, returning each page. */
async function pagesBack(from: string, limit: number): Promise<any[]> {
  const pages: any[] = [];
  let token: string | undefined = from;
  while (token !== undefined) {
    const page: any = (await messages(`dir=b&limit=${limit}&from=${enc(token)}`)).body;
    pages.push(page);
    token = page.end;
    if (pages.length > 50) throw new Error('pagination does not end');
  }
  return pages;
}

beforeEach(async () => {
  roomId = `!history${Math.random().toString(36).slice(2)}:${remote.serverName}`;
  history = await remote.createRoom(roomId, '10', creationEvents({ creator: alice(), creatorProfile: {}, preset: 'public_chat' }));
  for (let i = 0; i < 20; i++) history.push(await send(`m${i}`));
  join = await joinRoom(roomId);
  live = [];
  for (const body of ['live 0', 'live 1']) live.push(await homeserver.services.rooms.receiveEvent(wire(await send(body))));
  backfiller.calls.length = 0;
});

describe('/messages and /context after a backfill', () => {
  it('pages back from /sync into backfilled history, oldest to newest by the DAG, and /sync never shows it', async () => {
    const initial = (await sync()).body;
    const timeline = initial.rooms.join[roomId].timeline;
    expect(timeline.events.map(bodyOf)).toEqual(['m.room.member', 'live 0', 'live 1']);
    expect(initial.rooms.join[roomId].unread_notifications.notification_count).toBe(2);

    const pages = await pagesBack(timeline.prev_batch, 5);
    const events = pages.flatMap((p) => p.chunk).reverse();
    expect(events.map((e: any) => e.event_id)).toEqual(history.map((e) => e.event.event_id));
    // Every page with events has `end` (the one reaching m.room.create too, as Synapse answers); the empty one after it has none.
    expect(pages.slice(0, -2).every((p) => p.chunk.length === 5 && p.end !== undefined)).toBe(true);
    expect(pages.at(-2).end).toBeDefined();
    expect(pages.at(-1).chunk).toEqual([]);
    expect(pages.at(-1).end).toBeUndefined();
    // Each backfill started at the oldest event reached: first the join's missing prev event.
    expect(backfiller.calls[0]).toEqual({ fromEventIds: [history.at(-1)!.event.event_id], limit: 5 });
    expect(backfiller.calls.length).toBeGreaterThanOrEqual(Math.ceil(history.length / 5) - 1);

    // Backfilled history is no news to /sync, and once held it is read locally.
    const incremental = (await sync(`?since=${initial.next_batch}&timeout=0`)).body;
    expect(incremental.rooms.join[roomId]).toBeUndefined();
    const calls = backfiller.calls.length;
    const again = (await messages('dir=b&limit=100')).body;
    expect(again.chunk.map((e: any) => e.event_id).reverse()).toEqual([...history, join, ...live].map((e) => e.event.event_id));
    const past = (await messages(`dir=b&limit=100&from=${enc(again.end)}`)).body;
    expect(past.chunk).toEqual([]);
    expect(past.end).toBeUndefined();
    expect(backfiller.calls.length).toBe(calls);
    expect((await sync()).body.rooms.join[roomId].unread_notifications.notification_count).toBe(2);
  });

  it('gives /context in the same order, with tokens that page on both ways', async () => {
    await messages('dir=b&limit=100');
    const target = history.at(-10)!;
    const context = (await api(http, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/context/${enc(target.event.event_id)}?limit=4`, { token: bob.accessToken })).body;
    expect(bodyOf(context.event)).toBe('m10');
    expect(context.events_before.map(bodyOf)).toEqual(['m9', 'm8']);
    expect(context.events_after.map(bodyOf)).toEqual(['m11', 'm12']);
    expect((await messages(`dir=b&limit=2&from=${enc(context.start)}`)).body.chunk.map(bodyOf)).toEqual(['m7', 'm6']);
    expect((await messages(`dir=f&limit=2&from=${enc(context.end)}`)).body.chunk.map(bodyOf)).toEqual(['m13', 'm14']);
  });

  it('accepts /sync tokens as from and to, and pages forward from a topological token', async () => {
    const { next_batch: nextBatch } = (await sync()).body;
    const newest = (await messages(`dir=b&limit=3&from=${nextBatch}`)).body;
    expect(newest.start).toBe(nextBatch);
    expect(newest.chunk.map(bodyOf)).toEqual(['live 1', 'live 0', 'm.room.member']);
    // Going back past the join reaches into history the other server holds.
    const older = (await messages(`dir=b&limit=3&from=${enc(newest.end)}`)).body;
    expect(older.chunk.map(bodyOf)).toEqual(['m19', 'm18', 'm17']);
    const forward = (await messages(`dir=f&limit=4&from=${enc(older.end)}`)).body;
    expect(forward.chunk.map(bodyOf)).toEqual(['m17', 'm18', 'm19', 'm.room.member']);
    // `to` as a /sync token: up to the join, which was the newest event at that stream position.
    const upToJoin = (await messages(`dir=f&from=${enc(older.end)}&to=s${join.streamOrdering}_0`)).body;
    expect(upToJoin.chunk.map(bodyOf)).toEqual(['m17', 'm18', 'm19', 'm.room.member']);
  });

  it('omits `end` exactly when a page is empty and nothing more can come in that direction', async () => {
    await messages('dir=b&limit=100');
    // Forward: a page that takes the last event has no `end`; one short of it has.
    const lastPage = (await messages(`dir=b&limit=1&from=s${live[1]!.streamOrdering}_0`)).body;
    expect(lastPage.end).toBeDefined();
    const toTheEnd = (await messages(`dir=f&limit=2&from=${enc(lastPage.end)}`)).body;
    expect(toTheEnd.chunk.map(bodyOf)).toEqual(['live 1']);
    expect(toTheEnd.end).toBeDefined();
    expect((await messages(`dir=f&limit=2&from=${enc(toTheEnd.end)}`)).body.end).toBeUndefined();
    const start = (await messages('dir=f&limit=3')).body;
    expect(start.chunk.map(bodyOf)).toEqual(['m.room.create', 'm.room.member', 'm.room.power_levels']);
    expect(start.end).toBeDefined();
    // Back: a page that ends exactly at m.room.create has `end`; the page after it is empty and has none.
    const exact = (await messages(`dir=b&limit=3&from=${enc(start.end)}`)).body;
    expect(exact.chunk.map(bodyOf)).toEqual(['m.room.power_levels', 'm.room.member', 'm.room.create']);
    expect(exact.end).toBeDefined();
    const beforeCreate = (await messages(`dir=b&limit=3&from=${enc(exact.end)}`)).body;
    expect(beforeCreate.chunk).toEqual([]);
    expect(beforeCreate.end).toBeUndefined();
  });

  it('keeps `end` where local history stops at a gap only while a backfill is possible', async () => {
    const fromJoin = `dir=b&limit=3&from=s${join.streamOrdering}_0`;
    // A backfill that finds nothing (no server holds more) ends the timeline, rather than sending the client round in circles.
    answering = { backfill: async () => 0 };
    try {
      const page = (await messages(fromJoin)).body;
      expect(page.chunk.map(bodyOf)).toEqual(['m.room.member']);
      // The page has events, so `end`; past it there is nothing to read or fetch.
      const past = (await messages(`dir=b&limit=3&from=${enc(page.end)}`)).body;
      expect(past.chunk).toEqual([]);
      expect(past.end).toBeUndefined();
    } finally {
      answering = backfiller;
    }
    const page = (await messages(fromJoin)).body;
    expect(page.chunk.map(bodyOf)).toEqual(['m.room.member', 'm19', 'm18']);
    expect(page.end).toBeDefined();
  });
});
