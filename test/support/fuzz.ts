import fc from 'fast-check';

/**
 * How hard a property test tries. `npm test` runs each property a bounded number of times
 * with a fixed seed, so a run is fast and the same every time; `npm run fuzz` sets
 * HEARTH_FUZZ_RUNS (many more cases) and, unless HEARTH_FUZZ_SEED pins one, a fresh seed per file.
 * fast-check's failure message names the seed and the shrunk path of any counterexample:
 * replay it with HEARTH_FUZZ_SEED=<seed> and the same HEARTH_FUZZ_RUNS.
 */
const runs = Number(process.env['HEARTH_FUZZ_RUNS'] ?? '');
/** True under `npm run fuzz`. */
export const fuzzing = Number.isInteger(runs) && runs > 0;
const seedText = process.env['HEARTH_FUZZ_SEED'];
const seed = seedText !== undefined ? Number(seedText) : fuzzing ? Math.floor(Math.random() * 2 ** 31) : 20261201;
if (fuzzing) console.log(`fuzz: seed ${seed}, up to ${runs} runs per property (HEARTH_FUZZ_SEED=${seed} replays it)`);

/** A test's timeout: vitest's own in `npm test`, none to speak of under `npm run fuzz`. */
export const fuzzTimeout = fuzzing ? 60 * 60_000 : undefined;

/**
 * fast-check's parameters: `defaultRuns` cases in `npm test`; under `npm run fuzz`,
 * HEARTH_FUZZ_RUNS divided by `cost` (for properties whose cases are round trips), never fewer than the default.
 */
export function fuzzParameters<T>(defaultRuns: number, cost = 1): fc.Parameters<T> {
  return { seed, numRuns: fuzzing ? Math.max(defaultRuns, Math.ceil(runs / cost)) : defaultRuns, endOnFailure: true };
}
