// /sync as Element uses it: the room summary (heroes and member counts kept right as members
// come and go), lazy-loaded members (only the timeline's senders, no redundant ones across
// incremental syncs unless asked), and a gapped incremental sync carrying every state change
// in its gap. Raw HTTP, checked against the spec.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

let server: TestServer;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;
let run = 0;
const newUser = (name: string) => register(server, `${name}${++run}`);

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

let txn = 0;
const say = (account: Account, roomId: string, body: string) =>
  api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/t${++txn}`, { token: account.accessToken, body: { msgtype: 'm.text', body } });
const join = (account: Account, roomId: string) => api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: account.accessToken, body: {} });
const leave = (account: Account, roomId: string) => api(server, 'POST', `${V3}/rooms/${enc(roomId)}/leave`, { token: account.accessToken, body: {} });
const sync = async (account: Account, filter: object, since?: string) =>
  (await api(server, 'GET', `${V3}/sync?timeout=0&filter=${enc(JSON.stringify(filter))}${since ? `&since=${since}` : ''}`, { token: account.accessToken })).body;
const membersIn = (room: any) => [...(room?.state?.events ?? []), ...(room?.timeline?.events ?? [])].filter((e: any) => e.type === 'm.room.member').map((e: any) => e.state_key).sort();
const LAZY = { room: { state: { lazy_load_members: true }, timeline: { limit: 3 } } };

describe('room summary', () => {
  it('counts members and names heroes, and keeps them right as members come and go', async () => {
    const [owner, a, b] = [await newUser('owner'), await newUser('ann'), await newUser('ben')];
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: owner.accessToken, body: { preset: 'public_chat', invite: [a.userId] } })).body.room_id;
    const first = await sync(owner, {});
    expect(first.rooms.join[roomId].summary).toEqual({ 'm.joined_member_count': 1, 'm.invited_member_count': 1, 'm.heroes': [a.userId] });
    await join(a, roomId);
    await join(b, roomId);
    const second = await sync(owner, {}, first.next_batch);
    expect(second.rooms.join[roomId].summary).toMatchObject({ 'm.joined_member_count': 3, 'm.invited_member_count': 0 });
    expect([...second.rooms.join[roomId].summary['m.heroes']].sort()).toEqual([a.userId, b.userId].sort());
    await leave(b, roomId);
    const third = await sync(owner, {}, second.next_batch);
    expect(third.rooms.join[roomId].summary).toMatchObject({ 'm.joined_member_count': 2 });
  });
});

describe('lazy-loaded members', () => {
  it("sends only the timeline's senders (and the user), then no redundant ones, unless include_redundant_members", async () => {
    const [owner, ...others] = [await newUser('lazyowner'), await newUser('la'), await newUser('lb'), await newUser('lc'), await newUser('ld')];
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: owner.accessToken, body: { preset: 'public_chat' } })).body.room_id;
    for (const other of others) await join(other, roomId);
    for (let i = 0; i < 3; i++) await say(owner, roomId, `owner ${i}`);
    await say(others[0]!, roomId, 'from la');

    const initial = await sync(owner, LAZY);
    // The timeline (3 events): two of owner's and la's; not lb, lc, ld.
    expect(membersIn(initial.rooms.join[roomId])).toEqual([owner.userId, others[0]!.userId].sort());

    await say(others[0]!, roomId, 'la again');
    const again = await sync(owner, LAZY, initial.next_batch);
    expect(membersIn(again.rooms.join[roomId])).toEqual([]);
    const redundant = await sync(owner, { room: { state: { lazy_load_members: true, include_redundant_members: true }, timeline: { limit: 3 } } }, initial.next_batch);
    expect(membersIn(redundant.rooms.join[roomId])).toContain(others[0]!.userId);

    // A member from the gap who now speaks is sent.
    await say(others[3]!, roomId, 'ld speaks');
    const speaker = await sync(owner, LAZY, again.next_batch);
    expect(membersIn(speaker.rooms.join[roomId])).toEqual([others[3]!.userId]);
  });
});

describe('gapped incremental sync', () => {
  it('carries every state change in the gap, old leaves too', async () => {
    const [owner, leaver, topicSetter] = [await newUser('gapowner'), await newUser('leaver'), await newUser('topic')];
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: owner.accessToken, body: { preset: 'public_chat' } })).body.room_id;
    await join(leaver, roomId);
    await join(topicSetter, roomId);
    const before = await sync(owner, { room: { timeline: { limit: 2 } } });
    await leave(leaver, roomId);
    await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/state/m.room.topic/`, { token: owner.accessToken, body: { topic: 'changed in the gap' } });
    for (let i = 0; i < 5; i++) await say(owner, roomId, `filler ${i}`);
    const gapped = (await sync(owner, { room: { timeline: { limit: 2 } } }, before.next_batch)).rooms.join[roomId];
    expect(gapped.timeline.limited).toBe(true);
    const state = gapped.state.events.map((e: any) => `${e.type}|${e.state_key}|${e.content.membership ?? e.content.topic ?? ''}`);
    expect(state).toContain(`m.room.member|${leaver.userId}|leave`);
    expect(state).toContain('m.room.topic||changed in the gap');
  });
});

// The conformance suites' gapped syncs (issue 41), with filters that keep the state section to one made-up type.
describe('gapped incremental sync, filtered', () => {
  const FILTER = {
    room: { timeline: { types: ['a.made.up.filler.type'], limit: 1 }, state: { types: ['a.madeup.test.state'] }, ephemeral: { types: [] } },
    presence: { types: [] },
  };
  const putState = async (account: Account, roomId: string, key: string, myKey: number) =>
    expect((await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/state/a.madeup.test.state/${enc(key)}`, { token: account.accessToken, body: { my_key: myKey } })).status).toBe(200);
  let filler = 0;
  const fill = async (account: Account, roomId: string, count: number) => {
    for (let i = 0; i < count; i++) expect((await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/a.made.up.filler.type/g${++filler}`, { token: account.accessToken, body: { filler: i } })).status).toBe(200);
  };
  const stateOf = (room: any) => room.state.events.map((e: any) => [e.type, e.state_key, e.content.my_key]);

  it('carries the state changed in the gap, and only that', async () => {
    const user = await newUser('gapper');
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: user.accessToken, body: {} })).body.room_id as string;
    await putState(user, roomId, 'this_state_changes', 1);
    await putState(user, roomId, 'this_state_does_not_change', 1);
    const initial = await sync(user, FILTER);
    expect(initial.rooms.join[roomId].state.events).toHaveLength(2);
    await putState(user, roomId, 'this_state_changes', 2);
    await fill(user, roomId, 20);
    const room = (await sync(user, FILTER, initial.next_batch)).rooms.join[roomId];
    expect(room.timeline.limited).toBe(true);
    expect(stateOf(room)).toEqual([['a.madeup.test.state', 'this_state_changes', 2]]);
  });

  it('carries the state of a room joined in the gap', async () => {
    const [owner, joiner] = [await newUser('gapowner'), await newUser('gapjoiner')];
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: owner.accessToken, body: { invite: [joiner.userId] } })).body.room_id as string;
    await putState(owner, roomId, '', 1);
    const before = await sync(joiner, FILTER);
    expect((await join(joiner, roomId)).status).toBe(200);
    await fill(owner, roomId, 20);
    const room = (await sync(joiner, FILTER, before.next_batch)).rooms.join[roomId];
    expect(stateOf(room)).toEqual([['a.madeup.test.state', '', 1]]);
  });

  it('carries the whole state of a room joined and left in one gap, under leave', async () => {
    const [owner, visitor] = [await newUser('leaveowner'), await newUser('visitor')];
    const filter = { room: { timeline: { types: [] }, state: { types: ['a.madeup.test.state'] }, ephemeral: { types: [] }, include_leave: true }, presence: { types: [] } };
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: owner.accessToken, body: { invite: [visitor.userId] } })).body.room_id as string;
    await putState(owner, roomId, '', 1);
    const before = await sync(visitor, filter);
    expect((await join(visitor, roomId)).status).toBe(200);
    expect((await leave(visitor, roomId)).status).toBe(200);
    const room = (await sync(visitor, filter, before.next_batch)).rooms.leave[roomId];
    expect(stateOf(room)).toEqual([['a.madeup.test.state', '', 1]]);
  });
});

// Lazy-loaded members in incremental and gapped syncs as Synapse sends them, which clients (and the conformance
// suites) are written against (issue 41): an incremental sync carries the members of the timeline's senders only, the
// user's own not again; a gapped one carries every state change of the gap, members too, as if not lazily loaded.
describe('lazy-loaded members in incremental and gapped syncs', () => {
  const LAZY10 = { room: { state: { lazy_load_members: true }, timeline: { limit: 10 } } };
  const REDUNDANT10 = { room: { state: { lazy_load_members: true, include_redundant_members: true }, timeline: { limit: 10 } } };
  let filler = 0;
  const fill = async (account: Account, roomId: string, count: number) => {
    for (let i = 0; i < count; i++) {
      const r = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/a.made.up.filler.type/f${++filler}`, { token: account.accessToken, body: { filler: i } });
      expect(r.status).toBe(200);
    }
  };
  /** The member events of a room's `state` section (not its timeline), as user → membership. */
  const stateMembers = (room: any): Record<string, string> =>
    Object.fromEntries((room?.state?.events ?? []).filter((e: any) => e.type === 'm.room.member').map((e: any) => [e.state_key, e.content.membership]));
  const joined = (...accounts: Account[]) => Object.fromEntries(accounts.map((a) => [a.userId, 'join']));
  /** alice's named public room with bob and charlie in it. */
  const room = async () => {
    const [alice, bob, charlie, dave] = [await newUser('alice'), await newUser('bob'), await newUser('charlie'), await newUser('dave')];
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: { preset: 'public_chat', name: 'A room name' } })).body.room_id as string;
    expect((await join(bob, roomId)).status).toBe(200);
    expect((await join(charlie, roomId)).status).toBe(200);
    return { alice, bob, charlie, dave, roomId };
  };

  it('an incremental sync carries only the members of the senders in its timeline, then nothing', async () => {
    const { alice, bob, charlie, roomId } = await room();
    await fill(bob, roomId, 10);
    const initial = await sync(alice, LAZY10);
    const types = initial.rooms.join[roomId].state.events.map((e: any) => `${e.type}|${e.state_key}`).sort();
    expect(types).toEqual(['m.room.create|', 'm.room.history_visibility|', 'm.room.join_rules|', `m.room.member|${alice.userId}`, `m.room.member|${bob.userId}`, 'm.room.name|', 'm.room.power_levels|'].sort());
    await say(charlie, roomId, 'Message from charlie');
    const next = await sync(alice, LAZY10, initial.next_batch);
    expect(next.rooms.join[roomId].state.events.map((e: any) => `${e.type}|${e.state_key}`)).toEqual([`m.room.member|${charlie.userId}`]);
    expect((await sync(alice, LAZY10, next.next_batch)).rooms.join[roomId]).toBeUndefined();
  });

  it('sends members already sent again only with include_redundant_members, and the user’s own not even then', async () => {
    for (const [filter, expected] of [[LAZY10, false], [REDUNDANT10, true]] as const) {
      const { alice, bob, charlie, roomId } = await room();
      await fill(bob, roomId, 10);
      await fill(charlie, roomId, 5);
      const initial = await sync(alice, filter);
      expect(stateMembers(initial.rooms.join[roomId])).toEqual(joined(alice, bob, charlie));
      await say(bob, roomId, 'New message from bob');
      await say(charlie, roomId, 'New message from charlie');
      const next = (await sync(alice, filter, initial.next_batch)).rooms.join[roomId];
      expect(stateMembers(next)).toEqual(expected ? joined(bob, charlie) : {});
    }
  });

  it('a gapped sync carries the members who joined or left in the gap, and the senders', async () => {
    const { alice, bob, charlie, dave, roomId } = await room();
    await fill(bob, roomId, 10);
    const initial = await sync(alice, LAZY10);
    expect(stateMembers(initial.rooms.join[roomId])).toEqual(joined(alice, bob));
    expect((await join(dave, roomId)).status).toBe(200);
    await fill(charlie, roomId, 20);
    const second = await sync(alice, LAZY10, initial.next_batch);
    expect(second.rooms.join[roomId].timeline.limited).toBe(true);
    // dave has said nothing: he is there because he joined in the gap.
    expect(stateMembers(second.rooms.join[roomId])).toEqual(joined(charlie, dave));
    expect((await leave(dave, roomId)).status).toBe(200);
    await fill(charlie, roomId, 20);
    const third = await sync(alice, LAZY10, second.next_batch);
    expect(stateMembers(third.rooms.join[roomId])).toEqual({ [dave.userId]: 'leave' });
  });

  it('a gapped sync carries an old leave; an ungapped one has it in the timeline', async () => {
    for (const after of [10, 5]) {
      const { alice, bob, charlie, roomId } = await room();
      await say(charlie, roomId, 'Hello world');
      await fill(bob, roomId, 10);
      const initial = await sync(alice, LAZY10);
      expect(stateMembers(initial.rooms.join[roomId])).toEqual(joined(alice, bob));
      expect((await leave(charlie, roomId)).status).toBe(200);
      await fill(bob, roomId, after);
      const next = (await sync(alice, LAZY10, initial.next_batch)).rooms.join[roomId];
      if (after === 10) {
        expect(next.timeline.limited).toBe(true);
        expect(stateMembers(next)).toEqual({ [charlie.userId]: 'leave' });
      } else {
        expect(next.timeline.limited).toBe(false);
        expect(next.timeline.events[0]).toMatchObject({ type: 'm.room.member', state_key: charlie.userId, content: { membership: 'leave' } });
      }
    }
  });

  it('a gapped sync carries an old member who starts speaking', async () => {
    const { alice, bob, charlie, roomId } = await room();
    await fill(bob, roomId, 10);
    const initial = await sync(alice, LAZY10);
    expect(stateMembers(initial.rooms.join[roomId])).toEqual(joined(alice, bob));
    await fill(bob, roomId, 10);
    await fill(charlie, roomId, 10);
    expect(stateMembers((await sync(alice, LAZY10, initial.next_batch)).rooms.join[roomId])).toEqual(joined(charlie));
  });
});
