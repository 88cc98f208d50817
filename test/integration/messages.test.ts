// /messages as clients expect it: start and end, paging both ways, lazy-loaded
// members, and /sync tokens accepted as `from`. Raw HTTP, every request and
// response checked against the spec's OpenAPI.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bodies, clientCalls, enc, V3 } from '../support/client-calls.ts';
import { api, startTestServer, type TestServer } from './harness.ts';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 6).
describe('/messages', () => {
  const { newUser, createRoom, join, send, sync, messages, history } = clientCalls(() => server);
  it('always returns start, returns end while more may exist, and lazy-loads the senders’ members as they were', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await join(bob, roomId);
    await send(alice, roomId, 'a1');
    await api(server, 'PUT', `${V3}/profile/${enc(bob.userId)}/displayname`, { token: bob.accessToken, body: { displayname: 'Bob the first' } });
    await send(bob, roomId, 'b1');
    await api(server, 'PUT', `${V3}/profile/${enc(bob.userId)}/displayname`, { token: bob.accessToken, body: { displayname: 'Bob the second' } });
    await send(alice, roomId, 'a2');
    const all = await history(alice, roomId);
    expect(all[0].type).toBe('m.room.create');

    // Backwards two at a time to the room's creation: every page has start, all but the last have end.
    const seen: string[] = [];
    let from: string | undefined;
    for (;;) {
      const page = await messages(alice, roomId, { dir: 'b', limit: 2, ...(from ? { from } : {}) });
      expect(typeof page.start).toBe('string');
      if (from) expect(page.start).toBe(from);
      seen.push(...page.chunk.map((e: any) => e.event_id));
      if (!page.end) break;
      from = page.end;
    }
    expect(seen).toEqual(all.map((e) => e.event_id).reverse());
    // Forwards from the start, the same, in order.
    const forward: string[] = [];
    from = undefined;
    for (;;) {
      const page = await messages(alice, roomId, { dir: 'f', limit: 3, ...(from ? { from } : {}) });
      expect(typeof page.start).toBe('string');
      forward.push(...page.chunk.map((e: any) => e.event_id));
      if (!page.end) break;
      from = page.end;
    }
    expect(forward).toEqual(all.map((e) => e.event_id));
    // A page with nothing left has start and no end.
    const empty = await messages(alice, roomId, { dir: 'f', from: (await sync(alice)).next_batch });
    expect(empty.chunk).toEqual([]);
    expect(typeof empty.start).toBe('string');
    expect(empty.end).toBeUndefined();

    // lazy_load_members: the senders' member events, as they were when they sent.
    const b1At = all.findIndex((e) => e.content.body === 'b1');
    const page = await messages(alice, roomId, { dir: 'b', limit: 1, from: (await messages(alice, roomId, { dir: 'b', limit: all.length - b1At - 1 })).end, filter: { lazy_load_members: true } });
    expect(bodies(page.chunk)).toEqual(['b1']);
    expect(page.state.map((e: any) => [e.type, e.state_key, e.content.displayname])).toEqual([['m.room.member', bob.userId, 'Bob the first']]);
    const latest = await messages(alice, roomId, { dir: 'b', limit: 4, filter: { lazy_load_members: true, types: ['m.room.message'] } });
    expect(bodies(latest.chunk)).toEqual(['a2', 'b1', 'a1']);
    expect(Object.fromEntries(latest.state.map((e: any) => [e.state_key, e.content.displayname]))).toEqual({
      [alice.userId]: alice.userId.slice(1).split(':')[0],
      [bob.userId]: 'Bob the first',
    });
    // Without lazy loading, no member state.
    expect((await messages(alice, roomId, { dir: 'b', limit: 4 })).state ?? []).toEqual([]);
  });
});

// Issue 41: clients (and the conformance suites) read `end` from a page that reached the room's start.
describe('/messages at the ends of the room', () => {
  const { newUser, createRoom, send, messages } = clientCalls(() => server);
  it('answers `end` with every page that has events, as Synapse does, and leaves it out only of an empty one', async () => {
    const alice = await newUser('alice');
    const roomId = await createRoom(alice);
    await send(alice, roomId, 'only');
    // One page holds the whole room, m.room.create included: it still has `end`.
    const whole = await messages(alice, roomId, { dir: 'b', limit: 100 });
    expect(whole.chunk.at(-1).type).toBe('m.room.create');
    expect(typeof whole.end).toBe('string');
    // Paging on from there finds nothing, and says so by leaving `end` out.
    const past = await messages(alice, roomId, { dir: 'b', limit: 100, from: whole.end });
    expect(past.chunk).toEqual([]);
    expect(past.start).toBe(whole.end);
    expect(past.end).toBeUndefined();
    // Forward the same: the page that reaches the newest event has `end`, the next none.
    const forward = await messages(alice, roomId, { dir: 'f', limit: 100 });
    expect(bodies(forward.chunk)).toEqual(['only']);
    expect(typeof forward.end).toBe('string');
    const beyond = await messages(alice, roomId, { dir: 'f', limit: 100, from: forward.end });
    expect(beyond.chunk).toEqual([]);
    expect(beyond.end).toBeUndefined();
    await send(alice, roomId, 'later');
    expect(bodies((await messages(alice, roomId, { dir: 'f', from: forward.end })).chunk)).toEqual(['later']);
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 13).
describe('tokens', () => {
  const { newUser, createRoom, send, sync, messages } = clientCalls(() => server);
  it('a /sync next_batch is accepted as from in /messages, both ways', async () => {
    const alice = await newUser('alice');
    const roomId = await createRoom(alice);
    await send(alice, roomId, 'before');
    const token = (await sync(alice)).next_batch;
    await send(alice, roomId, 'after 1');
    await send(alice, roomId, 'after 2');
    const back = await messages(alice, roomId, { dir: 'b', limit: 1, from: token });
    expect(bodies(back.chunk)).toEqual(['before']);
    const forward = await messages(alice, roomId, { dir: 'f', limit: 10, from: token });
    expect(bodies(forward.chunk)).toEqual(['after 1', 'after 2']);
    const latest = await messages(alice, roomId, { dir: 'b', limit: 2, from: (await sync(alice)).next_batch });
    expect(bodies(latest.chunk)).toEqual(['after 2', 'after 1']);
  });
});
