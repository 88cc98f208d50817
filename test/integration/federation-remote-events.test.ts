import { beforeEach, describe, expect, it } from 'vitest';
import { redactEvent } from '../../src/events/redaction.ts';
import { requireRoomVersion } from '../../src/events/room-versions.ts';
import { FederationRequestError } from '../../src/federation/client.ts';
import type { PDU } from '../../src/events/pdu.ts';
import { hearthBesideScriptedRemote, type HttpsServer } from '../support/hearth-beside-scripted-remote.ts';
import type { ScriptedRemote } from '../support/scripted-remote.ts';
import { httpSyncer, longPollUntil } from '../support/sync-until.ts';
import { api, register, type Account } from './harness.ts';

// Server-server behaviours an independent remote server found missing (issue 35): events that
// name events of other rooms, redactions (arriving redacted, from servers without the power,
// ahead of their target, of erased users), /state and /state_ids, power levels in a room without
// them, and soft failure. Hearth is a DNS-named host over real HTTPS in this process; the other
// server is the scripted remote of test/support/scripted-remote.ts, which signs its own events and
// builds them on whatever prev and auth events a case needs. Every check is one a server that is
// not Hearth could make: what Hearth answers it, what Hearth's clients see, and what Hearth sends.

const enc = encodeURIComponent;
const V3 = '/_matrix/client/v3';
const PASSWORD = 'correct horse battery staple';

const servers = hearthBesideScriptedRemote();
let hearth: HttpsServer;
let remote: ScriptedRemote;
let alice: Account;
let bob: string;
let users: number;
beforeEach(() => ({ hearth, remote, alice, bob, testNumber: users } = servers));

async function createRoom(account: Account, body: Record<string, unknown> = { preset: 'public_chat' }): Promise<string> {
  const r = await api(hearth, 'POST', `${V3}/createRoom`, { token: account.accessToken, body });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.room_id;
}

/** A room alice made on Hearth, which bob of the remote has joined. */
async function sharedRoom(body: Record<string, unknown> = { preset: 'public_chat' }): Promise<string> {
  const roomId = await createRoom(alice, body);
  await remote.joinRoom(hearth.name, roomId, bob);
  return roomId;
}

async function say(account: Account, roomId: string, text: string): Promise<string> {
  const r = await api(hearth, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/${crypto.randomUUID()}`, { token: account.accessToken, body: { msgtype: 'm.text', body: text } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.event_id;
}

async function putState(account: Account, roomId: string, type: string, content: Record<string, unknown>, stateKey = '') {
  return api(hearth, 'PUT', `${V3}/rooms/${enc(roomId)}/state/${type}/${enc(stateKey)}`, { token: account.accessToken, body: content });
}

/** Alice raises the level to send `eventType` to 50; the PL event's ID, once the remote has it. */
async function restrict(roomId: string, eventType: string): Promise<string> {
  const levels = await api(hearth, 'GET', `${V3}/rooms/${enc(roomId)}/state/m.room.power_levels/`, { token: alice.accessToken });
  const changed = await putState(alice, roomId, 'm.room.power_levels', { ...levels.body, events: { ...levels.body.events, [eventType]: 50 } });
  expect(changed.status, JSON.stringify(changed.body)).toBe(200);
  await remote.waitForPdu((pdu) => pdu.type === 'm.room.power_levels' && (pdu.content as any).events?.[eventType] === 50);
  return changed.body.event_id;
}

const remoteStateId = (roomId: string, type: string, stateKey = '') => remote.rooms.get(roomId)!.state.get(`${type}\u0000${stateKey}`)!;

const syncer = (account: Account) => httpSyncer(hearth, account.accessToken, 5_000);
/** A token to sync from, so what a case waits for comes after it. */
const syncToken = async (account: Account) => (await syncer(account)(undefined)).next_batch as string;

/**
 * Every event of the room's timeline the account is shown from `since` until the one with
 * `eventId` (a sentinel the case sends after what it checks), in order.
 */
async function timelineUntil(account: Account, roomId: string, eventId: string, since: string): Promise<any[]> {
  const seen: any[] = [];
  await longPollUntil(syncer(account), (body) => {
    const events = body.rooms?.join?.[roomId]?.timeline?.events ?? [];
    seen.push(...events);
    return events.some((e: any) => e.event_id === eventId);
  }, { since, who: account.userId });
  return seen;
}

async function getEvent(account: Account, roomId: string, eventId: string) {
  return api(hearth, 'GET', `${V3}/rooms/${enc(roomId)}/event/${enc(eventId)}`, { token: account.accessToken, unchecked: true });
}

/** A message from bob on top of the remote's latest event, sent; its ID once Hearth took it. */
async function bobSays(roomId: string, text: string, fields: { prev_events?: string[]; auth_events?: string[] } = {}): Promise<string> {
  const { eventId, pdu } = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { msgtype: 'm.text', body: text }, ...fields });
  expect(await remote.sendPdus(hearth.name, [pdu])).toEqual({ [eventId]: {} });
  return eventId;
}

/** The server-server request's error as status and errcode. */
async function failure(request: Promise<unknown>): Promise<{ status: number; errcode: string | undefined }> {
  const error = await request.then(() => undefined, (e: unknown) => e);
  expect(error, 'the request succeeded').toBeInstanceOf(FederationRequestError);
  return { status: (error as FederationRequestError).status, errcode: (error as FederationRequestError).errcode };
}

describe('events that name events of other rooms', () => {
  it("an event whose auth_events name an event of another room is rejected, and the room's state is not touched", async () => {
    const [first, second] = [await sharedRoom(), await sharedRoom()];
    const since = await syncToken(alice);
    // bob's message in the second room cites his membership of the first as his membership.
    const auth = [remoteStateId(second, 'm.room.create'), remoteStateId(second, 'm.room.power_levels'), remoteStateId(first, 'm.room.member', bob)];
    const { eventId, pdu } = await remote.createEvent(second, { type: 'm.room.message', sender: bob, content: { body: 'event P' }, auth_events: auth }, { hold: true });
    const answer = await remote.sendPdus(hearth.name, [pdu]);
    expect(answer[eventId]?.error).toMatch(/another room/);

    const sentinel = await bobSays(second, 'sentinel');
    const seen = await timelineUntil(alice, second, sentinel, since);
    expect(seen.map((e) => e.event_id)).not.toContain(eventId);
    const member = await api(hearth, 'GET', `${V3}/rooms/${enc(second)}/state`, { token: alice.accessToken });
    const bobs = member.body.find((e: any) => e.type === 'm.room.member' && e.state_key === bob);
    expect(bobs.event_id).toBe(remoteStateId(second, 'm.room.member', bob));
    expect(bobs.room_id).toBe(second);
  });

  it('a redaction in one room of an event of another is ignored: the event keeps its content, and clients are never shown the redaction', async () => {
    const [first, second] = [await sharedRoom(), await sharedRoom()];
    const message = await bobSays(first, 'hi');
    const since = await syncToken(alice);
    const { eventId: redaction, pdu } = await remote.createEvent(second, { type: 'm.room.redaction', sender: bob, content: {}, redacts: message });
    expect(await remote.sendPdus(hearth.name, [pdu])).toEqual({ [redaction]: {} });
    const sentinel = await bobSays(second, 'sentinel');
    const seen = await timelineUntil(alice, second, sentinel, since);
    expect(seen.map((e) => e.event_id)).not.toContain(redaction);
    const fetched = await getEvent(alice, first, message);
    expect(fetched.body.content.body).toBe('hi');
    expect(fetched.body.unsigned?.redacted_because).toBeUndefined();
  });
});

describe('redactions', () => {
  it('an event that arrives already redacted is taken as it is, its hashes and signature still checked', async () => {
    const roomId = await sharedRoom();
    const version = requireRoomVersion('10');
    const since = await syncToken(alice);
    // Redacted by its sender's server: the content is gone, its hash is of the content that was.
    const { eventId, pdu } = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { msgtype: 'm.text', body: 'Hello' } });
    const redacted = redactEvent(pdu, version) as unknown as PDU;
    expect(redacted.content).toEqual({});
    const answer = await remote.sendPdus(hearth.name, [redacted]);
    expect(Object.keys(answer)).toEqual([eventId]);
    // The same redacted form with its hashes altered: its signature no longer covers it, and it is dropped.
    const forged = { ...redactEvent((await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { body: 'forged' } }, { hold: true })).pdu, version), hashes: { sha256: 'A'.repeat(43) } } as unknown as PDU;
    const forgedAnswer = await remote.sendPdus(hearth.name, [forged]);
    expect(Object.values(forgedAnswer)[0]?.error).toMatch(/signature/);

    const sentinel = await bobSays(roomId, 'sentinel', { prev_events: [eventId] });
    const seen = await timelineUntil(alice, roomId, sentinel, since);
    const taken = seen.find((e) => e.event_id === eventId);
    expect(taken).toMatchObject({ type: 'm.room.message', sender: bob, content: {} });
    expect(seen.map((e) => e.event_id)).not.toContain(Object.keys(forgedAnswer)[0]);
  });

  it('in a room of version 5, a redaction from a server that neither sent the event nor has the power is not applied, and a legitimate one is', async () => {
    const roomId = await sharedRoom({ preset: 'public_chat', room_version: '5' });
    const message = await say(alice, roomId, 'Hello');
    await remote.waitForPdu((pdu) => (pdu.content as any).body === 'Hello');
    const since = await syncToken(alice);
    const spoof = await remote.createEvent(roomId, { type: 'm.room.redaction', sender: bob, content: {}, redacts: message });
    expect(await remote.sendPdus(hearth.name, [spoof.pdu])).toEqual({ [spoof.eventId]: {} });
    const sentinel = await bobSays(roomId, 'sentinel');
    // Never applied, so never shown (rooms v3+: a redaction goes to clients once it is applied).
    expect((await timelineUntil(alice, roomId, sentinel, since)).map((e) => e.event_id)).not.toContain(spoof.eventId);
    let fetched = await getEvent(alice, roomId, message);
    expect(fetched.body.content.body).toBe('Hello');
    expect(fetched.body.unsigned?.redacted_because).toBeUndefined();

    const redacted = await api(hearth, 'PUT', `${V3}/rooms/${enc(roomId)}/redact/${enc(message)}/${crypto.randomUUID()}`, { token: alice.accessToken, body: {} });
    expect(redacted.status).toBe(200);
    await remote.waitForPdu((pdu) => pdu.type === 'm.room.redaction');
    fetched = await getEvent(alice, roomId, message);
    expect(fetched.body.unsigned?.redacted_because?.event_id).toBe(redacted.body.event_id);
    // Served redacted to other servers too.
    expect((await remote.client.event(hearth.name, message)).pdus[0]!.content).toEqual({});

    const again = await remote.createEvent(roomId, { type: 'm.room.redaction', sender: bob, content: {}, redacts: message });
    expect(await remote.sendPdus(hearth.name, [again.pdu])).toEqual({ [again.eventId]: {} });
    await bobSays(roomId, 'sentinel 2');
    fetched = await getEvent(alice, roomId, message);
    expect(fetched.body.unsigned?.redacted_because?.event_id).toBe(redacted.body.event_id);
  });

  it("a redaction that arrives before its target is applied once the target comes, when its sender's server sent the target", async () => {
    const roomId = await sharedRoom();
    const before = remote.rooms.get(roomId)!.order.at(-1)!;
    // The message is held back; its redaction, built beside it, reaches Hearth first.
    const message = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { msgtype: 'm.text', body: 'regrettable' } }, { hold: true });
    const since = await syncToken(alice);
    const redaction = await remote.createEvent(roomId, { type: 'm.room.redaction', sender: bob, content: {}, redacts: message.eventId, prev_events: [before] });
    expect(await remote.sendPdus(hearth.name, [redaction.pdu])).toEqual({ [redaction.eventId]: {} });
    const sentinel = await bobSays(roomId, 'sentinel');
    expect((await timelineUntil(alice, roomId, sentinel, since)).map((e) => e.event_id)).not.toContain(redaction.eventId);

    expect(await remote.sendPdus(hearth.name, [message.pdu])).toEqual({ [message.eventId]: {} });
    const fetched = await getEvent(alice, roomId, message.eventId);
    expect(fetched.status).toBe(200);
    expect(fetched.body.content).toEqual({});
    expect(fetched.body.unsigned?.redacted_because?.event_id).toBe(redaction.eventId);
  });

  it('the events of a user erased with /account/deactivate are served redacted to other servers', async () => {
    const roomId = await sharedRoom();
    const gone = await register(hearth, `gone${users}`, PASSWORD);
    expect((await api(hearth, 'POST', `${V3}/join/${enc(roomId)}`, { token: gone.accessToken, body: {} })).status).toBe(200);
    const words = await say(gone, roomId, 'body1');
    await remote.waitForPdu((pdu) => (pdu.content as any).body === 'body1');
    const served = async () => (await remote.client.event(hearth.name, words)).pdus[0]!;
    expect((await served()).content).toMatchObject({ body: 'body1' });

    const challenge = await api(hearth, 'POST', `${V3}/account/deactivate`, { token: gone.accessToken, body: { erase: true } });
    const auth = { type: 'm.login.password', identifier: { type: 'm.id.user', user: gone.userId }, password: PASSWORD, session: challenge.body.session };
    expect((await api(hearth, 'POST', `${V3}/account/deactivate`, { token: gone.accessToken, body: { erase: true, auth } })).status).toBe(200);

    expect((await served()).content).toEqual({});
    const backfilled = await remote.client.backfill(hearth.name, roomId, [remote.rooms.get(roomId)!.order.at(-1)!], 10);
    const copy = backfilled.pdus.find((pdu) => (pdu as any).sender === gone.userId && pdu.type === 'm.room.message');
    expect(copy?.content).toEqual({});
  });
});

describe('/state and /state_ids', () => {
  for (const endpoint of ['state', 'state_ids']) {
    it(`/${endpoint} without event_id is 400 M_MISSING_PARAM, whatever the room`, async () => {
      for (const roomId of ['notaroombutitdoesntmatter', await sharedRoom()]) {
        expect(await failure(remote.client.request(hearth.name, 'GET', `/_matrix/federation/v1/${endpoint}/${enc(roomId)}`))).toEqual({ status: 400, errcode: 'M_MISSING_PARAM' });
      }
    });

    it(`/${endpoint} at an outlier is 404 M_NOT_FOUND`, async () => {
      const roomId = await sharedRoom();
      const before = remote.rooms.get(roomId)!.order.at(-1)!;
      // bob's new display name is sent to no one; his next message names it as an auth event but
      // not as a prev event, so Hearth fetches it with /event_auth and keeps it as an outlier.
      const rename = await remote.createEvent(roomId, { type: 'm.room.member', sender: bob, state_key: bob, content: { membership: 'join', displayname: 'Bob' } });
      await bobSays(roomId, 'after the rename', { prev_events: [before] });
      expect(remote.received.some((r) => r.path.startsWith('/_matrix/federation/v1/event_auth/'))).toBe(true);
      expect(await failure(remote.client.request(hearth.name, 'GET', `/_matrix/federation/v1/${endpoint}/${enc(roomId)}`, { query: { event_id: rename.eventId } }))).toEqual({ status: 404, errcode: 'M_NOT_FOUND' });
    });

    it(`/${endpoint} for an event of another room is 404 M_NOT_FOUND`, async () => {
      const [first, second] = [await sharedRoom(), await sharedRoom()];
      const elsewhere = await say(alice, first, 'in the first room');
      expect(await failure(remote.client.request(hearth.name, 'GET', `/_matrix/federation/v1/${endpoint}/${enc(second)}`, { query: { event_id: elsewhere } }))).toEqual({ status: 404, errcode: 'M_NOT_FOUND' });
    });
  }

  for (const kind of ['message', 'state']) {
    it(`a rejected ${kind} event has no state to serve (404 M_NOT_FOUND), and the state after it is the state before it`, async () => {
      const roomId = await sharedRoom();
      const initial = [...remote.rooms.get(roomId)!.state.values()].sort();
      // Sent by a user who is not in the room: rejected.
      const rejected = await remote.createEvent(roomId, {
        type: `m.room.${kind}`, sender: `@fake_sender:${remote.name}`, content: { body: 'Rejected' }, ...(kind === 'state' ? { state_key: '' } : {}),
        auth_events: [remoteStateId(roomId, 'm.room.create'), remoteStateId(roomId, 'm.room.power_levels')],
      }, { hold: true });
      expect((await remote.sendPdus(hearth.name, [rejected.pdu]))[rejected.eventId]?.error).toMatch(/rejected/);
      // A regular event on top of it is taken as usual.
      const regular = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { body: 'Hello' }, prev_events: [rejected.eventId] });
      expect(await remote.sendPdus(hearth.name, [regular.pdu])).toEqual({ [regular.eventId]: {} });
      await longPollUntil(syncer(alice), (body) => (body.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.event_id === regular.eventId));

      for (const endpoint of ['state', 'state_ids']) {
        expect(await failure(remote.client.request(hearth.name, 'GET', `/_matrix/federation/v1/${endpoint}/${enc(roomId)}`, { query: { event_id: rejected.eventId } }))).toEqual({ status: 404, errcode: 'M_NOT_FOUND' });
      }
      const after = await remote.client.stateIds(hearth.name, roomId, regular.eventId);
      expect([...after.pdu_ids].sort()).toEqual(initial);
    });
  }
});

describe('power levels', () => {
  it('in a room without power levels, a member who is not its creator may not set them: refused locally, and rejected from another server', async () => {
    const creator = `@creator:${remote.name}`;
    const roomId = await remote.createRoom(creator, { powerLevels: false, members: [bob] });
    const joined = await api(hearth, 'POST', `${V3}/join/${enc(roomId)}?server_name=${enc(remote.name)}`, { token: alice.accessToken, body: {} });
    expect(joined.status, JSON.stringify(joined.body)).toBe(200);
    const since = await syncToken(alice);

    const mine = await api(hearth, 'PUT', `${V3}/rooms/${enc(roomId)}/state/m.room.power_levels/`, { token: alice.accessToken, body: { ban: 50, users: { [alice.userId]: 1000 } }, unchecked: true });
    expect(mine.status).toBe(403);
    expect(mine.body.errcode).toBe('M_FORBIDDEN');

    const theirs = await remote.createEvent(roomId, { type: 'm.room.power_levels', sender: bob, state_key: '', content: { users: { [bob]: 100 } } }, { hold: true });
    expect((await remote.sendPdus(hearth.name, [theirs.pdu]))[theirs.eventId]?.error).toMatch(/rejected/);
    const sentinel = await bobSays(roomId, 'sentinel');
    const seen = await timelineUntil(alice, roomId, sentinel, since);
    expect(seen.filter((e) => e.type === 'm.room.power_levels')).toEqual([]);
    const state = await api(hearth, 'GET', `${V3}/rooms/${enc(roomId)}/state`, { token: alice.accessToken });
    expect(state.body.filter((e: any) => e.type === 'm.room.power_levels')).toEqual([]);
    expect(remote.received.filter((r) => r.path.startsWith('/_matrix/federation/v1/send/')).flatMap((r) => r.body.pdus).filter((p: PDU) => p.type === 'm.room.power_levels')).toEqual([]);
  });
});

describe('soft failure', () => {
  it('an event allowed by its own history but not by the current state is soft-failed: never shown; a later event on top of it is taken as usual', async () => {
    const roomId = await sharedRoom();
    const join = remoteStateId(roomId, 'm.room.member', bob);
    const oldAuth = [remoteStateId(roomId, 'm.room.create'), remoteStateId(roomId, 'm.room.power_levels'), join];
    const blocked = await restrict(roomId, 'm.room.message');
    const since = await syncToken(alice);
    // Built beside the power levels change, on bob's join.
    const denied = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { body: 'Denied' }, prev_events: [join], auth_events: oldAuth });
    expect(await remote.sendPdus(hearth.name, [denied.pdu])).toEqual({ [denied.eventId]: {} });
    const allowed = await remote.createEvent(roomId, { type: 'm.room.other_message_type', sender: bob, content: { body: 'Allowed' }, prev_events: [denied.eventId, blocked] });
    expect(await remote.sendPdus(hearth.name, [allowed.pdu])).toEqual({ [allowed.eventId]: {} });
    const seen = await timelineUntil(alice, roomId, allowed.eventId, since);
    expect(seen.map((e) => e.event_id)).not.toContain(denied.eventId);
    // Served to servers all the same (server-server §Soft failure).
    expect((await remote.client.event(hearth.name, denied.eventId)).pdus).toHaveLength(1);
  });

  it('soft-failed events never become forward extremities: what Hearth sends next builds on the events before them', async () => {
    const roomId = await sharedRoom();
    const join = remoteStateId(roomId, 'm.room.member', bob);
    const oldAuth = [remoteStateId(roomId, 'm.room.create'), remoteStateId(roomId, 'm.room.power_levels'), join];
    const blocked = await restrict(roomId, 'test.sf');
    const allowed = await bobSays(roomId, 'M1', { prev_events: [join], auth_events: oldAuth });
    for (const body of ['SF1', 'SF2']) {
      const sf = await remote.createEvent(roomId, { type: 'test.sf', sender: bob, content: { body }, prev_events: [allowed], auth_events: oldAuth });
      expect(await remote.sendPdus(hearth.name, [sf.pdu])).toEqual({ [sf.eventId]: {} });
    }
    await say(alice, roomId, 'm3');
    const m3 = await remote.waitForPdu((pdu) => (pdu.content as any).body === 'm3');
    expect([...m3.prev_events].sort()).toEqual([blocked, allowed].sort());
  });

  it('an event on top of soft-failed ones takes the place of the extremities they were built on', async () => {
    const roomId = await sharedRoom();
    const join = remoteStateId(roomId, 'm.room.member', bob);
    const oldAuth = [remoteStateId(roomId, 'm.room.create'), remoteStateId(roomId, 'm.room.power_levels'), join];
    const blocked = await restrict(roomId, 'test.sf');
    const allowed = await bobSays(roomId, 'M1', { prev_events: [join], auth_events: oldAuth });
    let previous = allowed;
    for (const body of ['SF1', 'SF2']) {
      const sf = await remote.createEvent(roomId, { type: 'test.sf', sender: bob, content: { body }, prev_events: [previous], auth_events: oldAuth });
      expect(await remote.sendPdus(hearth.name, [sf.pdu])).toEqual({ [sf.eventId]: {} });
      previous = sf.eventId;
    }
    const m2 = await bobSays(roomId, 'M2', { prev_events: [blocked, previous] });
    await longPollUntil(syncer(alice), (body) => (body.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.event_id === m2));
    await say(alice, roomId, 'm3');
    const m3 = await remote.waitForPdu((pdu) => (pdu.content as any).body === 'm3');
    expect(m3.prev_events).toEqual([m2]);
  });
});
