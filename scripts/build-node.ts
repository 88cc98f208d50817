// The Node host compiled to JavaScript, so production runs plain `node` with no
// TypeScript loader (`npm run serve` builds, incrementally, then runs the entry).
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from './build.ts';

export const NODE_BUILD_DIR = join(PROJECT_ROOT, 'build', 'node');

/** Where `serve.js` lands in a build folder. */
export const serveEntry = (outDir = NODE_BUILD_DIR) => join(outDir, 'node', 'serve.js');

/**
 * Compiles src/ (not its tests, not the page's UI) with tsconfig.node.json into outDir;
 * rejects with tsc's report on a type error, unless `typeErrors: 'warn'` (the tests, which
 * `npm test` typechecks first anyway: tsc still emits). Returns the path of the serve entry.
 */
export async function buildNodeHost(outDir = NODE_BUILD_DIR, options: { typeErrors?: 'fail' | 'warn' } = {}): Promise<string> {
  const tsc = join(PROJECT_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const args = [tsc, '-p', join(PROJECT_ROOT, 'tsconfig.node.json'), '--outDir', outDir, '--tsBuildInfoFile', join(outDir, '.tsbuildinfo')];
  try {
    await promisify(execFile)(process.execPath, args, { cwd: PROJECT_ROOT });
  } catch (error) {
    const { stdout = '' } = error as { stdout?: string };
    const emitted = existsSync(serveEntry(outDir)) && /error TS\d+/.test(stdout);
    if (options.typeErrors !== 'warn' || !emitted) throw new Error(`the Node host does not compile:\n${stdout}`);
    console.warn(`the Node host has type errors (built anyway):\n${stdout}`);
  }
  return serveEntry(outDir);
}
