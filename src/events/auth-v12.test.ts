import { describe, expect, it } from 'vitest';
import { TestRoom } from '../../test/unit/events/room-builder.ts';
import { ALICE, BOB, CAROL, DAVE, allows, denies, member, message, powerLevels, state } from '../../test/unit/events/auth-cases.ts';
import { defaultEd25519Backend } from '../crypto/ed25519.ts';
import { authEventSelection, checkAuthEvents, checkEventAgainstAuthEvents, mayApplyRedaction } from './auth.ts';
import type { RoomEvent } from './event.ts';
import { authEventIds, computeEventId, createEventIdOfRoom, referenceIds, roomIdOfCreateEvent, roomIdOfPdu } from './pdu.ts';
import { CREATOR_POWER_LEVEL, powerLevelsOf, roomCreators } from './power-levels.ts';
import { requireRoomVersion } from './room-versions.ts';

// What room version 12 changes in the auth rules (rooms/v12; MSC4289, MSC4291), each with
// cases that allow and cases that deny, on real hashed and signed events.

const v12 = requireRoomVersion('12');
const MAX_LEVEL = Number.MAX_SAFE_INTEGER;

/** A v12 room: alice creates it (with `additional` as additional creators), joins, sets power levels and join rules. */
async function room(options: { additional?: string[]; users?: Record<string, number>; events?: Record<string, number>; joinRule?: string } = {}): Promise<TestRoom> {
  const r = new TestRoom('12');
  await r.create(ALICE, options.additional ? { additional_creators: options.additional } : {});
  await r.member(ALICE, 'join');
  await r.powerLevels(ALICE, { users: options.users ?? {}, ...(options.events ? { events: options.events } : {}) });
  await r.joinRules(ALICE, options.joinRule ?? 'public');
  return r;
}

describe('room IDs (MSC4291)', () => {
  it("is the create event's ID with `!`: URL-safe unpadded base64 of its reference hash, no server name", async () => {
    const r = new TestRoom('12');
    const create = await r.create(ALICE);
    expect(create.event_id).toMatch(/^\$[A-Za-z0-9_-]{43}$/);
    expect(r.roomId).toBe('!' + create.event_id.slice(1));
    expect(roomIdOfCreateEvent(create.event_id)).toBe(r.roomId);
    expect(createEventIdOfRoom(r.roomId)).toBe(create.event_id);
    const { room_id: _derived, event_id: _id, ...pdu } = create;
    expect(computeEventId(pdu, v12)).toBe(create.event_id);
    expect(roomIdOfPdu(pdu)).toBe(r.roomId);
  });
  it('the same content sent a millisecond apart makes another room', async () => {
    const a = new TestRoom('12');
    const b = new TestRoom('12');
    await a.create(ALICE);
    await b.send({ type: 'm.room.create', sender: ALICE, state_key: '', content: { room_version: '12' }, extra: { origin_server_ts: 1 } });
    expect(a.roomId).not.toBe(b.roomId);
  });
  it('a v11 create event names no room of its own', async () => {
    const r = new TestRoom('11');
    const create = await r.create(ALICE);
    const { room_id: _given, ...withoutRoom } = create;
    expect(roomIdOfPdu(withoutRoom)).toBeUndefined();
  });
});

describe('m.room.create (rule 1)', () => {
  it('allows a create event without room_id, from any server (no room ID server to match)', async () => {
    const r = new TestRoom('12');
    await expect(r.check(await r.create(CAROL))).resolves.toBeUndefined();
  });
  it('denies a create event that carries a room_id', async () => {
    const r = new TestRoom('12');
    await denies(r, { ...state(ALICE, 'm.room.create', { room_version: '12' }), extra: { room_id: '!somewhere:example.org' } }, /has a room_id/);
  });
  it('allows additional_creators holding user IDs', async () => {
    const r = new TestRoom('12');
    await allows(r, state(ALICE, 'm.room.create', { room_version: '12', additional_creators: [BOB, CAROL] }));
  });
  it.each([
    ['not a list', BOB],
    ['a list with a number', [BOB, 7]],
    ['a list with a non-user ID', [BOB, 'carol']],
    ['a list with a room ID', ['!room:example.org']],
  ])('denies additional_creators that is %s', async (_what, additional) => {
    const r = new TestRoom('12');
    await denies(r, state(ALICE, 'm.room.create', { room_version: '12', additional_creators: additional }), /additional_creators/);
  });
  it('v11: additional_creators means nothing and is not checked', async () => {
    const r = new TestRoom('11');
    await allows(r, state(ALICE, 'm.room.create', { room_version: '11', additional_creators: 'anything' }));
  });
});

describe('the room ID names an accepted create event (rule 2) and the create event is never listed (rule 3.2)', () => {
  const setup = async () => {
    const r = await room();
    await r.member(BOB, 'join');
    const event = await r.build(message(BOB));
    const verifier = await defaultEd25519Backend();
    const create = r.lookup('m.room.create', '')!;
    return { r, event, create, verifier, authEvents: authEventIds(event, v12).map((id) => r.events.get(id)!) };
  };
  it('allows an event whose auth events leave the create event out', async () => {
    const { event, create, authEvents, verifier } = await setup();
    expect(referenceIds(event.auth_events)).not.toContain(create.event_id);
    expect(authEventIds(event, v12)).toContain(create.event_id);
    await expect(checkEventAgainstAuthEvents(event, authEvents, v12, verifier)).resolves.toBeUndefined();
  });
  it('denies an event that lists the create event among its auth events', async () => {
    const { r, create, verifier } = await setup();
    const listing = await r.build({ ...message(BOB), auth_events: [...r.state.values()].filter((id) => id === create.event_id || id === r.lookup('m.room.power_levels', '')!.event_id || id === r.lookup('m.room.member', BOB)!.event_id) });
    expect(referenceIds(listing.auth_events)).toContain(create.event_id);
    const authEvents = authEventIds(listing, v12).map((id) => r.events.get(id)!);
    await expect(checkEventAgainstAuthEvents(listing, authEvents, v12, verifier)).rejects.toThrow(/not one the selection allows/);
  });
  it('denies an event whose room ID names no known create event', async () => {
    const { r, event, authEvents } = await setup();
    const elsewhere = '!' + 'A'.repeat(43);
    const moved = await r.build({ ...message(BOB), extra: { room_id: elsewhere } });
    expect(() => checkAuthEvents(moved, authEvents, v12)).toThrow(/another room|names no known/);
    expect(() => checkAuthEvents(event, authEvents.filter((e) => e.type !== 'm.room.create'), v12)).toThrow(/names no known m.room.create/);
  });
  it('denies an event whose room ID names a rejected create event', async () => {
    const { event, create, authEvents } = await setup();
    expect(() => checkAuthEvents(event, authEvents, v12, (id) => id === create.event_id)).toThrow(/create event .* was rejected/);
  });
  it("denies an event checked against a state whose create event is another room's", async () => {
    const { r } = await setup();
    const other = await room({ additional: [DAVE] }); // content unlike r's: another room ID
    expect(other.roomId).not.toBe(r.roomId);
    await other.member(BOB, 'join');
    const event = await r.build(message(BOB));
    await expect(other.check(event)).rejects.toThrow(/is not the one room/);
    await expect(r.check(event)).resolves.toBeUndefined();
  });
  it('v11 still lists the create event and needs it listed', async () => {
    const r = await TestRoom.bootstrapped('11', ALICE);
    const event = await r.build(message(ALICE));
    const create = r.lookup('m.room.create', '')!;
    expect(referenceIds(event.auth_events)).toContain(create.event_id);
    const withoutCreate = { ...event, auth_events: referenceIds(event.auth_events).filter((id) => id !== create.event_id) } as RoomEvent;
    expect(() => checkAuthEvents(withoutCreate, [...r.events.values()], r.version)).toThrow(/no m.room.create/);
  });
  it('the selection still names the create event: the rules read it, from the room ID', () => {
    expect(authEventSelection(v12, { type: 'm.room.message', sender: BOB, content: {} })).toContainEqual(['m.room.create', '']);
  });
});

describe('creators have infinite power (MSC4289)', () => {
  it("are the create event's sender and additional_creators", async () => {
    const r = await room({ additional: [BOB] });
    expect(roomCreators(v12, r.lookup('m.room.create', ''))).toEqual([ALICE, BOB]);
    const levels = powerLevelsOf(v12, r.lookup);
    expect(levels.user(ALICE)).toBe(CREATOR_POWER_LEVEL);
    expect(levels.user(BOB)).toBe(CREATOR_POWER_LEVEL);
    expect(levels.user(CAROL)).toBe(0);
    // v11: additional_creators are no one, and the creator's level is what the power levels say.
    const v11 = await TestRoom.bootstrapped('11', ALICE);
    expect(powerLevelsOf(v11.version, v11.lookup).user(ALICE)).toBe(100);
  });
  it('a creator sends what needs the highest level there is; a user at 100 may not', async () => {
    const r = await room({ users: { [CAROL]: 100 }, events: { 'm.room.topic': MAX_LEVEL } });
    await r.member(CAROL, 'join');
    await allows(r, state(ALICE, 'm.room.topic', { topic: 'mine' }));
    await denies(r, state(CAROL, 'm.room.topic', { topic: 'hers' }), /needs power level/);
  });
  it('an additional creator acts with infinite power from the start, with no power levels event yet', async () => {
    const r = new TestRoom('12');
    await r.create(ALICE, { additional_creators: [BOB] });
    await r.member(ALICE, 'join');
    await r.joinRules(ALICE, 'public');
    await r.member(BOB, 'join');
    await r.member(CAROL, 'join');
    await allows(r, state(BOB, 'm.room.name', { name: 'by bob' }));
    await denies(r, state(CAROL, 'm.room.name', { name: 'by carol' }), /needs power level 50/);
  });
  it('the first join right after the create event is only the sender\'s, not an additional creator\'s', async () => {
    const r = new TestRoom('12');
    await r.create(ALICE, { additional_creators: [BOB] });
    await denies(r, member(BOB, 'join'));
    await allows(r, member(ALICE, 'join'));
  });
});

describe('power levels (rule 10.4): creators are never listed', () => {
  it('allows power levels that list other users', async () => {
    const r = await room({ additional: [BOB] });
    await allows(r, powerLevels(ALICE, { users: { [CAROL]: 100, [DAVE]: 50 } }));
  });
  it("denies power levels listing the create event's sender, even at any level, even as the first power levels", async () => {
    const r = await room();
    await denies(r, powerLevels(ALICE, { users: { [ALICE]: 100 } }), /creator/);
    const fresh = new TestRoom('12');
    await fresh.create(ALICE);
    await fresh.member(ALICE, 'join');
    await denies(fresh, powerLevels(ALICE, { users: { [ALICE]: 100 } }), /creator/);
    await allows(fresh, powerLevels(ALICE, { users: {} }));
  });
  it('denies power levels listing an additional creator', async () => {
    const r = await room({ additional: [BOB] });
    await denies(r, powerLevels(ALICE, { users: { [BOB]: 0 } }), /creator/);
  });
  it('a creator may give anyone any level up to the highest; a user at 100 may not give 101', async () => {
    const r = await room({ users: { [CAROL]: 100 } });
    await r.member(CAROL, 'join');
    await allows(r, powerLevels(ALICE, { users: { [CAROL]: 100, [DAVE]: MAX_LEVEL }, ban: MAX_LEVEL }));
    await denies(r, powerLevels(CAROL, { users: { [CAROL]: 100, [DAVE]: 101 } }), /above the sender's level/);
  });
  it('a creator may demote a user at the highest level there is', async () => {
    const r = await room({ users: { [CAROL]: MAX_LEVEL } });
    await r.member(CAROL, 'join');
    await allows(r, powerLevels(ALICE, { users: { [CAROL]: 0 } }));
    // Carol, at the highest level, may not touch a creator: there is no entry for one to hold.
    await denies(r, powerLevels(CAROL, { users: { [CAROL]: MAX_LEVEL, [ALICE]: 0 } }), /creator/);
  });
  it('v11: the creator is listed like anyone else', async () => {
    const r = await TestRoom.bootstrapped('11', ALICE);
    await allows(r, powerLevels(ALICE, { users: { [ALICE]: 100, [BOB]: 50 } }));
  });
});

describe('kick, ban and redaction with creators', () => {
  it('a creator kicks and bans a user at the highest level', async () => {
    const r = await room({ users: { [CAROL]: MAX_LEVEL } });
    await r.member(CAROL, 'join');
    await allows(r, member(ALICE, 'leave', CAROL));
    await allows(r, member(ALICE, 'ban', CAROL));
  });
  it('no one may kick or ban a creator: not a user at the highest level, not another creator', async () => {
    const r = await room({ additional: [BOB], users: { [CAROL]: MAX_LEVEL } });
    await r.member(BOB, 'join');
    await r.member(CAROL, 'join');
    await denies(r, member(CAROL, 'leave', ALICE), /may not kick/);
    await denies(r, member(CAROL, 'ban', BOB), /may not ban/);
    await denies(r, member(ALICE, 'leave', BOB), /may not kick/);
    await denies(r, member(BOB, 'ban', ALICE), /may not ban/);
  });
  it('a creator may unban, whatever the ban level', async () => {
    const r = await room({ users: { [CAROL]: 50 } });
    await r.member(CAROL, 'join');
    await r.powerLevels(ALICE, { users: { [CAROL]: 50 }, ban: MAX_LEVEL, kick: MAX_LEVEL });
    await r.member(ALICE, 'ban', CAROL);
    await allows(r, member(ALICE, 'leave', CAROL));
  });
  it("a creator's redaction of another server's event applies at any redact level; a plain user's does not", async () => {
    const r = await room({ users: { [CAROL]: 100 } });
    await r.powerLevels(ALICE, { users: { [CAROL]: 100 }, redact: MAX_LEVEL });
    await r.member(CAROL, 'join');
    await r.member(DAVE, 'join');
    const target = await r.send(message(DAVE));
    const byAlice = await r.build({ type: 'm.room.redaction', sender: ALICE, content: { redacts: target.event_id } });
    const byCarol = await r.build({ type: 'm.room.redaction', sender: CAROL, content: { redacts: target.event_id } });
    const levels = powerLevelsOf(v12, r.lookup);
    expect(mayApplyRedaction(byAlice, target, levels)).toBe(true);
    expect(mayApplyRedaction(byCarol, target, levels)).toBe(false);
  });
  it('an invite needs the invite level, which a creator always has', async () => {
    const r = await room();
    await r.powerLevels(ALICE, { users: {}, invite: MAX_LEVEL });
    await r.member(BOB, 'join');
    await allows(r, member(ALICE, 'invite', CAROL));
    await denies(r, member(BOB, 'invite', CAROL), /invite level/);
  });
});
