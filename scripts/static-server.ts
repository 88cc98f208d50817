import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { extname, resolve } from 'node:path';
import sirv from 'sirv';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.webmanifest': 'application/manifest+json',
  // application/wasm lets the browser compile sql.js while it downloads.
  '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  // The page's emoji font (src/ui/style.css).
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.map': 'application/json',
};

export interface StaticServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/**
 * Serves the built page and nothing else. The homeserver's API is answered by
 * the service worker inside the browser; a request for it that reaches this
 * server (no service worker yet, or a client pointed here from outside) gets a
 * Matrix-shaped 404, never the page, so nobody mistakes this server for the
 * homeserver.
 */
export interface StaticServerOptions {
  /**
   * Served as `/hearth-config.json` (the page's bootstrap peers and ICE servers;
   * worker/page-p2p.ts reads it). Absent: that path is a file like any other, so
   * a deployment can ship one in the build, or have none (no bootstrap peers).
   */
  config?: unknown;
  /** Read at each request instead of `config` (a test that changes the site's config between visits). */
  configOf?: () => unknown;
  /**
   * Serve the site under this path (`/hearth/app`), as a static host with other things beside it
   * would: the page is `<prefix>/`, the config `<prefix>/hearth-config.json`, and `<prefix>` alone
   * redirects there. Default: the root.
   */
  prefix?: string;
  /** PEM certificate chain and key: serve HTTPS (the page must be a secure origin anywhere but on 127.0.0.1). */
  tls?: { cert: string; key: string };
  /** The name in the URL this answers with (a DNS name the certificate is for); default the host listened on. */
  publicHost?: string;
}

export async function serveStatic(root: string, port = 0, host = '127.0.0.1', options: StaticServerOptions = {}): Promise<StaticServer> {
  const base = resolve(root);
  const configText = options.config === undefined ? undefined : JSON.stringify(options.config);
  const prefix = (options.prefix ?? '').replace(/\/+$/, '');
  if (prefix !== '' && !/^(\/[\w.-]+)+$/.test(prefix)) throw new Error(`a path prefix is /segment[/segment…], not ${options.prefix}`);
  // The files, by sirv: it lists the folder once at start and serves only what it listed, so no
  // request path (`..`, encoded or not) can reach outside it. The build does not change while
  // served (a test that changes it starts the server again).
  const files = sirv(base, {
    extensions: ['html'],
    setHeaders: (response, pathname) => {
      // Our types (with their charset), not sirv's: a path with no extension was served as its .html.
      const extension = extname(pathname);
      response.setHeader('content-type', TYPES[extension || '.html'] ?? 'application/octet-stream');
      // Hashed build assets never change; the page and the service worker must be revalidated.
      response.setHeader('cache-control', pathname.startsWith('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache');
      response.setHeader('x-content-type-options', 'nosniff');
    },
  });
  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    try {
      const fullPath = decodeURIComponent(new URL(request.url ?? '/', 'http://localhost').pathname);
      if (fullPath.startsWith('/_matrix/') || fullPath === '/_matrix' || fullPath.startsWith('/.well-known/matrix/')) {
        return sendJson(response, 404, {
          errcode: 'M_UNRECOGNIZED',
          error: 'This web server only serves the Hearth page; the homeserver runs inside the page, in your browser. Open / first.',
        });
      }
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        response.writeHead(405, { allow: 'GET, HEAD' }).end();
        return;
      }
      if (prefix !== '' && fullPath === prefix) return void response.writeHead(301, { location: `${prefix}/` }).end();
      if (!fullPath.startsWith(`${prefix}/`)) return notFound(response);
      const pathname = fullPath.slice(prefix.length);
      const configNow = options.configOf ? JSON.stringify(options.configOf()) : configText;
      if (pathname === '/hearth-config.json' && configNow !== undefined) {
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(configNow), 'cache-control': 'no-cache' });
        return void response.end(request.method === 'HEAD' ? undefined : configNow);
      }
      // sirv reads the path from the request itself: give it the path under the prefix, as sent.
      const sent = request.url ?? '/';
      if (!sent.startsWith(`${prefix}/`)) return notFound(response);
      request.url = sent.slice(prefix.length);
      files(request, response, () => notFound(response));
    } catch {
      notFound(response);
    }
  };
  const server: Server = options.tls ? createHttpsServer({ cert: options.tls.cert, key: options.tls.key }, handle) : createServer(handle);
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolveListen());
  });
  const address = server.address() as AddressInfo;
  const scheme = options.tls ? 'https' : 'http';
  const defaultPort = options.tls ? 443 : 80;
  return {
    // The page's folder without its trailing slash: `${url}/` is the page.
    url: `${scheme}://${options.publicHost ?? host}${address.port === defaultPort ? '' : `:${address.port}`}${prefix}`,
    port: address.port,
    close: () =>
      new Promise<void>((resolveClose) => {
        server.closeAllConnections();
        server.close(() => resolveClose());
      }),
  };
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

function notFound(response: ServerResponse): void {
  response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Not found');
}
