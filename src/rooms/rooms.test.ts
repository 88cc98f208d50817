import initSqlJs from 'sql.js';
import { beforeEach, describe, expect, it } from 'vitest';
import { encodeBase64 } from '../crypto/base64.ts';
import { defaultEd25519Backend } from '../crypto/ed25519.ts';
import { HEARTH_KEY_ID, publicKeyFromServerName, serverNameFromPublicKey } from '../crypto/identity.ts';
import { webRandomBytes } from '../crypto/random.ts';
import { stateKey } from '../events/event.ts';
import type { PDU } from '../events/pdu.ts';
import { openSqlJsDatabase } from '../storage/sqljs-database.ts';
import { streamSchema } from '../storage/stream.ts';
import { creationEvents } from './create-room.ts';
import { RoomError } from './errors.ts';
import { Rooms, type StoredEvent } from './rooms.ts';
import { roomsSchema } from './schema.ts';

/** One homeserver's room engine, with its own database and key. */
async function server(): Promise<Rooms> {
  const ed25519 = await defaultEd25519Backend();
  const signingKey = await ed25519.keyFromSeed(webRandomBytes(32));
  const serverName = serverNameFromPublicKey(signingKey.publicKey);
  const db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [streamSchema, roomsSchema] });
  return new Rooms({
    db, serverName, keyId: HEARTH_KEY_ID, signingKey, ed25519, now: Date.now, random: webRandomBytes, notify: () => {},
    resolveVerifyKey: async (name, keyId) => (keyId === HEARTH_KEY_ID ? publicKeyFromServerName(name) : undefined),
  });
}

/** What a PDU looks like on the wire (room versions 3+ carry no event_id). */
const wire = (stored: StoredEvent): PDU => {
  const { event_id: _id, ...pdu } = stored.event;
  return pdu;
};

async function replicate(from: Rooms, to: Rooms, events: StoredEvent[]): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for (const e of events) out.push(await to.receiveEvent(wire(e)));
  void from;
  return out;
}

let a: Rooms;
let b: Rooms;
let alice: string;
let bob: string;
let roomId: string;
let history: StoredEvent[];

beforeEach(async () => {
  a = await server();
  b = await server();
  alice = `@alice:${a.serverName}`;
  bob = `@bob:${b.serverName}`;
  roomId = `!room:${a.serverName}`;
  history = await a.createRoom(roomId, '10', creationEvents({ creator: alice, creatorProfile: {}, preset: 'public_chat' }));
  await b.trackRemoteRoom(roomId, '10');
  await replicate(a, b, history);
  // bob joins on his own server and alice's server receives the join
  const [join] = await b.sendEvents(roomId, [{ type: 'm.room.member', sender: bob, state_key: bob, content: { membership: 'join' } }]);
  await a.receiveEvent(wire(join!));
});

const currentIds = async (rooms: Rooms) => {
  const state = await rooms.currentState(roomId);
  return new Map([...state].map(([k, v]) => [k, v.event.event_id]));
};

describe('room engine: events from other servers', () => {
  it('replicates a room so both servers hold the same current state', async () => {
    expect(await currentIds(b)).toEqual(await currentIds(a));
    expect(await a.membership(roomId, bob)).toBe('join');
  });

  it('refuses an event whose signature does not verify, and stores nothing', async () => {
    const [message] = await a.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: 'hi' } }]);
    const forged = { ...wire(message!), signatures: { [a.serverName]: { [HEARTH_KEY_ID]: encodeBase64(new Uint8Array(64)) } } };
    await expect(b.receiveEvent(forged)).rejects.toThrow(/no valid signature/);
    expect(await b.getEvent(message!.event.event_id)).toBeUndefined();
  });

  it('keeps only the redacted form of an event whose content hash does not match', async () => {
    const [message] = await a.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: 'original' } }]);
    const tampered = { ...wire(message!), content: { body: 'tampered' } };
    const stored = await b.receiveEvent(tampered);
    expect(stored.event.event_id).toBe(message!.event.event_id);
    expect(stored.event.content).toEqual({});
  });

  it('stores an event that fails auth as rejected, never as state', async () => {
    // bob (power 0) tries to change the room name, which needs 50
    const [name] = await b.sendEvents(roomId, [{ type: 'm.room.topic', sender: bob, state_key: '', content: { topic: 'bob was here' } }]).catch(() => [undefined]);
    expect(name).toBeUndefined(); // bob's own server refuses to build it
    const forged = await forgeEvent(b, { type: 'm.room.name', sender: bob, state_key: '', content: { name: 'hijacked' } });
    const stored = await a.receiveEvent(forged);
    expect(stored.rejected).toMatch(/power level/);
    expect(stored.streamOrdering).toBeNull();
    expect((await a.currentStateEvent(roomId, 'm.room.name', ''))).toBeUndefined();
  });

  it('soft-fails an event allowed by its own history but not by the current state', async () => {
    // bob sends from his server, concurrently alice bans him on hers
    const [bobMessage] = await b.sendEvents(roomId, [{ type: 'm.room.message', sender: bob, content: { body: 'before the ban lands' } }]);
    const [ban] = await a.sendEvents(roomId, [{ type: 'm.room.member', sender: alice, state_key: bob, content: { membership: 'ban' } }]);
    const stored = await a.receiveEvent(wire(bobMessage!));
    expect(stored.rejected).toBeNull();
    expect(stored.softFailed).toBe(true);
    expect(stored.streamOrdering).toBeNull();
    expect(await a.membership(roomId, bob)).toBe('ban');
    void ban;
  });

  it('resolves concurrent state from two servers with state resolution', async () => {
    // Give bob power to set the topic, then both set it concurrently.
    const levels = (await a.currentStateEvent(roomId, 'm.room.power_levels', ''))!.event.content;
    const [power] = await a.sendEvents(roomId, [{ type: 'm.room.power_levels', sender: alice, state_key: '', content: { ...levels, users: { [alice]: 100, [bob]: 50 } } }]);
    await b.receiveEvent(wire(power!));
    const [topicA] = await a.sendEvents(roomId, [{ type: 'm.room.topic', sender: alice, state_key: '', content: { topic: 'from a' } }]);
    const [topicB] = await b.sendEvents(roomId, [{ type: 'm.room.topic', sender: bob, state_key: '', content: { topic: 'from b' } }]);
    await a.receiveEvent(wire(topicB!));
    await b.receiveEvent(wire(topicA!));
    // Both servers reach the same answer, whatever order they saw the events in.
    const topicAtA = (await a.currentStateEvent(roomId, 'm.room.topic', ''))!.event.event_id;
    const topicAtB = (await b.currentStateEvent(roomId, 'm.room.topic', ''))!.event.event_id;
    expect(topicAtA).toBe(topicAtB);
    expect([topicA!.event.event_id, topicB!.event.event_id]).toContain(topicAtA);
    expect(await currentIds(a)).toEqual(await currentIds(b));
    // The next event from either side merges the fork: one extremity again.
    const [merge] = await a.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: 'merged' } }]);
    expect(merge!.event.prev_events).toHaveLength(2);
  });

  it('stores an event that arrives twice at once only once', async () => {
    const [message] = await a.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: 'twice' } }]);
    const [first, second] = await Promise.all([b.receiveEvent(wire(message!)), b.receiveEvent(wire(message!))]);
    expect(first.event.event_id).toBe(message!.event.event_id);
    expect(second.nid).toBe(first.nid);
  });

  it('keeps events that arrive together in the order they came', async () => {
    const sent: StoredEvent[] = [];
    for (let i = 0; i < 20; i++) sent.push(...(await a.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: `n${i}` } }])));
    const received = await Promise.all(sent.map((e) => b.receiveEvent(wire(e))));
    expect(received.every((r) => r.rejected === null && !r.softFailed)).toBe(true);
    const orderings = received.map((r) => r.streamOrdering!);
    expect([...orderings].sort((x, y) => x - y)).toEqual(orderings);
  });

  it('stores outliers without state and without a place in the timeline', async () => {
    const [message] = await a.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: 'outlier' } }]);
    const stored = await b.receiveEvent(wire(message!), { outlier: true });
    expect(stored.outlier).toBe(true);
    expect(stored.stateSnapshot).toBeNull();
    expect(stored.streamOrdering).toBeNull();
  });

  it('refuses an event whose auth events are unknown', async () => {
    // Properly signed by its server, so only the unknown auth event can be what is wrong with it.
    const [message] = await b.sendEvents(roomId, [{ type: 'm.room.message', sender: bob, content: { body: 'hi' } }]);
    const { hashes: _h, signatures: _s, unsigned: _u, ...fields } = wire(message!);
    const unknownAuth = '$' + 'A'.repeat(43);
    const { hashAndSignEvent, computeEventId } = await import('../events/pdu.ts');
    const { requireRoomVersion } = await import('../events/room-versions.ts');
    const key = (b as unknown as { options: { signingKey: Parameters<typeof hashAndSignEvent>[4] } }).options.signingKey;
    const pdu = (await hashAndSignEvent({ ...fields, auth_events: [...(fields.auth_events as string[]), unknownAuth] }, requireRoomVersion('10'), b.serverName, HEARTH_KEY_ID, key)) as unknown as PDU;
    const refusal = a.receiveEvent(pdu);
    await expect(refusal).rejects.toBeInstanceOf(RoomError);
    await expect(refusal).rejects.toMatchObject({ code: 'missing_events', message: expect.stringMatching(/^auth events of \S+ are unknown$/) });
    expect(await a.getEvent(computeEventId(pdu, requireRoomVersion('10')))).toBeUndefined();
  });

  it('applies a redaction from the same server', async () => {
    const [message] = await b.sendEvents(roomId, [{ type: 'm.room.message', sender: bob, content: { body: 'secret' } }]);
    await a.receiveEvent(wire(message!));
    const [redaction] = await b.sendEvents(roomId, [{ type: 'm.room.redaction', sender: bob, content: { redacts: message!.event.event_id }, redacts: message!.event.event_id }]);
    await a.receiveEvent(wire(redaction!));
    expect((await a.getEvent(message!.event.event_id))!.redactedBy).toBe(redaction!.event.event_id);
  });

  it('keeps a redaction that arrives before its target until the target comes: applied then by the target sender\'s server, never by another without the redact level', async () => {
    // alice (a) says two things; b hears of them only after redactions of both.
    const [first] = await a.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: 'first' } }]);
    const [second] = await a.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: 'second' } }]);
    const [ownRedaction] = await a.sendEvents(roomId, [{ type: 'm.room.redaction', sender: alice, content: { redacts: first!.event.event_id }, redacts: first!.event.event_id }]);
    // bob, of another server and below the redact level, redacts the second on his own server, which does not hold it.
    const [bobsRedaction] = await b.sendEvents(roomId, [{ type: 'm.room.redaction', sender: bob, content: { redacts: second!.event.event_id }, redacts: second!.event.event_id }]);
    expect(await b.redactionApplies(bobsRedaction!.event.event_id)).toBe(false);
    // Out of order: the redaction first (b lacks its prev events, the messages: it comes with the state before it, as a gap's would), then the messages.
    const stateIds = [...(await b.currentState(roomId)).values()].map((e) => e.event.event_id);
    await b.receiveEvent(wire(ownRedaction!), { stateBefore: stateIds });
    expect(await b.redactionApplies(ownRedaction!.event.event_id)).toBe(false);
    for (const message of [first!, second!]) await b.receiveEvent(wire(message));
    expect((await b.getEvent(first!.event.event_id))!.redactedBy).toBe(ownRedaction!.event.event_id);
    expect(await b.redactionApplies(ownRedaction!.event.event_id)).toBe(true);
    expect((await b.getEvent(second!.event.event_id))!.redactedBy).toBeNull();
    expect(await b.redactionApplies(bobsRedaction!.event.event_id)).toBe(false);
    // On a, bob's redaction of an event a holds is decided at once, the same way.
    await a.receiveEvent(wire(bobsRedaction!));
    expect((await a.getEvent(second!.event.event_id))!.redactedBy).toBeNull();
  });

  it('counts members as the state changes, on either server, by a local or a remote event', async () => {
    expect([await a.memberCount(roomId, 'join'), await b.memberCount(roomId, 'join'), await a.memberCount(roomId, 'invite')]).toEqual([2, 2, 0]);
    const carol = `@carol:${a.serverName}`;
    const [invite] = await a.sendEvents(roomId, [{ type: 'm.room.member', sender: alice, state_key: carol, content: { membership: 'invite' } }]);
    await b.receiveEvent(wire(invite!));
    expect([await a.memberCount(roomId, 'invite'), await b.memberCount(roomId, 'invite')]).toEqual([1, 1]);
    const [leave] = await b.sendEvents(roomId, [{ type: 'm.room.member', sender: bob, state_key: bob, content: { membership: 'leave' } }]);
    await a.receiveEvent(wire(leave!));
    expect([await a.memberCount(roomId, 'join'), await b.memberCount(roomId, 'join'), await a.memberCount(roomId, 'leave')]).toEqual([1, 1, 1]);
  });
});

/** Builds an event on a server without its own auth check, as a misbehaving server would. */
async function forgeEvent(rooms: Rooms, template: { type: string; sender: string; state_key?: string; content: Record<string, unknown> }): Promise<PDU> {
  const state = await rooms.currentState(roomId);
  const authIds = [stateKey('m.room.create', ''), stateKey('m.room.power_levels', ''), stateKey('m.room.member', template.sender)]
    .map((k) => state.get(k)?.event.event_id)
    .filter((id): id is string => !!id);
  const head = (await rooms.currentState(roomId)).get(stateKey('m.room.member', template.sender))!;
  const { hashAndSignEvent } = await import('../events/pdu.ts');
  const { requireRoomVersion } = await import('../events/room-versions.ts');
  const ed25519 = await defaultEd25519Backend();
  const key = (rooms as unknown as { options: { signingKey: Parameters<typeof hashAndSignEvent>[4] } }).options.signingKey;
  void ed25519;
  return (await hashAndSignEvent(
    { room_id: roomId, ...template, origin_server_ts: Date.now(), depth: head.event.depth + 1, prev_events: [head.event.event_id], auth_events: authIds, origin: rooms.serverName },
    requireRoomVersion('10'), rooms.serverName, HEARTH_KEY_ID, key,
  )) as unknown as PDU;
}

describe('room engine: a batch of outliers (a join’s state and auth chain)', () => {
  /** A source that counts its reads of each element, as federation's reads from the answer's bytes. */
  const counted = (pdus: (PDU | undefined)[]) => {
    const reads = new Array<number>(pdus.length).fill(0);
    return { reads, source: { length: pdus.length, read: (i: number) => (reads[i]!++, pdus[i] && structuredClone(pdus[i])) } };
  };

  it('stores a big batch (more than a write holds) given dependents first, each after its auth events; each event read at most twice', async () => {
    const members = Array.from({ length: 2_100 }, (_, i) => `@m${i}:${a.serverName}`);
    for (let from = 0; from < members.length; from += 500) {
      await a.sendEvents(roomId, members.slice(from, from + 500).map((m) => ({ type: 'm.room.member', sender: m, state_key: m, content: { membership: 'join' } })));
    }
    const [message] = await a.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: 'tampered with' } }]);
    const state = [...(await a.currentState(roomId)).values()].map((s) => wire(s));
    const tampered = { ...wire(message!), content: { body: 'something else' } };
    const otherRoom = { ...state[0]!, room_id: '!other:example.org' };
    // Auth events last: the engine orders the batch itself. A repeat, a non-PDU and an event of another room among them.
    const batch = [...state.reverse(), tampered, state[5]!, undefined, otherRoom];
    const c = await server();
    await c.trackRemoteRoom(roomId, '10');

    const { reads, source } = counted(batch);
    const answers = await c.receiveOutliers(roomId, source);
    expect(answers.slice(0, state.length + 1).every((answer) => answer && !answer.refused)).toBe(true);
    expect(answers[state.length + 1]).toEqual(answers[5]);
    expect(answers[state.length + 2]).toBeUndefined();
    expect(answers[state.length + 3]?.refused).toMatchObject({ code: 'bad_event', message: expect.stringMatching(/is of another room$/) });
    expect(await c.unknownEvents(answers.slice(0, state.length + 1).map((answer) => answer!.eventId))).toEqual([]);
    for (const answer of answers.slice(0, state.length)) {
      const stored = (await c.getEvent(answer!.eventId))!;
      expect([stored.outlier, stored.rejected, stored.stateSnapshot]).toEqual([true, null, null]);
    }
    // A tampered event is kept as its redacted form.
    expect((await c.getEvent(message!.event.event_id))!.event.content).toEqual({});
    // Read once to be checked, once more to be stored; a tampered event (kept redacted), a repeat and what is refused at once, once.
    expect(reads.slice(0, state.length).every((n) => n === 2)).toBe(true);
    expect(reads.slice(state.length)).toEqual([1, 1, 1, 1]);

    // Held already: read once, and stored again never.
    const again = counted(batch);
    expect((await c.receiveOutliers(roomId, again.source)).map((answer) => answer?.eventId)).toEqual(answers.map((answer) => answer?.eventId));
    expect(again.reads.every((n) => n === 1)).toBe(true);
  }, 30_000); // 2,100 events signed and checked: seconds on a loaded 2-core machine; the test is about reads, not time

  it('refuses what needs an auth event refused in the same batch, and stores the rest', async () => {
    const [message] = await b.sendEvents(roomId, [{ type: 'm.room.message', sender: bob, content: { body: 'hi' } }]);
    const state = [...(await a.currentState(roomId)).values()].map((s) => wire(s));
    const bobMember = state.find((e) => e.type === 'm.room.member' && e.state_key === bob)!;
    const forged = { ...bobMember, signatures: { [b.serverName]: { [HEARTH_KEY_ID]: encodeBase64(new Uint8Array(64)) } } };
    const c = await server();
    await c.trackRemoteRoom(roomId, '10');
    const answers = await c.receiveOutliers(roomId, [wire(message!), forged, ...state.filter((e) => e !== bobMember)]);
    expect(answers.at(0)?.refused).toMatchObject({ code: 'missing_events' });
    expect(answers.at(1)?.refused?.message).toMatch(/has no valid signature/);
    expect(answers.slice(2).every((answer) => answer && !answer.refused)).toBe(true);
    expect(await c.unknownEvents(answers.map((answer) => answer!.eventId))).toEqual(answers.slice(0, 2).map((answer) => answer!.eventId));
  });
});

describe('room engine: state snapshots', () => {
  it('gives backfilled messages after a message the snapshot of the one before, not a copy', async () => {
    const sent = await a.sendEvents(roomId, ['one', 'two', 'three'].map((body) => ({ type: 'm.room.message', sender: alice, content: { body } })));
    const state = [...(await a.currentState(roomId)).values()];
    const c = await server();
    await c.trackRemoteRoom(roomId, '10');
    await c.receiveOutliers(roomId, state.map((s) => wire(s)));
    const first = await c.receiveEvent(wire(sent[0]!), { stateBefore: state.map((s) => s.event.event_id), backfilled: true });
    const rest = [await c.receiveEvent(wire(sent[1]!), { backfilled: true }), await c.receiveEvent(wire(sent[2]!), { backfilled: true })];
    expect(rest.map((r) => [r.rejected, r.stateSnapshot])).toEqual([[null, first.stateSnapshot], [null, first.stateSnapshot]]);
  });
});
