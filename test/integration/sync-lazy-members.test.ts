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
