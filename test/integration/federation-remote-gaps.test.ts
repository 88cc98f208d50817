import { beforeEach, describe, expect, it } from 'vitest';
import { hearthBesideScriptedRemote, type HttpsServer } from '../support/hearth-beside-scripted-remote.ts';
import type { RemoteRequest, ScriptedRemote } from '../support/scripted-remote.ts';
import { httpSyncer, longPollUntil } from '../support/sync-until.ts';
import { api, type Account } from './harness.ts';

// Gaps in the DAG (issue 35), against the scripted remote of test/support/scripted-remote.ts over
// real HTTPS, Hearth a DNS-named host in this process. An event pushed to Hearth whose prev events
// it lacks makes it ask /get_missing_events; an event so fetched whose own prev events are still
// missing gets the state after each of them from /state_ids at it (and that event itself), which
// Hearth resolves with what it holds. Each case scripts the remote's answers and checks what
// Hearth asked, what its clients see, and the room's state: gaps whose state is bogus, empty auth
// chains, events of other rooms fetched on the way, and back-pagination that must stay in its room.

const enc = encodeURIComponent;
const V3 = '/_matrix/client/v3';

const servers = hearthBesideScriptedRemote();
let hearth: HttpsServer;
let remote: ScriptedRemote;
let alice: Account;
let bob: string;
beforeEach(() => ({ hearth, remote, alice, bob } = servers));

/** A room alice made on Hearth, which the remote's users have joined. */
async function sharedRoom(...members: string[]): Promise<string> {
  const r = await api(hearth, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: { preset: 'public_chat' } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  for (const member of members.length > 0 ? members : [bob]) await remote.joinRoom(hearth.name, r.body.room_id, member);
  return r.body.room_id;
}

const remoteStateId = (roomId: string, type: string, stateKey = '') => remote.rooms.get(roomId)!.state.get(`${type}\u0000${stateKey}`)!;
const latest = (roomId: string) => remote.rooms.get(roomId)!.order.at(-1)!;

const syncer = (account: Account) => httpSyncer(hearth, account.accessToken, 5_000);
const syncToken = async (account: Account) => (await syncer(account)(undefined)).next_batch as string;

/** Every event of the room's timeline the account is shown from `since` until all of `eventIds` were. */
async function timelineUntil(account: Account, roomId: string, eventIds: string[], since: string): Promise<any[]> {
  const seen: any[] = [];
  await longPollUntil(syncer(account), (body) => {
    seen.push(...(body.rooms?.join?.[roomId]?.timeline?.events ?? []));
    return eventIds.every((id) => seen.some((e) => e.event_id === id));
  }, { since, who: account.userId });
  return seen;
}

async function roomState(roomId: string): Promise<any[]> {
  const r = await api(hearth, 'GET', `${V3}/rooms/${enc(roomId)}/state`, { token: alice.accessToken });
  expect(r.status).toBe(200);
  return r.body;
}

const isGetMissingEvents = (roomId: string) => (r: RemoteRequest) => r.method === 'POST' && r.path === `/_matrix/federation/v1/get_missing_events/${roomId}`;
const stateIdsAsked = (roomId: string) => remote.received.filter((r) => r.path === `/_matrix/federation/v1/state_ids/${roomId}`).map((r) => r.query.get('event_id'));
const STATE_IDS = /^\/_matrix\/federation\/v1\/state_ids\//;
const STATE = /^\/_matrix\/federation\/v1\/state\//;
const GET_MISSING_EVENTS = /^\/_matrix\/federation\/v1\/get_missing_events\//;

/** From now on, /state_ids and /state at `eventId` answer this state (its events' IDs) and auth chain. */
function answerStateAt(eventId: string, stateIds: string[], authChainIds: string[]): void {
  const matches = (r: RemoteRequest) => r.query.get('event_id') === eventId;
  const room = () => [...remote.rooms.values()].find((room) => room.events.has(eventId))!;
  remote.answerAlways('GET', STATE_IDS, (r) => (matches(r) ? { status: 200, body: { pdu_ids: stateIds, auth_chain_ids: authChainIds } } : { status: 404, body: { errcode: 'M_NOT_FOUND', error: 'not scripted' } }));
  remote.answerAlways('GET', STATE, (r) => (matches(r)
    ? { status: 200, body: { pdus: stateIds.map((id) => room().events.get(id)), auth_chain: authChainIds.map((id) => room().events.get(id)) } }
    : { status: 404, body: { errcode: 'M_NOT_FOUND', error: 'not scripted' } }));
}

describe('gaps in the DAG', () => {
  it('fetches missing prev events with /get_missing_events, then the state at the one still missing with /state_ids, and resolves it with its own', async () => {
    const roomId = await sharedRoom();
    // bob may change the state.
    const levels = (await api(hearth, 'GET', `${V3}/rooms/${enc(roomId)}/state/m.room.power_levels/`, { token: alice.accessToken })).body;
    const raised = await api(hearth, 'PUT', `${V3}/rooms/${enc(roomId)}/state/m.room.power_levels/`, { token: alice.accessToken, body: { ...levels, users: { ...levels.users, [bob]: 100 } } });
    const powerLevels = raised.body.event_id as string;
    await remote.waitForPdu((pdu) => pdu.type === 'm.room.power_levels');
    const b = await remote.createEvent(roomId, { type: 'test_state', state_key: 'B', sender: bob, content: { body: 'event_b' } });
    expect(await remote.sendPdus(hearth.name, [b.pdu])).toEqual({ [b.eventId]: {} });

    //      A
    //     /
    //    B  (Y)      Hearth is sent C; asked, the remote gives X alone; Y stays missing,
    //   / \ /        and the state at Y has two made-up state events, S and T.
    //  |   X
    //   \ /
    //    C
    const y = await remote.createEvent(roomId, { type: 'test_state', state_key: 'Y', sender: bob, content: { body: 'event_y' } }, { hold: true });
    const x = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { body: 'event_x' }, prev_events: [b.eventId, y.eventId] }, { hold: true });
    // S would take alice's power away (bob may not): rejected, it loses to alice's power levels.
    const s = await remote.createEvent(roomId, { type: 'm.room.power_levels', state_key: '', sender: bob, content: { users: { [bob]: 100 } } }, { hold: true });
    const t = await remote.createEvent(roomId, { type: 'test_state', state_key: 'T', sender: bob, content: { topic: 'how now' } }, { hold: true });
    const c = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { body: 'event_c' }, prev_events: [b.eventId, x.eventId] });
    const stateAtY = [...remote.stateBefore(roomId, y.eventId).filter((id) => id !== powerLevels), s.eventId, t.eventId];
    answerStateAt(y.eventId, stateAtY, remote.authChainIds(roomId, stateAtY));
    const gap = remote.answerNext('POST', GET_MISSING_EVENTS, () => ({ status: 200, body: { events: [x.pdu] } }));
    const since = await syncToken(alice);

    expect(await remote.sendPdus(hearth.name, [c.pdu])).toEqual({ [c.eventId]: {} });
    expect((await gap).body.latest_events).toEqual([c.eventId]);
    expect(stateIdsAsked(roomId)).toEqual([y.eventId]);
    await timelineUntil(alice, roomId, [x.eventId, c.eventId], since);

    const state = await roomState(roomId);
    const id = (type: string, key = '') => state.find((e) => e.type === type && e.state_key === key)?.event_id;
    expect(id('m.room.power_levels')).toBe(powerLevels);
    expect(id('test_state', 'B')).toBe(b.eventId);
    expect(id('test_state', 'T')).toBe(t.eventId);
    expect(id('test_state', 'Y')).toBe(y.eventId);
    const atX = await remote.client.stateIds(hearth.name, roomId, x.eventId);
    expect(atX.pdu_ids).toEqual(expect.arrayContaining([powerLevels, t.eventId, b.eventId, y.eventId]));
  });

  it('takes a /state_ids answer whose auth chain is empty', async () => {
    const roomId = await sharedRoom();
    const y = await remote.createEvent(roomId, { type: 'test_state', state_key: 'Y', sender: bob, content: { body: 'event_y' } }, { hold: true });
    const x = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { body: 'event_x' }, prev_events: [y.eventId] }, { hold: true });
    const c = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { body: 'event_c' }, prev_events: [latest(roomId), x.eventId] });
    answerStateAt(y.eventId, remote.stateBefore(roomId, y.eventId), []);
    remote.answerNext('POST', GET_MISSING_EVENTS, () => ({ status: 200, body: { events: [x.pdu] } }));
    const since = await syncToken(alice);
    expect(await remote.sendPdus(hearth.name, [c.pdu])).toEqual({ [c.eventId]: {} });
    await timelineUntil(alice, roomId, [x.eventId, c.eventId], since);
    expect(stateIdsAsked(roomId)).toEqual([y.eventId]);
  });

  it('refuses a pushed event whose prev events its sender will not give, without asking the state at them; the next event on it asks again', async () => {
    const roomId = await sharedRoom();
    const base = latest(roomId);
    const missing = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { body: 'Message 1' } }, { hold: true });
    const sent = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { body: 'Message 2' }, prev_events: [missing.eventId] }, { hold: true });
    const since = await syncToken(alice);
    remote.answerNext('POST', GET_MISSING_EVENTS, () => ({ status: 200, body: { events: [] } }));
    expect((await remote.sendPdus(hearth.name, [sent.pdu]))[sent.eventId]?.error).toMatch(/prev events/);

    const next = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { body: 'Message 3' }, prev_events: [sent.eventId] }, { hold: true });
    const again = remote.answerNext('POST', GET_MISSING_EVENTS, () => ({ status: 200, body: { events: [] } }));
    expect((await remote.sendPdus(hearth.name, [next.pdu]))[next.eventId]?.error).toMatch(/prev events/);
    expect((await again).body.latest_events).toEqual([next.eventId]);
    expect(remote.received.filter(isGetMissingEvents(roomId))).toHaveLength(2);
    expect(stateIdsAsked(roomId)).toEqual([]);

    const sentinel = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { body: 'sentinel' }, prev_events: [base] });
    expect(await remote.sendPdus(hearth.name, [sentinel.pdu])).toEqual({ [sentinel.eventId]: {} });
    const seen = (await timelineUntil(alice, roomId, [sentinel.eventId], since)).map((e) => e.event_id);
    expect(seen).not.toContain(sent.eventId);
    expect(seen).not.toContain(next.eventId);
  });

  it('a bogus state at a gap, whose power levels would hand the room over, does not: its power levels are rejected', async () => {
    const roomId = await sharedRoom();
    const create = remoteStateId(roomId, 'm.room.create');
    const join = remoteStateId(roomId, 'm.room.member', bob);
    // X would give bob everything and take alice's power away; C claims the state before it is the create event, bob's join and X.
    const x = await remote.createEvent(roomId, { type: 'm.room.power_levels', state_key: '', sender: bob, content: { users: { [bob]: 100, [alice.userId]: 0 } }, prev_events: ['$this-event-does-not-exist'], depth: 1 }, { hold: true });
    const c = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { body: 'hehehe...' }, prev_events: ['$this-event-does-not-exist'], depth: 10 }, { hold: true });
    const d = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { body: 'totes legit' }, prev_events: [c.eventId], depth: 11 }, { hold: true });
    const e = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { body: 'nothing to see' }, prev_events: [d.eventId], depth: 12 }, { hold: true });
    answerStateAt(c.eventId, [create, join, x.eventId], [create, join]);
    remote.answerNext('POST', GET_MISSING_EVENTS, () => ({ status: 200, body: { events: [d.pdu] } }));
    await remote.sendPdus(hearth.name, [e.pdu]);
    expect(stateIdsAsked(roomId)).toEqual([c.eventId]);
    const levels = await api(hearth, 'GET', `${V3}/rooms/${enc(roomId)}/state/m.room.power_levels/`, { token: alice.accessToken });
    expect(levels.body.users[alice.userId]).toBe(100);
    expect(levels.body.users[bob]).toBeUndefined();
  });

  it('forward extremities stay when the events after them arrive only as outliers and rejected events', async () => {
    const roomId = await sharedRoom();
    const levels = (await api(hearth, 'GET', `${V3}/rooms/${enc(roomId)}/state/m.room.power_levels/`, { token: alice.accessToken })).body;
    const b = (await api(hearth, 'PUT', `${V3}/rooms/${enc(roomId)}/state/m.room.power_levels/`, { token: alice.accessToken, body: { ...levels, users: { ...levels.users, [bob]: 100 } } })).body.event_id;
    await remote.waitForPdu((pdu) => pdu.type === 'm.room.power_levels');
    const fake = `@fake_user:${remote.name}`;
    // C (fetched as an outlier), then D and E by a user who is not in the room (rejected).
    const c = await remote.createEvent(roomId, { type: 'test_state', state_key: 'C', sender: bob, content: { body: 'event_c' } }, { hold: true });
    const d = await remote.createEvent(roomId, { type: 'message', sender: fake, content: { body: 'event_d' }, prev_events: [c.eventId] }, { hold: true });
    const e = await remote.createEvent(roomId, { type: 'message', sender: fake, content: { body: 'event_e' }, prev_events: [d.eventId] }, { hold: true });
    remote.answerNext('POST', GET_MISSING_EVENTS, () => ({ status: 200, body: { events: [d.pdu] } }));
    expect((await remote.sendPdus(hearth.name, [e.pdu]))[e.eventId]?.error).toMatch(/rejected/);
    expect(stateIdsAsked(roomId)).toEqual([c.eventId]);

    const f = await remote.createEvent(roomId, { type: 'message', sender: fake, content: { body: 'event_f' }, prev_events: [e.eventId] }, { hold: true });
    expect((await remote.sendPdus(hearth.name, [f.pdu]))[f.eventId]?.error).toMatch(/rejected/);
    await api(hearth, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/after`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'after' } });
    const after = await remote.waitForPdu((pdu) => (pdu.content as any).body === 'after');
    expect(after.prev_events).toEqual([b]);
  });
});

describe('events of other rooms met while filling a gap', () => {
  it('an outlier whose auth events are in another room is rejected, and so is what its sender built on it', async () => {
    const [first, second] = [await sharedRoom(`@one:${remote.name}`), await sharedRoom(`@two:${remote.name}`)];
    const [one, two] = [`@one:${remote.name}`, `@two:${remote.name}`];
    // Q: one joins the second room, his membership of the first given as his membership; R: one
    // speaks there; S: two speaks, on R. Hearth is sent S, given R, and asks the state at Q.
    const initial = [...remote.rooms.get(second)!.state.values()];
    const q = await remote.createEvent(second, {
      type: 'm.room.member', state_key: one, sender: one, content: { membership: 'join' },
      auth_events: [remoteStateId(second, 'm.room.create'), remoteStateId(second, 'm.room.power_levels'), remoteStateId(second, 'm.room.join_rules'), remoteStateId(first, 'm.room.member', one)],
    }, { hold: true });
    const r = await remote.createEvent(second, { type: 'm.room.message', sender: one, content: { body: 'event R' }, prev_events: [q.eventId], auth_events: [remoteStateId(second, 'm.room.create'), remoteStateId(second, 'm.room.power_levels'), q.eventId] }, { hold: true });
    const s = await remote.createEvent(second, { type: 'm.room.message', sender: two, content: { body: 'event S' }, prev_events: [r.eventId] }, { hold: true });
    answerStateAt(q.eventId, initial, remote.authChainIds(second, [...initial, q.eventId]));
    remote.answerNext('POST', GET_MISSING_EVENTS, () => ({ status: 200, body: { events: [r.pdu] } }));
    const since = await syncToken(alice);
    expect(await remote.sendPdus(hearth.name, [s.pdu])).toEqual({ [s.eventId]: {} });
    expect(stateIdsAsked(second)).toEqual([q.eventId]);
    const seen = await timelineUntil(alice, second, [s.eventId], since);
    expect(seen.filter((e) => e.sender === one)).toEqual([]);
    expect((await roomState(second)).filter((e) => e.type === 'm.room.member' && e.state_key === one)).toEqual([]);
  });

  it('back-pagination never crosses into the room of a backfilled event’s prev event', async () => {
    // P is an event of a room Hearth shares with bob. bob's room elsewhere, which alice joins, has
    // an event Q before her join that names P as its prev event: Hearth backfills Q, and pages no further.
    const first = await sharedRoom();
    const p = await remote.createEvent(first, { type: 'm.room.message', sender: bob, content: { body: 'event P' } });
    expect(await remote.sendPdus(hearth.name, [p.pdu])).toEqual({ [p.eventId]: {} });
    const second = await remote.createRoom(bob);
    const stateAtQ = [...remote.rooms.get(second)!.state.values()];
    const q = await remote.createEvent(second, { type: 'm.room.message', sender: bob, content: { body: 'event Q' }, prev_events: [p.eventId], depth: 2 }, { hold: true });
    answerStateAt(q.eventId, stateAtQ, remote.authChainIds(second, stateAtQ));
    remote.answerAlways('GET', /^\/_matrix\/federation\/v1\/backfill\//, () => ({ status: 200, body: { origin: remote.name, origin_server_ts: Date.now(), pdus: [q.pdu] } }));
    const joined = await api(hearth, 'POST', `${V3}/join/${enc(second)}?server_name=${enc(remote.name)}`, { token: alice.accessToken, body: {} });
    expect(joined.status, JSON.stringify(joined.body)).toBe(200);

    const synced = await longPollUntil(syncer(alice), (body) => !!body.rooms?.join?.[second]);
    const from = synced.rooms.join[second].timeline.prev_batch;
    const page = await api(hearth, 'GET', `${V3}/rooms/${enc(second)}/messages?dir=b&limit=20&from=${enc(from)}`, { token: alice.accessToken });
    expect(page.status).toBe(200);
    expect(remote.received.some((r) => r.path === `/_matrix/federation/v1/backfill/${second}`)).toBe(true);
    const bodies = page.body.chunk.map((e: any) => e.content?.body);
    expect(bodies).toContain('event Q');
    expect(bodies).not.toContain('event P');
    expect(page.body.chunk.every((e: any) => e.room_id === second)).toBe(true);
    // Q's state is its own room's, as the remote gave it, not the first room's after P.
    const atQ = await remote.client.stateIds(hearth.name, second, q.eventId);
    expect([...atQ.pdu_ids].sort()).toEqual([...stateAtQ].sort());
  });
});
