import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { BoundedChunks, declaredOver, mediaAnswerBytes, readBounded } from '../http/bounded-body.ts';

export interface RunningHttpServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/**
 * Bodies above this are refused before they are read, unless the host says otherwise (the API's own
 * limit on JSON is 1 MiB; media uploads are limited by m.upload.size, 8 MiB by default, and answered
 * by the core; the Node host passes its upload limit plus framing).
 */
const DEFAULT_MAX_REQUEST_BYTES = mediaAnswerBytes(8 * 1024 * 1024);

/**
 * Serves a Request → Response function over HTTP. Written on node:http rather
 * than @hono/node-server because that adaptor streams every body through a web
 * ReadableStream, which measured 1 ms more per PUT here (2.4 ms vs 1.4 ms); Matrix
 * bodies are small and bounded, so we read them whole.
 */
export async function startHttpServer(fetch: (request: Request) => Promise<Response>, port = 0, hostname = '127.0.0.1', maxRequestBytes = DEFAULT_MAX_REQUEST_BYTES): Promise<RunningHttpServer> {
  const server = createServer((req, res) => void handle(fetch, req, res, hostname, maxRequestBytes));
  // /sync long-polls outlive Node's default request timeout.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, hostname, () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://${hostname}:${address.port}`,
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** One request of a node:http(s) server through a Request → Response function, its body bounded. */
export async function handle(fetch: (request: Request) => Promise<Response>, req: IncomingMessage, res: ServerResponse, hostname: string, maxBytes: number): Promise<void> {
  try {
    const body = await readBody(req, maxBytes);
    if (body === 'too_large') {
      writeJson(res, 413, { errcode: 'M_TOO_LARGE', error: `request body exceeds ${maxBytes} bytes` });
      req.resume();
      return;
    }
    const headers: [string, string][] = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) headers.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
    const request = new Request(`http://${req.headers.host ?? hostname}${req.url ?? '/'}`, {
      method: req.method,
      headers,
      body: body.length > 0 && req.method !== 'GET' && req.method !== 'HEAD' ? body : undefined,
    });
    const response = await fetch(request);
    // Read whole, as it is when it came as one chunk (bounded-body.ts): arrayBuffer() would copy it.
    const payload = (await readBounded(response.body, Infinity)) ?? undefined;
    const outHeaders: Record<string, string | string[]> = {};
    response.headers.forEach((value, name) => {
      outHeaders[name] = value;
    });
    res.writeHead(response.status, outHeaders);
    res.end(payload);
  } catch (error) {
    if (!res.headersSent) writeJson(res, 500, { errcode: 'M_UNKNOWN', error: error instanceof Error ? error.message : String(error) });
    else res.destroy();
  }
}

/** The body, read within the bound (`src/http/bounded-body.ts`); one over it is read to its end and dropped, so the 413 can be answered. */
function readBody(req: IncomingMessage, maxBytes: number): Promise<Uint8Array<ArrayBuffer> | 'too_large'> {
  if (declaredOver(req.headers['content-length'], maxBytes)) return Promise.resolve('too_large');
  return new Promise((resolve, reject) => {
    const chunks = new BoundedChunks(maxBytes);
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      if (!chunks.add(chunk)) tooLarge = true;
    });
    req.on('end', () => resolve(tooLarge ? 'too_large' : chunks.join()));
    req.on('error', reject);
  });
}

function writeJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'access-control-allow-origin': '*' });
  res.end(JSON.stringify(body));
}
