import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Builds the page, its service worker and the core's worker into outDir. */
export async function buildPage(outDir: string, options: { define?: Record<string, string>; quiet?: boolean } = {}): Promise<void> {
  // Loaded here, not with the module: `npm start --no-build` (and whoever needs only PROJECT_ROOT) never pays for vite.
  const { build } = await import('vite');
  await build({
    root: PROJECT_ROOT,
    configFile: fileURLToPath(new URL('../vite.config.ts', import.meta.url)),
    logLevel: options.quiet ? 'warn' : 'info',
    define: options.define,
    build: { outDir, emptyOutDir: true },
  });
}
