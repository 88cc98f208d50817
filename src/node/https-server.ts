/**
 * The HTTPS listener of a host with a DNS name: the client-server and the server-server API on
 * one port, as Synapse's federation listener can. Over HTTPS nothing below the request says
 * who sent it, so the federation app is told no sender: its X-Matrix signature, checked with the
 * origin's fetched key (and `destination` against our name), is the whole authentication, and
 * what does not verify is refused with 401 before anything else.
 */
import { createServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { mediaAnswerBytes } from '../http/bounded-body.ts';
import { handle, type RunningHttpServer } from './http-server.ts';

export interface HttpsServerOptions {
  /** PEM certificate chain and key (`--tls-cert`, `--tls-key`). */
  cert: string;
  key: string;
  port?: number;
  host?: string;
  maxRequestBytes?: number;
}

/** The two APIs a host serves: the client API, and the federation app with the sender the transport authenticated (none, over HTTPS). */
export interface HttpsHandlers {
  client: (request: Request) => Promise<Response>;
  federation: (request: Request, remoteServerName: string | undefined) => Promise<Response>;
}

const SERVER_SERVER = /^\/_matrix\/(federation|key)\//;

/** One Request → Response function for both APIs: server-server paths go to federation, authenticated by their signature alone. */
export function routeByApi(handlers: HttpsHandlers): (request: Request) => Promise<Response> {
  return (request) => (SERVER_SERVER.test(new URL(request.url).pathname) ? handlers.federation(request, undefined) : handlers.client(request));
}

export async function startHttpsServer(fetch: (request: Request) => Promise<Response>, options: HttpsServerOptions): Promise<RunningHttpServer> {
  const hostname = options.host ?? '127.0.0.1';
  const maxBytes = options.maxRequestBytes ?? mediaAnswerBytes(8 * 1024 * 1024);
  const server = createServer({ cert: options.cert, key: options.key }, (req, res) => void handle(fetch, req, res, hostname, maxBytes));
  // /sync long-polls outlive Node's default request timeout; idle federation connections stay for reuse.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  server.keepAliveTimeout = 60_000;
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, hostname, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://${hostname.includes(':') ? `[${hostname}]` : hostname}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
