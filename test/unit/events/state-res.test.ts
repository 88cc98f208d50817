import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { TestRoom, type EventFields } from './room-builder.ts';
import { defaultEd25519Backend } from '../../../src/crypto/ed25519.ts';
import { checkEventAgainstAuthEvents, authEventSelection } from '../../../src/events/auth.ts';
import { splitStateKey, stateKey, type RoomEvent, type StateMap } from '../../../src/events/event.ts';
import { EventCache, type EventSource } from '../../../src/events/event-cache.ts';
import { asRoomEvent, authEventIds, isCreateEvent, referenceIds } from '../../../src/events/pdu.ts';
import { requireRoomVersion } from '../../../src/events/room-versions.ts';
import { resolveState } from '../../../src/events/state-res.ts';
import { authDifference, conflictedStateSubgraph, iterativeAuthChecks } from '../../../src/events/state-res-v2.ts';

// The classic state resolution scenarios (test/fixtures/state-res, generated from
// scenarios.ts), order independence, and the hooks the room engine uses.

interface Fixture {
  title: string;
  source: string;
  room_version: string;
  resolve_under: string[];
  resolve_before?: string;
  state_sets?: string[][];
  unauthorised?: string[];
  expected_state: [string, string, string][];
  events: RoomEvent[];
}

const fixturesDir = fileURLToPath(new URL('../../fixtures/state-res/', import.meta.url));
const fixtures = readdirSync(fixturesDir)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((file) => ({ file, ...(JSON.parse(readFileSync(fixturesDir + file, 'utf8')) as Fixture) }))
  // As the room engine holds them: a v12 create event with the room ID its ID gives.
  .map((fixture) => ({ ...fixture, events: fixture.events.map((e) => asRoomEvent(e, e.event_id, requireRoomVersion(fixture.room_version))) }));

const sourceOf = (events: Iterable<RoomEvent>): EventSource => {
  const byId = new Map([...events].map((e) => [e.event_id, e]));
  return { getEvent: async (id) => byId.get(id) };
};

const sorted = (state: StateMap): [string, string, string][] =>
  [...state].map(([key, id]) => [...splitStateKey(key), id] as [string, string, string]).sort();

/** Walks a fixture's DAG in order, resolving at every merge; returns the state before each event. */
async function statesBefore(fixture: Fixture, versionId: string, reversePrevs = false): Promise<Map<string, StateMap>> {
  const version = requireRoomVersion(versionId);
  const source = sourceOf(fixture.events);
  const before = new Map<string, StateMap>();
  const after = new Map<string, StateMap>();
  for (const event of fixture.events) {
    const prevs = referenceIds(event.prev_events);
    if (reversePrevs) prevs.reverse();
    const sets = prevs.map((id) => after.get(id)!);
    const state = sets.length === 0 ? new Map() : sets.length === 1 ? new Map(sets[0]) : await resolveState(version, sets, source);
    before.set(event.event_id, state);
    const next = new Map(state);
    if (typeof event.state_key === 'string') next.set(stateKey(event.type, event.state_key), event.event_id);
    after.set(event.event_id, next);
  }
  return before;
}

function stateSetsOf(fixture: Fixture): StateMap[] {
  const byId = new Map(fixture.events.map((e) => [e.event_id, e]));
  return fixture.state_sets!.map((ids) => new Map(ids.map((id) => [stateKey(byId.get(id)!.type, byId.get(id)!.state_key!), id])));
}

async function resolveFixture(fixture: Fixture, versionId: string, reverse = false): Promise<StateMap> {
  if (fixture.resolve_before) return (await statesBefore(fixture, versionId, reverse)).get(fixture.resolve_before)!;
  const sets = stateSetsOf(fixture);
  if (reverse) sets.reverse();
  return resolveState(requireRoomVersion(versionId), sets, sourceOf(fixture.events));
}

describe.each(fixtures)('$file: $title', (fixture) => {
  it.each(fixture.resolve_under)('resolves as expected in room version %s', async (v) => {
    expect(sorted(await resolveFixture(fixture, v))).toEqual(fixture.expected_state);
  });

  it('gives the same answer with the state sets in the other order', async () => {
    const v = fixture.resolve_under[0]!;
    expect(sorted(await resolveFixture(fixture, v, true))).toEqual(fixture.expected_state);
  });

  it('is made of real events: each authorised by its auth events, which are those a server would select', async () => {
    const version = requireRoomVersion(fixture.room_version);
    const verifier = await defaultEd25519Backend();
    const byId = new Map(fixture.events.map((e) => [e.event_id, e]));
    const before = fixture.resolve_before ? await statesBefore(fixture, fixture.room_version) : undefined;
    for (const event of fixture.events) {
      const authEvents = authEventIds(event, version).map((id) => byId.get(id)!);
      const check = checkEventAgainstAuthEvents(event, authEvents, version, verifier);
      if (fixture.unauthorised?.includes(event.event_id)) await expect(check).rejects.toThrow();
      else await expect(check, event.event_id).resolves.toBeUndefined();
      if (before) {
        const state = before.get(event.event_id)!;
        const selected = authEventSelection(version, event)
          .filter(([type, key]) => !(version.roomIdFromCreateEvent && isCreateEvent({ type, state_key: key })))
          .map(([type, key]) => state.get(stateKey(type, key)))
          .filter((id): id is string => id !== undefined);
        expect(new Set(referenceIds(event.auth_events)), event.event_id).toEqual(new Set(selected));
      }
    }
  });
});

it('covers the classic scenarios', () => {
  const names = fixtures.map((f) => f.file);
  for (const classic of ['ban-vs-power-levels', 'join-rule-evasion', 'offtopic-power-levels', 'topic-basic', 'topic-reset', 'topic-with-merge', 'mainline-sort']) {
    expect(names).toContain(`${classic}.json`);
  }
});

/** A seeded PRNG (mulberry32), so a failing case can be replayed. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const USERS = ['@alice:example.org', '@bob:example.org', '@carol:other.org', '@dan:other.org', '@erin:third.org', '@fay:third.org'];

/** A room that forks repeatedly; every event passes auth on its own fork. Returns the forks' states. */
async function randomForks(versionId: string, seed: number): Promise<{ room: TestRoom; states: StateMap[] }> {
  const random = prng(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const alice = USERS[0]!;
  const room = await TestRoom.bootstrapped(versionId, alice, 'public', { [USERS[1]!]: 50, [USERS[2]!]: 50 });
  for (const user of USERS.slice(1, 5)) await room.member(user, 'join');
  const forks = [room.branch(), room.branch()];
  for (let step = 0; step < 40; step++) {
    const fork = random() < 0.15 ? pick(forks).branch() : pick(forks);
    if (!forks.includes(fork)) forks.push(fork);
    const sender = pick(USERS);
    const target = pick(USERS);
    const level = pick([0, 10, 50, 60, 100]);
    const fields = pick<EventFields>([
      { type: 'm.room.topic', sender, state_key: '', content: { topic: `t${step}` } },
      { type: 'm.room.name', sender, state_key: '', content: { name: `n${step}` } },
      { type: 'm.room.member', sender, state_key: target, content: { membership: pick(['join', 'leave', 'ban', 'invite']) } },
      { type: 'm.room.join_rules', sender, state_key: '', content: { join_rule: pick(['public', 'invite']) } },
      { type: 'm.room.power_levels', sender, state_key: '', content: { users: { ...(room.version.privilegedCreators ? {} : { [alice]: 100 }), [sender]: level, [target]: pick([0, 50]) } } },
    ]);
    const event = await fork.build(fields);
    try {
      await fork.check(event);
      fork.add(event);
    } catch {
      // not allowed on this fork: leave it out
    }
  }
  return { room, states: forks.map((f) => f.state) };
}

describe('order independence', () => {
  it.each(['1', '2', '6', '10', '11', '12'])('v%s: random forked rooms resolve the same whatever the order of the state sets', async (v) => {
    const version = requireRoomVersion(v);
    for (let seed = 1; seed <= 4; seed++) {
      const { room, states } = await randomForks(v, seed * 7919 + Number(v));
      const reference = sorted(await resolveState(version, states, room.source()));
      const random = prng(seed);
      for (let i = 0; i < 3; i++) {
        const shuffled = [...states].sort(() => random() - 0.5);
        expect(sorted(await resolveState(version, shuffled, room.source())), `seed ${seed}`).toEqual(reference);
      }
    }
  });
});

describe('auth difference', () => {
  it('counts each state set\'s own events as reached by it (as Synapse and gomatrixserverlib do)', async () => {
    const alice = '@alice:example.org';
    const bob = '@bob:example.org';
    const room = await new TestRoom('10').bootstrap(alice, 'public', { [bob]: 50 });
    const bobJoin = await room.member(bob, 'join');
    const forkA = room.branch();
    const forkB = room.branch();
    const topic = await forkA.send({ type: 'm.room.topic', sender: bob, state_key: '', content: { topic: 'a' } }); // cites Bob's join
    const name = await forkB.send({ type: 'm.room.name', sender: alice, state_key: '', content: { name: 'b' } }); // does not
    const difference = await authDifference([forkA.state, forkB.state], new EventCache(room.source(), room.version));
    // Bob's join is in both states: under the literal "auth chain excludes the event" it would be in the difference.
    expect(difference.has(bobJoin.event_id)).toBe(false);
    expect(difference).toEqual(new Set([topic.event_id, name.event_id]));
  });
});

describe('conflicted state subgraph (v2.1, room version 12)', () => {
  it('holds the events on auth paths between conflicted events, ends included, and nothing off them', async () => {
    const alice = '@alice:example.org';
    const room = await new TestRoom('12').bootstrap(alice);
    const create = room.lookup('m.room.create', '')!;
    const join = room.lookup('m.room.member', alice)!;
    const pl0 = room.lookup('m.room.power_levels', '')!;
    const pl1 = await room.powerLevels(alice, { users: { '@bob:example.org': 10 } });
    const pl2 = await room.powerLevels(alice, { users: { '@bob:example.org': 20 } });
    const topic = await room.send({ type: 'm.room.topic', sender: alice, state_key: '', content: { topic: 'off the path' } });
    const cache = new EventCache(room.source(), room.version);
    // The create event is implied, not listed, but every auth chain reaches it.
    expect(referenceIds(pl2.auth_events)).not.toContain(create.event_id);
    expect(await cache.authChain(pl2.event_id)).toContain(create.event_id);
    const subgraph = await conflictedStateSubgraph(new Set([pl0.event_id, pl2.event_id]), cache, room.version);
    expect(subgraph).toEqual(new Set([pl0.event_id, pl1.event_id, pl2.event_id]));
    for (const off of [create, join, topic]) expect(subgraph.has(off.event_id)).toBe(false);
    // The topic cites pl2, which cites pl1: pl2 lies between them.
    expect(await conflictedStateSubgraph(new Set([topic.event_id, pl1.event_id]), cache, room.version)).toEqual(new Set([topic.event_id, pl2.event_id, pl1.event_id]));
  });
});

describe('hooks for the room engine', () => {
  it('uses getAuthChain when given and reaches the same answer', async () => {
    const fixture = fixtures.find((f) => f.file === 'mainline-sort.json')!;
    const byId = new Map(fixture.events.map((e) => [e.event_id, e]));
    const chains = new EventCache(sourceOf(fixture.events), requireRoomVersion(fixture.room_version));
    let asked = 0;
    const source: EventSource = {
      getEvent: async (id) => byId.get(id),
      getAuthChain: async (id) => {
        asked++;
        return chains.authChain(id);
      },
    };
    const before = await statesBefore(fixture, '10');
    const end = byId.get(fixture.resolve_before!)!;
    const sets = referenceIds(end.prev_events).map((id) => {
      const state = new Map(before.get(id)!);
      const event = byId.get(id)!;
      if (typeof event.state_key === 'string') state.set(stateKey(event.type, event.state_key), id);
      return state;
    });
    expect(sorted(await resolveState(requireRoomVersion('10'), sets, source))).toEqual(fixture.expected_state);
    expect(asked).toBeGreaterThan(0);
  });

  it('does not use a rejected auth event in the iterative auth checks', async () => {
    const room = await new TestRoom('10').bootstrap('@alice:example.org');
    await room.member('@bob:example.org', 'join');
    const promote = await room.powerLevels('@alice:example.org', { users: { '@alice:example.org': 100, '@bob:example.org': 50 } });
    const topic = await room.send({ type: 'm.room.topic', sender: '@bob:example.org', state_key: '', content: { topic: 'x' } });
    const verifier = await defaultEd25519Backend();
    const version = requireRoomVersion('10');
    const withoutPowerLevels = new Map(room.state);
    withoutPowerLevels.delete(stateKey('m.room.power_levels', ''));
    withoutPowerLevels.delete(stateKey('m.room.topic', ''));
    const run = (rejected: boolean) =>
      iterativeAuthChecks(version, [topic.event_id], withoutPowerLevels, new EventCache({ ...room.source(), isRejected: (id) => rejected && id === promote.event_id }, version), verifier);
    expect((await run(false)).get(stateKey('m.room.topic', ''))).toBe(topic.event_id);
    expect((await run(true)).get(stateKey('m.room.topic', ''))).toBeUndefined();
  });

  it('returns the single state set unchanged and resolves no sets to nothing', async () => {
    const room = await new TestRoom('10').bootstrap('@alice:example.org');
    expect(await resolveState(room.version, [room.state], room.source())).toEqual(room.state);
    expect(await resolveState(room.version, [], room.source())).toEqual(new Map());
  });
});
