import { BodyTooLargeError, MAX_REQUEST_BODY_BYTES, matrixErrorResponse, parseCoreMessage, requestToWire, type RouterMessage, type WireRequest } from './protocol.ts';

export interface CoreRouterOptions {
  /** Asks the page that runs the core for a fresh port (answered by connect()). */
  requestPort: () => void;
  /** While requests wait for a port, ask again this often (an ask can reach a page not yet listening). */
  askIntervalMs?: number;
  /** A request that found no core for this long gets 503. */
  connectTimeoutMs?: number;
  /** A request no core has answered for this long gets 504 (default: under Chromium's 5-minute bound on a fetch event). */
  answerTimeoutMs?: number;
}

interface Link {
  port: MessagePort;
  /** Which core run this port reaches; a port from another core means this one is gone. */
  coreId: string;
  alive: boolean;
}

interface Pending {
  wire: WireRequest;
  resolve: (response: Response) => void;
  link: Link | null;
  /** The core acknowledged it: it may have acted on it. */
  received: boolean;
  queuedAt: number;
}

/** Methods that change nothing: a core may always answer them again. */
const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The PUTs the spec gives a transaction ID, which the core remembers per device: sent again, they
 * get the first answer back. Every other PUT or DELETE, applied once, answers differently the
 * second time (a media upload or `PUT /directory/room` gets 409, a deleted alias 404), so it is not
 * sent again. Checked against the spec's OpenAPI in test/unit/core-router.test.ts.
 */
const WITH_TRANSACTION_ID = [
  /^\/_matrix\/client\/[^/]+\/rooms\/[^/]+\/send\/[^/]+\/[^/]+$/,
  /^\/_matrix\/client\/[^/]+\/rooms\/[^/]+\/redact\/[^/]+\/[^/]+$/,
  /^\/_matrix\/client\/[^/]+\/sendToDevice\/[^/]+\/[^/]+$/,
  /^\/_matrix\/federation\/v1\/send\/[^/]+$/,
];

/** Whether a request the old core may have applied can be sent again to the new one without changing its answer. */
export function safeToResend(method: string, url: string): boolean {
  if (READS.has(method)) return true;
  if (method !== 'PUT') return false;
  const { pathname } = new URL(url);
  return WITH_TRANSACTION_ID.some((pattern) => pattern.test(pathname));
}

/**
 * The service worker's side: forwards requests to the core over a MessagePort.
 * The service worker may be killed whenever it idles, and the core may move to
 * another tab, so the port comes and goes: requests wait in a queue until a
 * port arrives and are never dropped on the floor.
 *
 * When a core goes away (its port closes, or a port from a different core run
 * arrives: the leader lock allows one core at a time, so the old one is gone),
 * requests it never acknowledged are sent again to the new core; acknowledged
 * ones are sent again only if repeating them gives the same answer (reads, and
 * PUTs with a transaction ID: safeToResend), and otherwise get a
 * 503 telling the client to retry, since the old core may or may not have
 * applied them.
 */
export class CoreRouter {
  private current: Link | null = null;
  private readonly links = new Set<Link>();
  private readonly queue: Pending[] = [];
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private askTimer: ReturnType<typeof setInterval> | undefined;
  private readonly askIntervalMs: number;
  private readonly connectTimeoutMs: number;
  private readonly answerTimeoutMs: number;

  constructor(private readonly options: CoreRouterOptions) {
    this.askIntervalMs = options.askIntervalMs ?? 1000;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 60_000;
    this.answerTimeoutMs = options.answerTimeoutMs ?? 270_000;
  }

  get connected(): boolean {
    return this.current !== null;
  }

  async forward(request: Request): Promise<Response> {
    let wire: WireRequest;
    try {
      wire = await requestToWire(this.nextId++, request);
    } catch (error) {
      if (error instanceof BodyTooLargeError) return matrixErrorResponse(413, 'M_TOO_LARGE', `request body exceeds ${MAX_REQUEST_BODY_BYTES} bytes`);
      throw error;
    }
    return new Promise<Response>((resolve) => {
      // A port can go dead with no `close` (Chromium 156 fires none, whoever closes it): the bound
      // ends the wait, before Chromium would end the fetch event itself and stop the service worker.
      const deadline = setTimeout(() => this.abort(entry, matrixErrorResponse(504, 'M_UNKNOWN', `the homeserver did not answer within ${this.answerTimeoutMs / 1000} s; it may or may not have applied the request`)), this.answerTimeoutMs);
      const entry: Pending = { wire, resolve: (response) => (clearTimeout(deadline), resolve(response)), link: null, received: false, queuedAt: Date.now() };
      this.pending.set(wire.id, entry);
      request.signal?.addEventListener('abort', () => this.abort(entry));
      this.dispatch(entry);
    });
  }

  /** A port to a core, from the page that runs it. */
  connect(port: MessagePort, coreId: string): void {
    const link: Link = { port, coreId, alive: true };
    port.addEventListener('message', (event: MessageEvent<unknown>) => this.onMessage(link, event.data));
    port.addEventListener('close', () => this.retire(link));
    port.start();
    this.links.add(link);
    this.current = link;
    this.stopAsking();
    // Only one core runs at a time (the leader lock): a port from another run means that one is gone.
    for (const other of [...this.links]) if (other.coreId !== coreId) this.retire(other);
    for (const entry of this.queue.splice(0)) this.dispatch(entry);
  }

  private dispatch(entry: Pending): void {
    const link = this.current;
    if (!link) {
      this.queue.push(entry);
      this.startAsking();
      return;
    }
    entry.link = link;
    entry.received = false;
    const message: RouterMessage = { type: 'request', request: entry.wire };
    // The body is not transferred: a request may have to be sent again to another core.
    link.port.postMessage(message);
  }

  /**
   * A message from the core behind `link`. Anything may arrive (a page may hand over any port;
   * protocol.ts, parseCoreMessage): nothing here throws; an answer for an id not sent on this
   * link, or a second one, is ignored; an answer no Response can be made of gives the request 502.
   */
  private onMessage(link: Link, data: unknown): void {
    const message = parseCoreMessage(data);
    const entry = message && this.pending.get(message.id);
    if (!message || !entry || entry.link !== link) return;
    if (message.type === 'received') {
      entry.received = true;
      return;
    }
    this.pending.delete(message.id);
    entry.resolve(message.type === 'response' ? message.response : matrixErrorResponse(502, 'M_UNKNOWN', `the homeserver's answer could not be used: ${message.error}`));
  }

  /** The core behind this link is gone: move its requests on. */
  private retire(link: Link): void {
    if (!link.alive) return;
    link.alive = false;
    link.port.close();
    this.links.delete(link);
    if (this.current === link) this.current = null;
    for (const entry of [...this.pending.values()]) {
      if (entry.link !== link) continue;
      entry.link = null;
      if (!entry.received || safeToResend(entry.wire.method, entry.wire.url)) {
        this.dispatch(entry);
      } else {
        this.pending.delete(entry.wire.id);
        entry.resolve(
          matrixErrorResponse(503, 'M_UNKNOWN', 'the homeserver restarted while handling this request; it may or may not have been applied, retry it', { 'retry-after': '1' }),
        );
      }
    }
  }

  private abort(entry: Pending, answer = matrixErrorResponse(499, 'M_UNKNOWN', 'the request was aborted')): void {
    if (!this.pending.delete(entry.wire.id)) return;
    const queued = this.queue.indexOf(entry);
    if (queued >= 0) this.queue.splice(queued, 1);
    if (entry.link?.alive) {
      const message: RouterMessage = { type: 'abort', id: entry.wire.id };
      entry.link.port.postMessage(message);
    }
    entry.resolve(answer);
  }

  private startAsking(): void {
    if (this.askTimer !== undefined) return;
    this.options.requestPort();
    this.askTimer = setInterval(() => {
      this.expireQueued();
      if (this.queue.length === 0) this.stopAsking();
      else this.options.requestPort();
    }, this.askIntervalMs);
  }

  private stopAsking(): void {
    clearInterval(this.askTimer);
    this.askTimer = undefined;
  }

  private expireQueued(): void {
    const now = Date.now();
    for (let i = this.queue.length - 1; i >= 0; i--) {
      const entry = this.queue[i]!;
      if (now - entry.queuedAt < this.connectTimeoutMs) continue;
      this.queue.splice(i, 1);
      this.pending.delete(entry.wire.id);
      entry.resolve(matrixErrorResponse(503, 'M_UNKNOWN', 'the homeserver is not running: open the Hearth page to start it', { 'retry-after': '5' }));
    }
  }
}
