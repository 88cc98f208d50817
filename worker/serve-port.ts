import { BodyTooLargeError, MAX_RESPONSE_BODY_BYTES, matrixErrorResponse, parseRouterMessage, responseToWire, wireToRequest, type CoreMessage, type WireResponse } from './protocol.ts';

/**
 * The core's end of a service-worker port: answers each request with the
 * handler, acknowledging receipt first (see protocol.ts). Requests run
 * concurrently; a /sync long-poll does not hold up a send.
 */
export interface ServedPort {
  /** Stops at once, aborting requests in flight. */
  close(): void;
  /** Stops once the requests in flight are answered (a newer port has replaced this one). */
  closeWhenIdle(): void;
}

export function servePort(port: MessagePort, handler: (request: Request) => Promise<Response>, log: (message: string, error?: unknown) => void = () => {}): ServedPort {
  const inFlight = new Map<number, AbortController>();
  let draining = false;

  const answer = async (id: number, request: Request) => {
    let wire: WireResponse;
    try {
      wire = await responseToWire(id, await handler(request));
    } catch (error) {
      const response =
        error instanceof BodyTooLargeError
          ? matrixErrorResponse(502, 'M_TOO_LARGE', `the response exceeds ${MAX_RESPONSE_BODY_BYTES} bytes; use a filter or pagination`)
          : matrixErrorResponse(500, 'M_UNKNOWN', error instanceof Error ? error.message : String(error));
      if (!(error instanceof BodyTooLargeError)) log(`${request.method} ${new URL(request.url).pathname} failed`, error);
      wire = await responseToWire(id, response);
    } finally {
      inFlight.delete(id);
    }
    const message: CoreMessage = { type: 'response', response: wire };
    port.postMessage(message, wire.body ? [wire.body] : []);
    if (draining && inFlight.size === 0) stop();
  };

  const refuse = async (id: number, error: string) => {
    const wire = await responseToWire(id, matrixErrorResponse(400, 'M_BAD_JSON', error));
    port.postMessage({ type: 'response', response: wire } satisfies CoreMessage, wire.body ? [wire.body] : []);
  };

  // Anything may arrive on a port (protocol.ts, parseRouterMessage): nothing a page posts may throw here.
  const onMessage = (event: MessageEvent<unknown>) => {
    const message = parseRouterMessage(event.data);
    if (!message) return;
    if (message.type === 'abort') {
      inFlight.get(message.id)?.abort();
      return;
    }
    const id = message.type === 'malformed' ? message.id : message.request.id;
    const received: CoreMessage = { type: 'received', id };
    port.postMessage(received);
    if (message.type === 'malformed') return void refuse(id, message.error);
    const controller = new AbortController();
    let request: Request;
    try {
      request = wireToRequest(message.request, controller.signal);
    } catch (error) {
      // A method, URL or header no Request takes (the service worker's own requests always make one).
      return void refuse(id, `not a request: ${error instanceof Error ? error.message : String(error)}`);
    }
    inFlight.set(id, controller);
    void answer(id, request);
  };

  const stop = () => {
    port.removeEventListener('message', onMessage as EventListener);
    port.removeEventListener('close', stop);
    for (const controller of inFlight.values()) controller.abort();
    port.close();
  };
  port.addEventListener('message', onMessage as EventListener);
  // Chromium fires 'close' when the other end goes away (the service worker was stopped).
  port.addEventListener('close', stop);
  port.start();
  return {
    close: stop,
    closeWhenIdle: () => {
      draining = true;
      if (inFlight.size === 0) stop();
    },
  };
}
