import { fileURLToPath } from 'node:url';
import { build } from 'vite';

export const PROJECT_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Builds the page, its service worker and the core's worker into outDir. */
export async function buildPage(outDir: string, options: { define?: Record<string, string>; quiet?: boolean } = {}): Promise<void> {
  await build({
    root: PROJECT_ROOT,
    configFile: fileURLToPath(new URL('../vite.config.ts', import.meta.url)),
    logLevel: options.quiet ? 'warn' : 'info',
    define: options.define,
    build: { outDir, emptyOutDir: true },
  });
}
