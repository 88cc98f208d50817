// The V8 flags the Node host runs with (`npm run serve`, `npm start`), kept beside package.json's scripts
// by test/unit/host-flags.test.ts, and used by the benchmarks that run the host as production does.

/** A 1 MiB young generation: ~10 MiB less resident when idle, sends as fast (bench/node-host-memory.bench.ts). */
export const SEMI_SPACE_FLAG = '--max-semi-space-size=1';
/**
 * The old generation grows by at most half its live size at each full GC, not up to ~4× as V8 lets it when
 * collection is cheap: joining a room of 10,000 members peaks at about half the growth (bench/big-room.bench.ts),
 * for ~3% more CPU in the join and the same send times. 20 halves it again but costs 16–43% CPU.
 */
export const HEAP_GROWING_FLAG = '--heap-growing-percent=50';

export const HOST_NODE_FLAGS = [SEMI_SPACE_FLAG, HEAP_GROWING_FLAG] as const;

/** The host's flags but one: what that flag is weighed against. */
export const hostFlagsWithout = (flag: string): string[] => HOST_NODE_FLAGS.filter((f) => f !== flag);
