import { defineConfig } from 'vitest/config';

const setupFiles = ['./src/node/polyfills.ts'];

export default defineConfig({
  test: {
    reporters: ['default'],
    // matrix-js-sdk logs to the console directly; show output only for failing tests.
    silent: 'passed-only',
    projects: [
      {
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts', 'test/unit/**/*.test.ts', 'test/support/**/*.test.ts'],
          environment: 'node',
          setupFiles,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          environment: 'node',
          setupFiles,
          globalSetup: ['./test/integration/global-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          environment: 'node',
          setupFiles,
          globalSetup: ['./test/e2e/global-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        // Hearth against a real Synapse and Dendrite (`npm run test:interop`, after scripts/install-synapse.sh and install-dendrite.sh);
        // not one of `npm test`'s projects, which that script names.
        test: {
          name: 'interop',
          include: ['test/interop/**/*.test.ts'],
          environment: 'node',
          setupFiles,
          globalSetup: ['./test/integration/global-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
