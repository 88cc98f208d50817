import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { buildPage } from '../../scripts/build.ts';
import { assertChromiumInstalled } from './chromium.ts';
import { assertFirefoxInstalled } from './firefox.ts';
import { assertWebKitInstalled } from './webkit.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The built page (vite build output), served by each browser-host test file. */
    hearthDist: string;
  }
}

// Fail the whole browser suite loudly, never skip it, when a browser it drives (Chromium, Firefox, WebKit) is missing;
// then build the page once for every test file.
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  assertChromiumInstalled();
  assertFirefoxInstalled();
  assertWebKitInstalled();
  const outDir = await mkdtemp(join(tmpdir(), 'hearth-e2e-'));
  await buildPage(outDir, { quiet: true });
  project.provide('hearthDist', outDir);
  return () => rm(outDir, { recursive: true, force: true });
}
