/**
 * HTTP over libp2p streams, as the libp2p HTTP spec has it: protocol `/http/1.1`,
 * one request and its response per stream. @libp2p/http-fetch writes requests and
 * parses responses, @libp2p/http-utils parses request heads and writes responses;
 * what is written here is what they leave out: size bounds, deadlines, and who the
 * sender is (from the connection's peer ID, never from the Host header).
 */
import { HTTPParser } from '@achingbrain/http-parser-js';
import { fetch as fetchOverStream } from '@libp2p/http-fetch';
import { readHeaders, responseToStream, type HeaderInfo } from '@libp2p/http-utils';
import type { AbortOptions, Connection, PeerId, Stream, StreamHandler } from '@libp2p/interface';
import { FederationUnreachable, type FederationTransport } from '../federation/transport.ts';
import { BodyTooLargeError, bodyOver, readBounded, readRequestBounded } from '../http/bounded-body.ts';
import { peerIdFromServerName, serverNameFromPeerId } from './identity.ts';

export const HTTP_PROTOCOL = '/http/1.1';

export interface HttpLimits {
  /** The largest request body served or sent, in bytes. */
  maxRequestBytes: number;
  /** The largest response body accepted, in bytes. */
  maxResponseBytes: number;
  /** One deadline for a whole exchange: dial, request, handler, response. */
  timeoutMs: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  maxRequestBytes: 4 * 1024 * 1024,
  maxResponseBytes: 4 * 1024 * 1024,
  timeoutMs: 30_000,
};

/** The core's inbound entry: a request and the server name its connection authenticated. */
export type InboundFederationHandler = (request: Request, remoteServerName: string) => Promise<Response>;

/** The part of a libp2p node the client side needs. */
export interface StreamDialer {
  /** An open connection to the peer (libp2p reuses an unlimited one, direct first) or a new one. */
  dial(peer: PeerId, options?: AbortOptions): Promise<Connection>;
}

export class ResponseTooLarge extends Error {
  override name = 'ResponseTooLarge';
}

function matrixError(status: number, errcode: string, error: string): Response {
  return new Response(JSON.stringify({ errcode, error }), { status, headers: { 'content-type': 'application/json' } });
}

/** An AbortSignal that fires after `ms`, or when `parent` does; `clear` drops the timer. */
function deadline(ms: number, parent?: AbortSignal): { signal: AbortSignal; clear(): void } {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new DOMException(`no answer within ${ms} ms`, 'TimeoutError')), ms);
  const onParentAbort = () => controller.abort(parent!.reason);
  if (parent?.aborted) onParentAbort();
  parent?.addEventListener('abort', onParentAbort, { once: true });
  return {
    signal: controller.signal,
    clear() {
      clearTimeout(timer);
      parent?.removeEventListener('abort', onParentAbort);
    },
  };
}

const asError = (reason: unknown): Error => (reason instanceof Error ? reason : new Error(String(reason)));

/** Runs `work`, aborting `stream` (which ends any read or write on it) when `signal` fires. */
async function abortingStreamOn<T>(stream: Stream, signal: AbortSignal, work: () => Promise<T>): Promise<T> {
  const onAbort = () => stream.abort(asError(signal.reason));
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await work();
  } catch (error) {
    stream.abort(asError(error));
    throw signal.aborted ? signal.reason : error;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * A promise that rejects when the stream ends before we are done with it: reset,
 * aborted, or closed cleanly with the response still incomplete (http-fetch then
 * leaves its body pending forever, so without this a truncated response would
 * wait for the deadline).
 */
function streamFailure(stream: Stream, signal: AbortSignal): { failed: Promise<never>; dispose(): void } {
  let onClose: (event: Event) => void = () => {};
  let onAbort: () => void = () => {};
  let timer: ReturnType<typeof setTimeout> | undefined;
  const failed = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    onClose = (event) => {
      const error = (event as Event & { error?: Error }).error;
      if (error) reject(error);
      // A clean close may come just before the last bytes are handed to the body reader.
      else timer = setTimeout(() => reject(new Error('the stream closed before the response was complete')), 0);
    };
  });
  failed.catch(() => {});
  stream.addEventListener('close', onClose);
  signal.addEventListener('abort', onAbort, { once: true });
  return {
    failed,
    dispose() {
      stream.removeEventListener('close', onClose);
      signal.removeEventListener('abort', onAbort);
      clearTimeout(timer);
    },
  };
}

// ---------------------------------------------------------------- server side

/**
 * The `/http/1.1` stream handler: reads one request, hands it to `handler` with the
 * remote peer's server name, writes the response.
 */
export function serveHttp(handler: InboundFederationHandler, options: { localServerName: string; limits?: Partial<HttpLimits>; log?: (message: string, error?: unknown) => void }): StreamHandler {
  const limits = { ...DEFAULT_HTTP_LIMITS, ...options.limits };
  return async (stream, connection) => {
    const remoteServerName = serverNameFromPeerId(connection.remotePeer);
    if (remoteServerName === undefined) {
      stream.abort(new Error('Hearth federation speaks only with Ed25519 peers'));
      return;
    }
    const { signal, clear } = deadline(limits.timeoutMs);
    try {
      await abortingStreamOn(stream, signal, async () => {
        const response = await answer(stream, handler, remoteServerName, options.localServerName, limits, signal);
        // One request per stream: whatever else the peer sends (an oversized body we refused) is dropped unread.
        await stream.closeRead();
        await responseToStream(await withContentLength(response), stream);
      });
    } catch (error) {
      options.log?.(`federation request from ${remoteServerName} failed`, error);
    } finally {
      clear();
    }
  };
}

async function answer(stream: Stream, handler: InboundFederationHandler, remoteServerName: string, localServerName: string, limits: HttpLimits, signal: AbortSignal): Promise<Response> {
  const head = await readHeaders(stream, { signal });
  if (!head.url.startsWith('/')) return matrixError(400, 'M_UNRECOGNIZED', 'the request target must be a path');
  // http-utils would pass a chunked body through undecoded; our client always sends a Content-Length.
  if (head.headers.has('transfer-encoding')) return matrixError(411, 'M_UNKNOWN', 'send a Content-Length, not a chunked body');
  const length = Number(head.headers.get('content-length') ?? 0);
  if (!Number.isSafeInteger(length) || length < 0) return matrixError(400, 'M_UNKNOWN', 'bad Content-Length');
  if (length > limits.maxRequestBytes) return matrixError(413, 'M_TOO_LARGE', `request body exceeds ${limits.maxRequestBytes} bytes`);
  // The body is read whole before the handler runs, so nothing of a refused request reaches it.
  // (http-utils' streamToRequest would stream it, loses what readHeaders swallowed (below), and
  // waits for a chunk even when Content-Length is 0.)
  const body = length > 0 ? await readBody(stream, length, bodyReadWithHead(head)) : undefined;
  // The Host header is the peer's to choose; the URL names us, and the sender is the connection's peer.
  const request = new Request(`http://${localServerName}${head.url}`, { method: head.method, headers: head.headers, body, signal });
  try {
    return await handler(request, remoteServerName);
  } catch (error) {
    return matrixError(500, 'M_UNKNOWN', error instanceof Error ? error.message : String(error));
  }
}

/**
 * http-utils 2.0.6's readHeaders lets its parser run on into the body when body bytes come in
 * the same chunk as the head, and pushes back onto the stream only what the parser left over:
 * those body bytes are gone from the stream, but kept in `head.raw` after the blank line.
 */
function bodyReadWithHead(head: HeaderInfo): Uint8Array {
  const raw = head.raw.subarray();
  for (let i = 0; i + 3 < raw.byteLength; i++) {
    if (raw[i] === 13 && raw[i + 1] === 10 && raw[i + 2] === 13 && raw[i + 3] === 10) return raw.subarray(i + 4);
  }
  return new Uint8Array(0);
}

async function readBody(stream: Stream, length: number, start: Uint8Array): Promise<Uint8Array<ArrayBuffer>> {
  const body = new Uint8Array(length);
  let offset = 0;
  const take = (chunk: Uint8Array) => {
    const bytes = chunk.subarray(0, length - offset);
    body.set(bytes, offset);
    offset += bytes.byteLength;
  };
  take(start);
  if (offset === length) return body;
  for await (const chunk of stream) {
    take(chunk.subarray());
    if (offset === length) return body;
  }
  throw new Error(`the request body ended after ${offset} of ${length} bytes`);
}

/** Buffers the body so the response carries a Content-Length: the client can refuse an oversized one unread. */
async function withContentLength(response: Response): Promise<Response> {
  if (response.body === null) return response;
  const body = new Uint8Array(await response.arrayBuffer());
  const headers = new Headers(response.headers);
  headers.set('content-length', String(body.byteLength));
  return new Response(body, { status: response.status, statusText: response.statusText, headers });
}

// ---------------------------------------------------------------- client side

/**
 * http-fetch 4.0.4 writes only `url.pathname` into the request line, which would drop
 * the query string federation routes use (`/backfill?v=…&limit=…`).
 */
class RequestTarget extends URL {
  override get pathname(): string {
    return super.pathname + this.search;
  }
}

/**
 * http-fetch 4.0.4 reads responses with http-parser-js 0.5.9, which counts what follows
 * the end of a message in a chunk against its header limit, and resets that limit to
 * the library-wide default once the message is complete (`reinitialize`), so the
 * per-request `maxHeaderSize` does not hold: a response whose last chunk exceeds
 * 80 KiB (a join's state, a backfill) fails although it arrived whole. The only lever
 * is the library-wide default; we raise it to our own response bound (readResponse
 * below enforces that), and headers stay far below it in practice.
 */
function allowResponsesOf(bytes: number): void {
  const limit = bytes + 64 * 1024;
  if (HTTPParser.maxHeaderSize < limit) HTTPParser.maxHeaderSize = limit;
}

export function createHttpTransport(
  dialer: StreamDialer,
  options: {
    limits?: Partial<HttpLimits>;
    runOnLimitedConnection?: boolean;
    /** Runs before each stream is opened: the node opens a direct (WebRTC) link here if it has only a relayed one. Failures are its own: the stream then goes over what there is. */
    beforeDial?(peer: PeerId, signal: AbortSignal): Promise<void>;
    /** A request is outstanding on `connection` until the function it returns is called (stall-watch.ts). */
    track?(connection: Connection): () => void;
  } = {},
): FederationTransport {
  const limits = { ...DEFAULT_HTTP_LIMITS, ...options.limits };
  allowResponsesOf(limits.maxResponseBytes);
  return {
    async send(destination, request, { signal: callerSignal, maxResponseBytes = limits.maxResponseBytes } = {}) {
      const peerId = peerIdFromServerName(destination);
      if (!peerId) throw new FederationUnreachable(destination, `${destination} is not a Hearth server name`);
      // Not `request.body === null`: Firefox's Request has no `body` at all, and a GET would go with an empty one.
      const body = (await readRequestBounded(request, Infinity)) ?? undefined;
      if (body && body.byteLength > limits.maxRequestBytes) throw new RangeError(`request body of ${body.byteLength} bytes exceeds ${limits.maxRequestBytes}`);
      const { signal, clear } = deadline(limits.timeoutMs, callerSignal);
      let untrack: (() => void) | undefined;
      try {
        let stream: Stream;
        try {
          await options.beforeDial?.(peerId, signal).catch(() => {});
          const open = async () => {
            const connection = await dialer.dial(peerId, { signal });
            untrack?.();
            untrack = options.track?.(connection);
            try {
              return await connection.newStream(HTTP_PROTOCOL, { signal, runOnLimitedConnection: options.runOnLimitedConnection });
            } catch (error) {
              // A WebRTC link on which no stream opens is dead, though it may look open for a while yet
              // (seen on a busy machine: the dialler gave up mid-setup, the other side kept the link).
              // Drop it, so the retry below dials anew rather than picking it again.
              if (!signal.aborted && connection.remoteAddr.toString().includes('/webrtc')) connection.abort(asError(error));
              throw error;
            }
          };
          // Once more on failure: a stream can fail to open on a connection that is going away.
          stream = await open().catch((error) => {
            if (signal.aborted) throw error;
            return open();
          });
        } catch (error) {
          if (signal.aborted) throw signal.reason;
          throw new FederationUnreachable(destination, `cannot reach ${destination}: ${asError(error).message}`);
        }
        allowResponsesOf(maxResponseBytes);
        return await exchange(stream, request, body, maxResponseBytes, signal);
      } finally {
        untrack?.();
        clear();
      }
    },
  };
}

async function exchange(stream: Stream, request: Request, body: Uint8Array<ArrayBuffer> | undefined, maxResponseBytes: number, signal: AbortSignal): Promise<Response> {
  const { failed, dispose } = streamFailure(stream, signal);
  try {
    return await abortingStreamOn(stream, signal, async () => {
      const response = await Promise.race([
        fetchOverStream(stream, new RequestTarget(request.url), {
          method: request.method,
          headers: request.headers,
          // As a Blob, the body keeps its Content-Type: http-fetch labels bytes and strings with its own.
          body: body && new Blob([body], { type: request.headers.get('content-type') ?? '' }),
        }),
        failed,
      ]);
      const declared = Number(response.headers.get('content-length') ?? 0);
      if (declared > maxResponseBytes) throw new ResponseTooLarge(`response of ${declared} bytes exceeds ${maxResponseBytes}`);
      const payload = await Promise.race([readResponse(response.body, maxResponseBytes), failed]);
      return new Response(payload && bodyOver(payload), { status: response.status, statusText: response.statusText, headers: response.headers });
    });
  } finally {
    dispose();
  }
}

async function readResponse(body: ReadableStream<Uint8Array> | null, max: number): Promise<Uint8Array<ArrayBuffer> | null> {
  try {
    return await readBounded(body, max);
  } catch (error) {
    if (error instanceof BodyTooLargeError) throw new ResponseTooLarge(`response body exceeds ${max} bytes`);
    throw error;
  }
}
