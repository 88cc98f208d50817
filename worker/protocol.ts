/**
 * The wire format between the service worker (which receives fetches) and the
 * homeserver core in the Web Worker, over a MessagePort. One message carries a
 * whole request or response; bodies travel as transferred ArrayBuffers (no
 * copy) and are bounded in size, so a runaway body fails fast with a Matrix
 * error instead of exhausting memory in either worker.
 *
 * The core acknowledges each request the moment it arrives. That lets the
 * service worker tell, when a core dies, which requests never reached it (safe
 * to send again, whatever the method) from those it may have acted on.
 */
import { BodyTooLargeError, readBounded, readRequestBounded } from '../src/http/bounded-body.ts';

export { BodyTooLargeError };

/**
 * Request bodies above this are refused with 413 before they leave the service
 * worker. It sits above the core's own limit on JSON bodies (1 MiB) so the core,
 * which knows each endpoint, gives the precise answer for sizes in between.
 */
export const MAX_REQUEST_BODY_BYTES = 8 * 1024 * 1024;

/** Responses above this become a 502 instead: a /sync of a huge account should use filters. */
export const MAX_RESPONSE_BODY_BYTES = 64 * 1024 * 1024;

export type HeaderList = [name: string, value: string][];

export interface WireRequest {
  id: number;
  method: string;
  url: string;
  headers: HeaderList;
  body: ArrayBuffer | null;
}

export interface WireResponse {
  id: number;
  status: number;
  statusText: string;
  headers: HeaderList;
  body: ArrayBuffer | null;
}

/** Service worker → core. */
export type RouterMessage = { type: 'request'; request: WireRequest } | { type: 'abort'; id: number };

/** Core → service worker. */
export type CoreMessage = { type: 'received'; id: number } | { type: 'response'; response: WireResponse };

/** Page ↔ service worker control messages (postMessage on the ServiceWorker / Client). */
export type PageToServiceWorker = { type: 'hearth-core-port'; coreId: string; port: MessagePort } | { type: 'hearth-claim' };
export type ServiceWorkerToPage = { type: 'hearth-need-port' };

/**
 * What a message on the core's port is, checked (ports carry whatever a page posts: the core
 * must not throw on it). A request whose `id` is an integer is answered: when its fields are
 * not those of a WireRequest, with 400 M_BAD_JSON (`malformed`); a message with no such id
 * cannot be answered, and is ignored (undefined), as is an abort of no integer id.
 */
export type ParsedRouterMessage = RouterMessage | { type: 'malformed'; id: number; error: string };

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;
const isHeaderList = (value: unknown): value is HeaderList => Array.isArray(value) && value.every((h) => Array.isArray(h) && h.length === 2 && typeof h[0] === 'string' && typeof h[1] === 'string');

export function parseRouterMessage(data: unknown): ParsedRouterMessage | undefined {
  if (!isObject(data)) return undefined;
  if (data['type'] === 'abort') return Number.isSafeInteger(data['id']) ? { type: 'abort', id: data['id'] as number } : undefined;
  const request = data['request'];
  if (data['type'] !== 'request' || !isObject(request) || !Number.isSafeInteger(request['id'])) return undefined;
  const id = request['id'] as number;
  const { method, url, headers, body } = request;
  if (typeof method !== 'string' || typeof url !== 'string' || !isHeaderList(headers) || !(body === null || body instanceof ArrayBuffer)) {
    return { type: 'malformed', id, error: 'a request on the core port needs a string method and url, [name, value] string headers and an ArrayBuffer or null body' };
  }
  return { type: 'request', request: { id, method, url, headers, body } };
}

/**
 * What a message on the service worker's port from the core is, checked (the core's own answers
 * always are whole, but a page may hand the service worker any port): an acknowledgement, a
 * response, or (`unusable`) a response with an integer id whose fields no Response takes, which
 * the service worker answers with 502; anything else has no id to answer and is ignored (undefined).
 */
export type ParsedCoreMessage = { type: 'received'; id: number } | { type: 'response'; id: number; response: Response } | { type: 'unusable'; id: number; error: string };

export function parseCoreMessage(data: unknown): ParsedCoreMessage | undefined {
  if (!isObject(data)) return undefined;
  if (data['type'] === 'received') return Number.isSafeInteger(data['id']) ? { type: 'received', id: data['id'] as number } : undefined;
  const wire = data['response'];
  if (data['type'] !== 'response' || !isObject(wire) || !Number.isSafeInteger(wire['id'])) return undefined;
  const id = wire['id'] as number;
  const { status, statusText, headers, body } = wire;
  // Response takes statuses 200–599 only (a 1xx is never a final answer), and would coerce a body of any other type to text.
  const typed =
    Number.isSafeInteger(status) && (status as number) >= 200 && (status as number) <= 599 && typeof statusText === 'string' && isHeaderList(headers) && (body === null || body instanceof ArrayBuffer);
  if (!typed) return { type: 'unusable', id, error: 'an answer needs an integer status from 200 to 599, a string status text, [name, value] string headers and an ArrayBuffer or null body' };
  try {
    return { type: 'response', id, response: wireToResponse({ id, status: status as number, statusText, headers, body }) };
  } catch (error) {
    // A status text or header no Response takes.
    return { type: 'unusable', id, error: error instanceof Error ? error.message : String(error) };
  }
}

/** Reads a body into one ArrayBuffer within a bound (BodyTooLargeError past it). */
async function readBoundedBuffer(body: ReadableStream<Uint8Array> | null, declaredLength: string | null, limit: number): Promise<ArrayBuffer | null> {
  return (await readBounded(body, limit, declaredLength))?.buffer ?? null;
}

export function headerList(headers: Headers): HeaderList {
  return [...headers.entries()];
}

export async function requestToWire(id: number, request: Request): Promise<WireRequest> {
  // Not `request.body`: Firefox's Request has none (bounded-body.ts, readRequestBounded).
  const body = request.method === 'GET' || request.method === 'HEAD' ? null : ((await readRequestBounded(request, MAX_REQUEST_BODY_BYTES))?.buffer ?? null);
  return { id, method: request.method, url: request.url, headers: headerList(request.headers), body };
}

export function wireToRequest(wire: WireRequest, signal?: AbortSignal): Request {
  return new Request(wire.url, { method: wire.method, headers: wire.headers, body: wire.body, signal });
}

export async function responseToWire(id: number, response: Response): Promise<WireResponse> {
  const body = await readBoundedBuffer(response.body, response.headers.get('content-length'), MAX_RESPONSE_BODY_BYTES);
  return { id, status: response.status, statusText: response.statusText, headers: headerList(response.headers), body };
}

const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

export function wireToResponse(wire: WireResponse): Response {
  const body = NULL_BODY_STATUSES.has(wire.status) ? null : wire.body;
  return new Response(body, { status: wire.status, statusText: wire.statusText, headers: wire.headers });
}

/** A Matrix error response built outside the core (the core may be unreachable). */
export function matrixErrorResponse(status: number, errcode: string, error: string, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ errcode, error }), {
    status,
    headers: { 'content-type': 'application/json', 'access-control-allow-origin': '*', ...headers },
  });
}

/** Paths the homeserver answers; everything else goes to the network as usual. */
export function isHomeserverPath(pathname: string): boolean {
  return pathname.startsWith('/_matrix/') || pathname === '/.well-known/matrix/client';
}
