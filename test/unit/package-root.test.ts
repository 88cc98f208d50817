import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  AuthError,
  checkEventAgainstAuthEvents,
  defaultEd25519Backend,
  DEFAULT_ROOM_VERSION,
  getRoomVersion,
  requireRoomVersion,
  resolveState,
  stateKey,
  type RoomEvent,
  type StateMap,
} from '../../src/index.ts';

// The documented public entry, used the way tooling would use it.

const fixture = JSON.parse(readFileSync(new URL('../fixtures/state-res/topic-reset.json', import.meta.url), 'utf8')) as { events: RoomEvent[] };
const byId = new Map(fixture.events.map((e) => [e.event_id, e]));
const id = (name: string) => `$${name}:example.com`;

describe('package root', () => {
  it('looks up room versions', () => {
    // The default the entry exports is one it supports.
    expect(requireRoomVersion(DEFAULT_ROOM_VERSION).id).toBe(DEFAULT_ROOM_VERSION);
    expect(getRoomVersion('11')?.id).toBe('11');
    expect(getRoomVersion('12')?.id).toBe('12');
    expect(getRoomVersion('13')).toBeUndefined();
    expect(() => requireRoomVersion('nope')).toThrow(/not supported/);
  });

  it('resolves state sets given a way to look up events', async () => {
    const base: [string, string][] = ['CREATE', 'IMA', 'IJR', 'IMB', 'IMC', 'IMZ'].map((n) => {
      const e = byId.get(id(n))!;
      return [stateKey(e.type, e.state_key!), e.event_id];
    });
    const a: StateMap = new Map([...base, [stateKey('m.room.power_levels', ''), id('PA')], [stateKey('m.room.topic', ''), id('T2')], [stateKey('m.room.member', '@bob:example.com'), id('MB')]]);
    const b: StateMap = new Map([...base, [stateKey('m.room.power_levels', ''), id('IPOWER')], [stateKey('m.room.topic', ''), id('T1')]]);
    const state = await resolveState(requireRoomVersion('10'), [a, b], { getEvent: async (eventId) => byId.get(eventId) });
    expect(state.get(stateKey('m.room.topic', ''))).toBe(id('T1'));
    expect(state.get(stateKey('m.room.member', '@bob:example.com'))).toBe(id('MB'));
  });

  it('checks one event against its auth events', async () => {
    const verifier = await defaultEd25519Backend();
    const version = requireRoomVersion('2');
    const topic = byId.get(id('T2'))!;
    const authEvents = [id('CREATE'), id('PA'), id('IMB')].map((x) => byId.get(x)!);
    await expect(checkEventAgainstAuthEvents(topic, authEvents, version, verifier)).resolves.toBeUndefined();
    const weaker = [id('CREATE'), id('IPOWER'), id('IMB')].map((x) => byId.get(x)!);
    const forged = { ...topic, auth_events: weaker.map((e) => e.event_id) };
    const failure = await checkEventAgainstAuthEvents(forged, weaker, version, verifier).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(AuthError);
    expect((failure as AuthError).reason).toMatch(/needs power level 50/);
  });
});
