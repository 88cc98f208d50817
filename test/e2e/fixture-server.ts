import { createServer } from 'vite';

export interface FixtureServer {
  /** The URL of a file under the repository root, e.g. `test/e2e/fixtures/crypto.html`. */
  url(path: string): string;
  close(): Promise<void>;
}

/**
 * A Vite dev server over the repository, on 127.0.0.1, for test and bench pages
 * that import the core's TypeScript directly.
 */
export async function startFixtureServer(): Promise<FixtureServer> {
  const server = await createServer({
    configFile: false,
    root: process.cwd(),
    logLevel: 'error',
    server: { host: '127.0.0.1', port: 0 },
    // Pre-bundle the CommonJS sql.js up front, or Vite discovers it on first load and reloads the page mid-test.
    optimizeDeps: { include: ['sql.js', 'idb'] },
  });
  await server.listen();
  const { port } = server.httpServer!.address() as { port: number };
  return { url: (path) => `http://127.0.0.1:${port}/${path}`, close: () => server.close() };
}
