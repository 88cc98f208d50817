import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveStatic, type StaticServer } from '../../scripts/static-server.ts';

// `npm start`'s web server: the page's files and nothing else.
let root: string;
let server: StaticServer;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'hearth-static-'));
  await mkdir(join(root, 'assets'));
  await writeFile(join(root, 'index.html'), '<!doctype html><title>Hearth</title>');
  await writeFile(join(root, 'sw.js'), 'self.addEventListener("fetch", () => {});');
  await writeFile(join(root, 'assets', 'app-abc123.js'), 'console.log(1)');
  await writeFile(join(root, 'assets', 'sql-wasm.wasm'), new Uint8Array([0, 97, 115, 109]));
  server = await serveStatic(root, 0);
});

afterAll(async () => {
  await server?.close();
  await rm(root, { recursive: true, force: true });
});

const get = (path: string, init?: RequestInit) => fetch(server.url + path, init);

describe('static server', () => {
  it('serves the page, the service worker and assets with their types and caching', async () => {
    const page = await get('/');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('cache-control')).toBe('no-cache');
    const sw = await get('/sw.js');
    expect(sw.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(sw.headers.get('cache-control')).toBe('no-cache');
    const asset = await get('/assets/app-abc123.js');
    expect(asset.headers.get('cache-control')).toContain('immutable');
    expect((await get('/assets/sql-wasm.wasm')).headers.get('content-type')).toBe('application/wasm');
  });

  it('never answers the Matrix API, and never falls back to the page', async () => {
    for (const path of ['/_matrix/client/versions', '/_matrix/client/v3/sync?timeout=0', '/.well-known/matrix/client']) {
      const response = await get(path);
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ errcode: 'M_UNRECOGNIZED' });
    }
    const post = await get('/_matrix/client/v3/register', { method: 'POST', body: '{}' });
    expect(post.status).toBe(404);
    expect((await get('/no/such/page')).status).toBe(404);
  });

  it('stays inside its directory', async () => {
    for (const path of ['/..%2f..%2fetc%2fpasswd', '/assets/..%2f..%2f..%2fetc%2fpasswd', '/%2e%2e/%2e%2e/etc/passwd']) {
      expect((await get(path)).status).toBe(404);
    }
  });
});
