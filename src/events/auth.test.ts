import { describe, expect, it } from 'vitest';
import type { JsonObject } from '../crypto/canonical-json.ts';
import { TestRoom, type EventFields } from '../../test/unit/events/room-builder.ts';
import {
  authEventSelection,
  checkAuthEvents,
  checkEventAgainstAuthEvents,
  mayApplyRedaction,
  redactsOf,
  requiredSignatureServers,
} from './auth.ts';
import { defaultEd25519Backend } from '../crypto/ed25519.ts';
import { powerLevelsOf, parsePowerLevel } from './power-levels.ts';
import { requireRoomVersion } from './room-versions.ts';

import { ALICE, BOB, CAROL, DAVE, EVE, ALL, allows, denies, member, message, powerLevels, range, room, state } from '../../test/unit/events/auth-cases.ts';

// Each rule but membership's (auth-membership.test.ts) and each room-version difference, with cases that allow and cases that deny.

describe('m.room.create (rule 1)', () => {
  it.each(ALL)('v%s: allows a well-formed create event', async (v) => {
    const r = new TestRoom(v);
    await expect(r.check(await r.create(ALICE))).resolves.toBeUndefined();
  });
  it.each(ALL)('v%s: denies a create event with prev_events', async (v) => {
    const r = new TestRoom(v);
    const first = await r.create(ALICE);
    await denies(r, { ...state(ALICE, 'm.room.create', { creator: ALICE }), prev_events: [first.event_id] }, /prev_events/);
  });
  it.each(['1', '10', '11'])('v%s: denies a create event whose room ID is on another server', async (v) => {
    const r = new TestRoom(v);
    await denies(r, state(CAROL, 'm.room.create', { creator: CAROL }), /room ID/);
  });
  it.each(['1', '11'])('v%s: denies an unknown content.room_version', async (v) => {
    const r = new TestRoom(v);
    await denies(r, state(ALICE, 'm.room.create', { creator: ALICE, room_version: '99' }), /not recognised/);
  });
  it.each(range(1, 10))('v%s: denies a create event without content.creator', async (v) => {
    const r = new TestRoom(v);
    await denies(r, state(ALICE, 'm.room.create', { room_version: v }), /creator/);
  });
  it('v11: allows a create event without content.creator (the sender is the creator)', async () => {
    const r = new TestRoom('11');
    await allows(r, state(ALICE, 'm.room.create', { room_version: '11' }));
  });
});

describe('the creator joining first', () => {
  it.each(ALL)('v%s: allows the creator to join right after the create event', async (v) => {
    const r = new TestRoom(v);
    await r.create(ALICE);
    await allows(r, member(ALICE, 'join'));
  });
  it('v10: the creator is content.creator, not the create event\'s sender', async () => {
    const r = new TestRoom('10');
    await r.send(state(ALICE, 'm.room.create', { creator: BOB, room_version: '10' }));
    await allows(r, member(BOB, 'join'));
    await denies(r, member(ALICE, 'join'));
  });
  it('v11: the creator is the create event\'s sender, whatever content.creator says', async () => {
    const r = new TestRoom('11');
    await r.send(state(ALICE, 'm.room.create', { creator: BOB, room_version: '11' }));
    await allows(r, member(ALICE, 'join'));
    await denies(r, member(BOB, 'join'));
  });
  it('denies another user joining right after the create event', async () => {
    const r = new TestRoom('10');
    await r.create(ALICE);
    await denies(r, member(BOB, 'join'), /join rule/);
  });
});

describe('auth_events list (rule 2)', () => {
  const setup = async () => {
    const r = await room('10');
    await r.member(BOB, 'join');
    const event = await r.build(message(BOB));
    const authEvents = [...r.events.values()];
    const verifier = await defaultEd25519Backend();
    return { r, event, authEvents, verifier };
  };
  it('allows auth events chosen by the selection', async () => {
    const { r, event, authEvents, verifier } = await setup();
    await expect(checkEventAgainstAuthEvents(event, authEvents, r.version, verifier)).resolves.toBeUndefined();
  });
  it('denies two auth events with the same (type, state_key)', async () => {
    const { r, verifier } = await setup();
    const oldPowerLevels = r.lookup('m.room.power_levels', '')!;
    await r.powerLevels(ALICE, { users: { [ALICE]: 100 }, ban: 60 });
    const event = await r.build({ ...message(BOB), auth_events: [...[...r.state.values()].filter((id) => !id.includes('join_rules')), oldPowerLevels.event_id] });
    const ids = [r.lookup('m.room.create', '')!, r.lookup('m.room.power_levels', '')!, oldPowerLevels, r.lookup('m.room.member', BOB)!];
    const withDuplicate = { ...event, auth_events: ids.map((e) => e.event_id) };
    await expect(checkEventAgainstAuthEvents(withDuplicate, ids, r.version, verifier)).rejects.toThrow(/two entries/);
  });
  it('denies an auth event the selection does not allow', async () => {
    const { r, event, authEvents } = await setup();
    const joinRules = r.lookup('m.room.join_rules', '')!;
    expect(() => checkAuthEvents({ ...event, auth_events: [...event.auth_events, joinRules.event_id] }, authEvents, r.version)).toThrow(/selection/);
  });
  it('denies a rejected auth event', async () => {
    const { r, event, authEvents } = await setup();
    const powerLevels = r.lookup('m.room.power_levels', '')!.event_id;
    expect(() => checkAuthEvents(event, authEvents, r.version, (id) => id === powerLevels)).toThrow(/rejected/);
  });
  it('denies auth events without the create event', async () => {
    const { r, event, authEvents } = await setup();
    const create = r.lookup('m.room.create', '')!.event_id;
    expect(() => checkAuthEvents({ ...event, auth_events: event.auth_events.filter((id) => id !== create) }, authEvents, r.version)).toThrow(/create/);
  });
  it('denies an auth event from another room', async () => {
    const { r, event, authEvents } = await setup();
    const moved = authEvents.map((e) => (e.type === 'm.room.power_levels' ? { ...e, room_id: '!elsewhere:example.org' } : e));
    expect(() => checkAuthEvents(event, moved, r.version)).toThrow(/another room/);
  });
  it('denies an unknown auth event', async () => {
    const { r, event } = await setup();
    expect(() => checkAuthEvents(event, [], r.version)).toThrow(/not known/);
  });
});

describe('auth events selection', () => {
  const v8 = requireRoomVersion('8');
  it('is empty for the create event', () => {
    expect(authEventSelection(v8, { type: 'm.room.create', sender: ALICE, state_key: '', content: {} })).toEqual([]);
  });
  it('selects create, power levels and the sender for an ordinary event', () => {
    expect(authEventSelection(v8, { type: 'm.room.message', sender: BOB, content: {} })).toEqual([
      ['m.room.create', ''],
      ['m.room.power_levels', ''],
      ['m.room.member', BOB],
    ]);
  });
  it('adds the target, join rules, third-party invite and authorising user for membership', () => {
    const invite = { membership: 'invite', third_party_invite: { signed: { token: 'tok', mxid: CAROL } } };
    expect(authEventSelection(v8, { type: 'm.room.member', sender: ALICE, state_key: CAROL, content: invite })).toEqual([
      ['m.room.create', ''],
      ['m.room.power_levels', ''],
      ['m.room.member', ALICE],
      ['m.room.member', CAROL],
      ['m.room.join_rules', ''],
      ['m.room.third_party_invite', 'tok'],
    ]);
    const join = { membership: 'join', join_authorised_via_users_server: ALICE };
    expect(authEventSelection(v8, { type: 'm.room.member', sender: DAVE, state_key: DAVE, content: join })).toContainEqual(['m.room.member', ALICE]);
    expect(authEventSelection(requireRoomVersion('7'), { type: 'm.room.member', sender: DAVE, state_key: DAVE, content: join })).not.toContainEqual(['m.room.member', ALICE]);
    expect(authEventSelection(v8, { type: 'm.room.member', sender: BOB, state_key: BOB, content: { membership: 'leave' } })).not.toContainEqual(['m.room.join_rules', '']);
  });
});

describe('m.federate (rule 3)', () => {
  it('denies events from other servers in a room that does not federate', async () => {
    const r = new TestRoom('10');
    await r.create(ALICE, { 'm.federate': false });
    await r.member(ALICE, 'join');
    await r.joinRules(ALICE, 'public');
    await denies(r, member(CAROL, 'join'), /federate/);
    await allows(r, member(BOB, 'join'));
  });
  it('allows other servers when m.federate is true', async () => {
    const r = new TestRoom('10');
    await r.create(ALICE, { 'm.federate': true });
    await r.member(ALICE, 'join');
    await r.joinRules(ALICE, 'public');
    await allows(r, member(CAROL, 'join'));
  });
});

describe('m.room.aliases (v1–v5 special case)', () => {
  it.each(range(1, 5))('v%s: allows a non-member to set aliases under its own server', async (v) => {
    await allows(await room(v), state(EVE, 'm.room.aliases', { aliases: ['#x:evil.org'] }, 'evil.org'));
  });
  it.each(range(1, 5))('v%s: denies aliases under another server', async (v) => {
    await denies(await room(v), state(EVE, 'm.room.aliases', { aliases: [] }, 'example.org'), /state_key/);
  });
  it.each(range(6, 11))('v%s: treats aliases as ordinary state, so a non-member is denied', async (v) => {
    await denies(await room(v), state(EVE, 'm.room.aliases', { aliases: [] }, 'evil.org'), /not joined/);
  });
  it.each(range(6, 11))('v%s: allows a member with the state level to set aliases under any key', async (v) => {
    await allows(await room(v), state(ALICE, 'm.room.aliases', { aliases: [] }, 'evil.org'));
  });
});

describe('other events: membership, required level and state keys (rules 6, 8, 9)', () => {
  it.each(ALL)('v%s: allows a joined member to send a message', async (v) => {
    const r = await room(v);
    await r.member(BOB, 'join');
    await allows(r, message(BOB));
  });
  it('denies a message from a non-member, an invitee and a former member', async () => {
    const r = await room('10');
    await denies(r, message(BOB), /not joined/);
    await r.member(ALICE, 'invite', BOB);
    await denies(r, message(BOB), /not joined/);
    await r.member(BOB, 'join');
    await r.member(BOB, 'leave');
    await denies(r, message(BOB), /not joined/);
  });
  it('denies a state event below state_default, allows it at the level', async () => {
    const r = await room('10');
    await r.member(BOB, 'join');
    await denies(r, state(BOB, 'm.room.name', { name: 'x' }), /needs power level 50/);
    await allows(r, state(ALICE, 'm.room.name', { name: 'x' }));
  });
  it('an events entry overrides the defaults, both ways', async () => {
    const r = await room('10', 'public', {});
    await r.member(BOB, 'join');
    await r.powerLevels(ALICE, { users: { [ALICE]: 100 }, events: { 'm.room.name': 0, 'm.room.message': 10 } });
    await allows(r, state(BOB, 'm.room.name', { name: 'x' }));
    await denies(r, message(BOB), /needs power level 10/);
  });
  it('denies a message below events_default', async () => {
    const r = await room('10');
    await r.member(BOB, 'join');
    await r.powerLevels(ALICE, { users: { [ALICE]: 100 }, events_default: 1 });
    await denies(r, message(BOB), /needs power level 1/);
  });
  it('without a power levels event the creator has 100, others 0 and state needs 50', async () => {
    const r = new TestRoom('10');
    await r.create(ALICE);
    await r.member(ALICE, 'join');
    await r.joinRules(ALICE, 'public');
    await r.member(BOB, 'join');
    await allows(r, state(ALICE, 'm.room.topic', { topic: 't' }));
    await denies(r, state(BOB, 'm.room.topic', { topic: 't' }), /needs power level 50/);
    await allows(r, message(BOB));
  });
  it('denies a state_key that is another user\'s ID, allows one\'s own', async () => {
    const r = await room('10');
    await r.member(BOB, 'join');
    await r.powerLevels(ALICE, { users: { [ALICE]: 100 }, state_default: 0 });
    await denies(r, state(BOB, 'org.example.status', { s: 1 }, ALICE), /another user/);
    await allows(r, state(BOB, 'org.example.status', { s: 1 }, BOB));
  });
});

describe('m.room.power_levels (rule 10)', () => {
  const base = { users: { [ALICE]: 100, [BOB]: 50, [CAROL]: 50 }, users_default: 0, ban: 75, events: { 'm.room.tombstone': 100 } };
  const pl = async (v = '10', extra: JsonObject = {}) => {
    const r = await room(v);
    await r.member(BOB, 'join');
    await r.member(CAROL, 'join');
    await r.powerLevels(ALICE, { ...base, ...extra });
    return r;
  };
  const change = (patch: JsonObject) => powerLevels(BOB, { ...base, ...patch });

  it.each(range(1, 11))('v%s: allows the first power levels event', async (v) => {
    const r = new TestRoom(v);
    await r.create(ALICE);
    await r.member(ALICE, 'join');
    await allows(r, powerLevels(ALICE, { users: { [ALICE]: 100 } }));
  });
  it('denies users keys that are not user IDs', async () => {
    await denies(await pl(), powerLevels(ALICE, { users: { bob: 50 } }), /not a user ID/);
  });
  it.each(ALL)('v%s: denies users values that are not integers', async (v) => {
    await denies(await pl(v), powerLevels(ALICE, { users: { [ALICE]: 100, [BOB]: 'fifty' } }), /users\[@bob/);
  });
  it.each(range(1, 9))('v%s: allows users values as strings holding integers', async (v) => {
    const r = await pl(v);
    await allows(r, powerLevels(ALICE, { users: { [ALICE]: '100', [BOB]: ' +050 ' } }));
  });
  it('v10: denies users values as strings', async () => {
    await denies(await pl('10'), powerLevels(ALICE, { users: { [ALICE]: 100, [BOB]: '50' } }), /users\[@bob/);
  });
  it.each([['ban', '50'], ['events', { 'm.room.name': '50' }], ['notifications', { room: '50' }]])(
    'v10: denies %s holding a string, v9 allows it',
    async (name, value) => {
      await denies(await pl('10'), powerLevels(ALICE, { ...base, [name]: value }), /not a valid power level/);
      await allows(await pl('9'), powerLevels(ALICE, { ...base, [name]: value }));
    },
  );
  it.each(range(1, 5))('v%s: allows float levels (truncated)', async (v) => {
    const r = await pl(v);
    await r.send(powerLevels(ALICE, { users: { [ALICE]: 100, [BOB]: 50.9 } }));
    expect(powerLevelsOf(r.version, r.lookup).user(BOB)).toBe(50);
  });
  it('v6: denies float levels', async () => {
    await denies(await pl('6'), powerLevels(ALICE, { users: { [ALICE]: 100, [BOB]: 50.9 } }), /not a valid power level/);
  });
  it('denies raising a level above one\'s own, allows a change within it', async () => {
    const r = await pl();
    await denies(r, change({ users_default: 60 }), /users_default would be above/);
    await allows(r, change({ users_default: 40 }));
  });
  it('denies changing a level that is above one\'s own', async () => {
    await denies(await pl(), change({ ban: 40 }), /ban is above/);
  });
  it('denies changing another user at one\'s own level or above', async () => {
    const r = await pl();
    await denies(r, change({ users: { [ALICE]: 10, [BOB]: 50, [CAROL]: 50 } }), /not below/);
    await denies(r, change({ users: { [ALICE]: 100, [BOB]: 50, [CAROL]: 10 } }), /not below/);
  });
  it('allows demoting oneself, denies promoting oneself', async () => {
    const r = await pl();
    await allows(r, change({ users: { [ALICE]: 100, [BOB]: 10, [CAROL]: 50 } }));
    await denies(r, change({ users: { [ALICE]: 100, [BOB]: 60, [CAROL]: 50 } }), /would be above/);
  });
  it('allows adding a user up to one\'s own level, not beyond', async () => {
    const r = await pl();
    await allows(r, change({ users: { ...base.users, [DAVE]: 50 } }));
    await denies(r, change({ users: { ...base.users, [DAVE]: 51 } }), /would be above/);
  });
  it('events: allows adding within one\'s level; denies above it or changing a higher entry', async () => {
    const r = await pl();
    await allows(r, change({ events: { ...base.events, 'm.room.name': 50 } }));
    await denies(r, change({ events: { ...base.events, 'm.room.name': 60 } }), /would be above/);
    await denies(r, change({ events: { 'm.room.tombstone': 50 } }), /is above/);
  });
  it.each(range(6, 11))('v%s: notifications changes are checked like events', async (v) => {
    const r = await pl(v, { notifications: { room: 75 } });
    await denies(r, change({ notifications: { room: 10 } }), /notifications\[room\] is above/);
    await denies(r, change({ notifications: { room: 75, other: 60 } }), /would be above/);
  });
  it.each(range(1, 5))('v%s: notifications are not checked', async (v) => {
    const r = await pl(v, { notifications: { room: 75 } });
    await allows(r, change({ notifications: { room: 10 } }));
  });
  it('an unchanged entry written differently ("50" for 50) is no change', async () => {
    const r = await pl('5');
    await allows(r, change({ ban: '75' }));
  });
});

describe('m.room.redaction', () => {
  const setup = async (v: string) => {
    const r = await room(v);
    await r.member(BOB, 'join');
    await r.member(CAROL, 'join');
    const target = await r.send(message(ALICE));
    return { r, target };
  };
  const redaction = (v: string, sender: string, redacts: string): EventFields =>
    requireRoomVersion(v).redactsInContent
      ? { type: 'm.room.redaction', sender, content: { redacts } }
      : { type: 'm.room.redaction', sender, content: {}, redacts };

  it.each(['1', '2'])('v%s: allows a redaction at the redact level', async (v) => {
    const { r, target } = await setup(v);
    const carols = await r.send(message(CAROL));
    await allows(r, redaction(v, ALICE, carols.event_id));
    expect(target).toBeDefined();
  });
  it.each(['1', '2'])('v%s: allows a redaction of an event from the same server as the redaction', async (v) => {
    const { r, target } = await setup(v);
    await allows(r, redaction(v, BOB, target.event_id));
  });
  it.each(['1', '2'])('v%s: denies a low-level redaction of another server\'s event', async (v) => {
    const { r, target } = await setup(v);
    await denies(r, redaction(v, CAROL, target.event_id), /redact level/);
  });
  it.each(range(3, 11))('v%s: redactions are ordinary events for auth: allowed, and applied only if permitted', async (v) => {
    const { r, target } = await setup(v);
    const event = await r.build(redaction(v, CAROL, target.event_id));
    await expect(r.check(event)).resolves.toBeUndefined();
    expect(redactsOf(r.version, event)).toBe(target.event_id);
    const levels = powerLevelsOf(r.version, r.lookup);
    expect(mayApplyRedaction(event, target, levels)).toBe(false);
    expect(mayApplyRedaction({ ...event, sender: ALICE }, target, levels)).toBe(true);
    expect(mayApplyRedaction({ ...event, sender: '@other:example.org' }, target, levels)).toBe(true);
  });
  it('v3: a redaction needs the level events or events_default set for it', async () => {
    const { r, target } = await setup('3');
    await r.powerLevels(ALICE, { users: { [ALICE]: 100 }, events: { 'm.room.redaction': 50 } });
    await denies(r, redaction('3', CAROL, target.event_id), /needs power level 50/);
  });
  it('v11: redacts lives in content; v10 reads the top-level field', async () => {
    const { r: r11, target: t11 } = await setup('11');
    expect(redactsOf(r11.version, await r11.build(redaction('11', CAROL, t11.event_id)))).toBe(t11.event_id);
    const { r: r10, target: t10 } = await setup('10');
    expect(redactsOf(r10.version, await r10.build({ type: 'm.room.redaction', sender: CAROL, content: { redacts: t10.event_id } }))).toBeUndefined();
  });
});

describe('signatures an event needs', () => {
  it('v1: the sender\'s server and the event ID\'s server', async () => {
    const r = await room('1');
    const event = await r.build(message(BOB));
    expect(requiredSignatureServers(r.version, { ...event, event_id: '$x:relay.example' })).toEqual(['example.org', 'relay.example']);
  });
  it('a third-party invite does not need the sender\'s server', async () => {
    const r = await room('10');
    const event = await r.build(member(ALICE, 'invite', CAROL, { third_party_invite: { signed: {} } }));
    expect(requiredSignatureServers(r.version, event)).toEqual([]);
  });
  it('v8: the authorising user\'s server too', async () => {
    const r = await room('8');
    const event = await r.build(member(DAVE, 'join', DAVE, { join_authorised_via_users_server: ALICE }));
    expect(requiredSignatureServers(r.version, event)).toEqual(['far.org', 'example.org']);
  });
});

describe('power level values', () => {
  const v1 = requireRoomVersion('1');
  const v9 = requireRoomVersion('9');
  const v10 = requireRoomVersion('10');
  it('reads stringy integers in v1–v9 only', () => {
    expect(parsePowerLevel(' -007 ', v9)).toBe(-7);
    expect(parsePowerLevel('+100', v9)).toBe(100);
    expect(parsePowerLevel('1.5', v9)).toBeUndefined();
    expect(parsePowerLevel('1e2', v9)).toBeUndefined();
    expect(parsePowerLevel('50', v10)).toBeUndefined();
    expect(parsePowerLevel(true, v1)).toBeUndefined();
  });
  it('truncates floats in v1–v5 only', () => {
    expect(parsePowerLevel(-50.9, v1)).toBe(-50);
    expect(parsePowerLevel(50.9, v9)).toBeUndefined();
    expect(parsePowerLevel(Infinity, v1)).toBeUndefined();
  });
});
