// The V8 flags the Node host runs with (`npm run serve`, `npm start`), kept beside package.json's scripts
// by test/unit/host-flags.test.ts, and used by the benchmarks that run the host as production does.
export const HOST_NODE_FLAGS = [
  // A 1 MiB young generation: ~10 MiB less resident when idle, sends as fast (bench/node-host-memory.bench.ts).
  '--max-semi-space-size=1',
  // The old generation grows by at most half its live size at each full GC, not up to ~4× as V8 lets it when
  // collection is cheap: joining a room of 10,000 members peaks at about half the growth (bench/big-room.bench.ts),
  // for ~3% more CPU in the join and the same send times. 20 halves it again but costs 16–43% CPU.
  '--heap-growing-percent=50',
] as const;
