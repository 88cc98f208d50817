import { beforeEach, describe, expect, it } from 'vitest';
import { backfillFrom, joinFromAfar, roomServer, wire, type RoomServer } from '../../test/support/federated-rooms.ts';
import { stateKey } from '../events/event.ts';
import type { Database } from '../storage/database.ts';
import { creationEvents } from './create-room.ts';
import type { Rooms, StoredEvent } from './rooms.ts';
import { positionAfter, positionBefore, TIMELINE_END, TIMELINE_START, type TopologicalPosition } from './timeline.ts';

let remote: Rooms;
let local: RoomServer & { db: Database };
let alice: string;
let bob: string;
let roomId: string;
/** The room's history on the remote server before bob joined, oldest first. */
let history: StoredEvent[];
let join: StoredEvent;

const message = async (rooms: Rooms, sender: string, body: string) =>
  (await rooms.sendEvents(roomId, [{ type: 'm.room.message', sender, content: { msgtype: 'm.text', body } }]))[0]!;

async function collect(generator: AsyncGenerator<StoredEvent>): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for await (const stored of generator) out.push(stored);
  return out;
}
const ids = (events: StoredEvent[]) => events.map((e) => e.event.event_id);
const oldestFirst = (rooms: Rooms, from: TopologicalPosition = TIMELINE_START) => collect(rooms.timeline.paginate(roomId, from, 'f', TIMELINE_END, 3));

beforeEach(async () => {
  remote = (await roomServer()).rooms;
  local = await roomServer();
  alice = `@alice:${remote.serverName}`;
  bob = `@bob:${local.rooms.serverName}`;
  roomId = `!room:${remote.serverName}`;
  history = await remote.createRoom(roomId, '10', creationEvents({ creator: alice, creatorProfile: {}, preset: 'public_chat' }));
  for (let i = 0; i < 8; i++) history.push(await message(remote, alice, `m${i}`));
  join = await joinFromAfar(remote, local, roomId, bob);
});

describe('room timeline: topological order', () => {
  it('places backfilled history by the DAG, before the live events, whatever order it arrives in', async () => {
    const after = await local.rooms.receiveEvent(wire(await message(remote, alice, 'after the join')));
    expect(await local.rooms.timeline.missingPrevEvents(join)).toEqual([history.at(-1)!.event.event_id]);

    const backfiller = backfillFrom(remote, local.rooms);
    expect(await backfiller.backfill(roomId, [history.at(-1)!.event.event_id], 4)).toBe(4);
    expect(await backfiller.backfill(roomId, [history.at(-5)!.event.event_id], 100)).toBe(history.length - 4);

    expect(ids(await oldestFirst(local.rooms))).toEqual(ids([...history, join, after]));
    expect(ids(await oldestFirst(local.rooms))).toEqual(ids(await oldestFirst(remote)));
    const backwards = await collect(local.rooms.timeline.paginate(roomId, TIMELINE_END, 'b', TIMELINE_START, 4));
    expect(ids(backwards)).toEqual(ids([...history, join, after]).reverse());
    // Backfilled history sits below every live stream position; the outliers it promoted too.
    expect((await local.rooms.getEvent(history[0]!.event.event_id))!.streamOrdering).toBeLessThan(0);
    expect((await local.rooms.getEvent(history.at(-1)!.event.event_id))!.streamOrdering).toBe(-1);
    expect(join.streamOrdering).toBeGreaterThan(0);
    expect(await local.rooms.timeline.missingPrevEvents((await local.rooms.getEvent(history[0]!.event.event_id))!)).toEqual([]);
  });

  it('orders a branch that arrives late by depth, then arrival', async () => {
    // bob and alice talk at once: their branches fork from bob's join.
    const fromBob = [await message(local.rooms, bob, 'b1'), await message(local.rooms, bob, 'b2'), await message(local.rooms, bob, 'b3')];
    const a1 = await message(remote, alice, 'a1');
    const received = await local.rooms.receiveEvent(wire(a1));
    expect(received.streamOrdering).toBeGreaterThan(fromBob[2]!.streamOrdering!);
    expect(ids(await oldestFirst(local.rooms, positionAfter(join)))).toEqual(ids([fromBob[0]!, received, fromBob[1]!, fromBob[2]!]));
    // Forward and back agree, from any position between events.
    const back = await collect(local.rooms.timeline.paginate(roomId, positionBefore(fromBob[1]!), 'b', positionAfter(join), 1));
    expect(ids(back)).toEqual(ids([received, fromBob[0]!]));
  });

  it('paginates on the (room, depth, stream ordering) index', async () => {
    const plan = await local.db.all<{ detail: string }>(
      `EXPLAIN QUERY PLAN SELECT event_nid FROM events WHERE room_id = ? AND stream_ordering IS NOT NULL
       AND (depth, stream_ordering) <= (?, ?) AND (depth, stream_ordering) > (?, ?) ORDER BY depth DESC, stream_ordering DESC LIMIT 10`,
      [roomId, 5, 5, -1, 0],
    );
    expect(plan.map((p) => p.detail).join('\n')).toMatch(/USING (COVERING )?INDEX events_by_room_topology \(room_id=\? AND \(depth,stream_ordering\)>/);
  });
});

describe('room timeline: stream reads for /sync', () => {
  beforeEach(async () => {
    await backfillFrom(remote, local.rooms).backfill(roomId, [history.at(-1)!.event.event_id], 100);
  });

  it('reads live events only, newest first, in pages', async () => {
    const later = [await message(local.rooms, bob, 'one'), await message(local.rooms, bob, 'two')];
    const everything = await collect(local.rooms.timeline.streamRange(roomId, -1_000, Number.MAX_SAFE_INTEGER, 1));
    expect(ids(everything)).toEqual(ids([join, ...later]).reverse());
    expect(ids(await collect(local.rooms.timeline.streamRange(roomId, join.streamOrdering!, later[0]!.streamOrdering!, 5)))).toEqual(ids([later[0]!]));
    expect(await local.rooms.timeline.roomsWithEvents(0, join.streamOrdering! - 1)).toEqual([]);
    expect(await local.rooms.timeline.roomsWithEvents(0, join.streamOrdering!)).toEqual([roomId]);
  });

  it('maps a stream position to the latest live event at or before it, or to just before the first', async () => {
    const one = await message(local.rooms, bob, 'one');
    expect(await local.rooms.timeline.positionAtStream(roomId, one.streamOrdering! + 5)).toEqual(positionAfter(one));
    expect(await local.rooms.timeline.positionAtStream(roomId, join.streamOrdering!)).toEqual(positionAfter(join));
    // Before bob's join there is only backfilled history: the position lies just before the join.
    const beforeJoin = await local.rooms.timeline.positionAtStream(roomId, join.streamOrdering! - 1);
    expect(beforeJoin).toEqual(positionBefore(join));
    const [previous] = await collect(local.rooms.timeline.paginate(roomId, beforeJoin, 'b', TIMELINE_START, 1));
    expect(previous!.event.event_id).toBe(history.at(-1)!.event.event_id);
  });

  it('gives the state at a stream position and at a topological one, and counts unread messages', async () => {
    const name = (await remote.sendEvents(roomId, [{ type: 'm.room.name', sender: alice, state_key: '', content: { name: 'Later' } }]))[0]!;
    await local.rooms.receiveEvent(wire(name));
    const nameKey = stateKey('m.room.name', '');
    const memberKey = stateKey('m.room.member', bob);
    expect((await local.rooms.timeline.stateAtStream(roomId, join.streamOrdering!)).has(memberKey)).toBe(true);
    expect((await local.rooms.timeline.stateAtStream(roomId, join.streamOrdering!)).has(nameKey)).toBe(false);
    expect((await local.rooms.timeline.stateAtStream(roomId, Number.MAX_SAFE_INTEGER)).has(nameKey)).toBe(true);
    expect((await local.rooms.timeline.stateAtStream(roomId, 0)).size).toBe(0);
    const beforeJoin = await local.rooms.timeline.stateAtPosition(roomId, positionBefore(join));
    expect(beforeJoin.has(stateKey('m.room.create', '')) && !beforeJoin.has(memberKey)).toBe(true);

    // Backfilled messages are history, not news: the live stream (what /sync and unread counts read) has none of them.
    const liveMessages = async () => {
      const bodies: unknown[] = [];
      for await (const stored of local.rooms.timeline.streamRange(roomId, 0, Number.MAX_SAFE_INTEGER, 50)) if (stored.event.type === 'm.room.message') bodies.push(stored.event.content['body']);
      return bodies;
    };
    expect(await liveMessages()).toEqual([]);
    await local.rooms.receiveEvent(wire(await message(remote, alice, 'hello')));
    expect(await liveMessages()).toEqual(['hello']);
  });
});

describe('room timeline: latest event of some types', () => {
  it("gives each room's latest live event of the types up to its bound, and leaves out rooms with none", async () => {
    const last = history.at(-1)!;
    const [topic] = await remote.sendEvents(roomId, [{ type: 'm.room.topic', sender: alice, state_key: '', content: { topic: 'not a bump' } }]);
    const stamps = await remote.timeline.latestOfTypes([{ roomId, upTo: topic!.streamOrdering! }, { roomId: '!none:x', upTo: 1000 }], ['m.room.message', 'm.room.create']);
    expect(stamps).toEqual(new Map([[roomId, last.streamOrdering!]]));
    // Bounded: up to the first message, that message; with create alone, the create event.
    const first = history.find((e) => e.event.type === 'm.room.message')!;
    expect((await remote.timeline.latestOfTypes([{ roomId, upTo: first.streamOrdering! }], ['m.room.message', 'm.room.create'])).get(roomId)).toBe(first.streamOrdering);
    expect((await remote.timeline.latestOfTypes([{ roomId, upTo: last.streamOrdering! }], ['m.room.create'])).get(roomId)).toBe(history[0]!.streamOrdering);
    expect(await remote.timeline.latestOfTypes([], ['m.room.create'])).toEqual(new Map());
  });
});
