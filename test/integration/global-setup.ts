import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { PROJECT_ROOT } from '../../scripts/build.ts';
import { buildNodeHost } from '../../scripts/build-node.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The compiled `serve.js` that tests run as a person runs `npm run serve`. */
    hearthServeEntry: string;
  }
}

// The tests that start hosts in processes of their own run what production runs: the
// compiled JavaScript. Built once per run, inside the project (its imports resolve from
// node_modules), in a folder of its own so runs side by side do not overwrite each other.
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  await mkdir(join(PROJECT_ROOT, 'build'), { recursive: true });
  const outDir = await mkdtemp(join(PROJECT_ROOT, 'build', 'test-node-'));
  project.provide('hearthServeEntry', await buildNodeHost(outDir, { typeErrors: 'warn' }));
  return () => rm(outDir, { recursive: true, force: true });
}
