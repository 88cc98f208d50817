import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveStatic, type StaticServer } from '../../scripts/static-server.ts';

// `npm start`'s web server: the page's files and nothing else.
let folder: string;
let root: string;
let server: StaticServer;

beforeAll(async () => {
  // The site is folder/site; beside it, a file a request must never reach.
  folder = await mkdtemp(join(tmpdir(), 'hearth-static-'));
  root = join(folder, 'site');
  await mkdir(join(root, 'assets'), { recursive: true });
  await writeFile(join(folder, 'secret.txt'), 'the secret beside the site');
  await writeFile(join(root, 'index.html'), '<!doctype html><title>Hearth</title>');
  await writeFile(join(root, 'sw.js'), 'self.addEventListener("fetch", () => {});');
  await writeFile(join(root, 'assets', 'app-abc123.js'), 'console.log(1)');
  await writeFile(join(root, 'assets', 'sql-wasm.wasm'), new Uint8Array([0, 97, 115, 109]));
  server = await serveStatic(root, 0);
});

afterAll(async () => {
  await server?.close();
  await rm(folder, { recursive: true, force: true });
});

const get = (path: string, init?: RequestInit) => fetch(server.url + path, init);

/** GET with the path sent as written: fetch's URL parser would resolve `..` and `%2e%2e` before sending. */
function getRaw(path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: '127.0.0.1', port: server.port, path, method: 'GET' }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, body }));
    });
    request.on('error', reject);
    request.end();
  });
}

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

  it('stays inside its directory, whatever path is sent as it is', async () => {
    // Reachable by its plain name only from the folder above: each path below, resolved against the
    // site the naive way (decoded, joined, normalised), names it.
    const paths = ['/../secret.txt', '/assets/../../secret.txt', '/%2e%2e/secret.txt', '/..%2fsecret.txt', '/assets/%2e%2e%2f%2e%2e%2fsecret.txt', '/.%2e/secret.txt', '/..\\secret.txt'];
    for (const path of paths) {
      const answer = await getRaw(path);
      expect([path, answer.status, answer.body.includes('secret')]).toEqual([path, 404, false]);
    }
    // A file inside the site is served to the same kind of request: the 404s above are the guard's.
    expect(await getRaw('/index.html')).toMatchObject({ status: 200 });
  });
});
