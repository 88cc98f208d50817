// State resolution v2 on a room with 1,000 members and 20 conflicting forks.
// Baselines, measured in the same run on the same state sets: computing the auth
// difference alone (the auth chains of every state set), and resolving 20 copies
// of one state (no conflicts: the split alone). Also the same resolution with a
// warm cache, the room engine's steady state.
import { defaultEd25519Backend } from '../src/crypto/ed25519.ts';
import { EventCache } from '../src/events/event-cache.ts';
import type { StateMap } from '../src/events/event.ts';
import { resolveState } from '../src/events/state-res.ts';
import { authDifference, separateStateSets } from '../src/events/state-res-v2.ts';
import { TestRoom } from '../test/unit/events/room-builder.ts';
import { percentile, report } from './harness.ts';

/** Median and 90th percentile of many timed runs: the machine is shared, so the mean wanders. */
async function timed(runs: number, fn: () => Promise<unknown>): Promise<{ median: number; p90: number }> {
  for (let i = 0; i < 3; i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    await fn();
    samples.push(performance.now() - start);
  }
  samples.sort((a, b) => a - b);
  return { median: percentile(samples, 50), p90: percentile(samples, 90) };
}

const MEMBERS = 1000;
const FORKS = 20;
const ALICE = '@alice:hearth.example';
const user = (i: number): string => `@user${i}:server${i % 7}.example`;

async function buildRoom(members = MEMBERS): Promise<{ room: TestRoom; forks: StateMap[]; tip: StateMap }> {
  const room = await new TestRoom('10', 'hearth.example').bootstrap(ALICE, 'public');
  for (let i = 0; i < members; i++) await room.member(user(i), 'join');
  const tip = new Map(room.state);
  const forks: StateMap[] = [];
  for (let f = 0; f < FORKS; f++) {
    const fork = room.branch();
    const moderator = user(f);
    // Each fork promotes its own moderator, who then bans someone; Alice kicks,
    // renames and retitles; new users join; a member changes their display name.
    await fork.powerLevels(ALICE, { users: { [ALICE]: 100, [moderator]: 50 } });
    await fork.send({ type: 'm.room.topic', sender: ALICE, state_key: '', content: { topic: `fork ${f}` } });
    await fork.send({ type: 'm.room.name', sender: ALICE, state_key: '', content: { name: `Room ${f}` } });
    await fork.member(moderator, 'ban', user(100 + f));
    await fork.member(ALICE, 'leave', user(200 + f));
    await fork.member(user(300 + f), 'join', user(300 + f), { displayname: `renamed ${f}` });
    for (let j = 0; j < 5; j++) await fork.member(`@new${f}_${j}:far.example`, 'join');
    forks.push(fork.state);
  }
  return { room, forks, tip };
}

/** Cold resolution of the 20 forks over rooms of each member count (bench/big-room.bench.ts), runs interleaved. */
export async function resolveForks(memberCounts: number[], runs = 10): Promise<{ median: number; p90: number }[]> {
  const verifier = await defaultEd25519Backend();
  const built = [];
  for (const members of memberCounts) built.push(await buildRoom(members));
  const results = [];
  for (const { room, forks } of built) results.push(await timed(runs, () => resolveState(room.version, forks, room.source(), { verifier })));
  return results;
}

export async function run(): Promise<void> {
  const setupStart = performance.now();
  const { room, forks, tip } = await buildRoom();
  const setup = performance.now() - setupStart;
  const source = room.source();
  const version = room.version;
  const verifier = await defaultEd25519Backend();

  const { conflicted } = separateStateSets(forks);
  const difference = await authDifference(forks, new EventCache(source, version));
  const resolved = await resolveState(version, forks, source, { verifier });

  // Interleaved rounds, so that a burst of load on the machine hits all three alike.
  const unconflicted = Array.from({ length: FORKS }, () => tip);
  const full = await timed(30, () => resolveState(version, forks, source, { verifier }));
  const warmCache = new EventCache(source, version);
  const warm = await timed(30, () => resolveState(version, forks, source, { verifier, cache: warmCache }));
  const chains = await timed(30, () => authDifference(forks, new EventCache(source, version)));
  const noConflict = await timed(30, () => resolveState(version, unconflicted, source, { verifier }));
  const fullConflicted = new Set([...difference, ...[...conflicted.values()].flatMap((ids) => [...ids])]);

  report(
    'state resolution v2',
    `${MEMBERS} members, ${FORKS} forks, ${room.events.size} events; ${conflicted.size} conflicted keys, full conflicted set ${fullConflicted.size}; median of 30 runs`,
    [
      ['resolve 20 conflicting forks (cold: no event or auth chain cached)', full.median, 'ms', `p90 ${full.p90.toFixed(1)} ms; ${resolved.size} keys resolved`],
      ['resolve 20 conflicting forks (auth chains cached, as the room engine keeps them)', warm.median, 'ms', `p90 ${warm.p90.toFixed(1)} ms`],
      ['baseline: auth difference alone (cold auth chains)', chains.median, 'ms', `p90 ${chains.p90.toFixed(1)} ms; resolve = ${(full.median / chains.median).toFixed(1)}× this`],
      ['baseline: resolve 20 identical states (no conflict)', noConflict.median, 'ms', `p90 ${noConflict.p90.toFixed(1)} ms; resolve = ${(full.median / noConflict.median).toFixed(1)}× this`],
      ['(setup: build and sign the room)', setup, 'ms'],
    ],
  );
}
