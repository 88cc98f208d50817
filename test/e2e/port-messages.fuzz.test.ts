import fc from 'fast-check';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { fuzzParameters, fuzzTimeout } from '../support/fuzz.ts';
import { openHearth, pageFetch, startSite, type HearthSite } from './hearth-page.ts';

// Fuzzing the browser host's MessagePort messages in Chromium (issue 24), against the real
// service worker and core Worker of the built page:
// - page → service worker (`navigator.serviceWorker.controller.postMessage`, sw.ts): messages that
//   are not a well-formed `hearth-core-port` (a string core ID and a MessagePort) or `hearth-claim`
//   are ignored: afterwards the page's requests still reach the same core;
// - service worker → core (the port `connect` serves, serve-port.ts): a request message with an
//   integer `id` is answered, a malformed one (fields of the wrong type, a URL, method or headers
//   no Request accepts) with 400 M_BAD_JSON; anything without such an id is ignored; every answer
//   of 400 or more is a Matrix error; a valid request on the same port is answered afterwards.
// - core → service worker (core-router.ts), below: answers the service worker cannot use give the
//   page 502 M_UNKNOWN, stray and second answers are ignored, later requests work.
// Messages are described in JSON (Playwright carries that) and built in the page: `{ $port: 1 }`
// is a new MessagePort (transferred), `{ $buffer: [bytes] }` an ArrayBuffer.

let site: HearthSite;
let context: BrowserContext;
let page: Page;
/** Uncaught errors of the page and its workers (a Worker's reach the page as its `error` events). */
const errors: string[] = [];

beforeAll(async () => {
  site = await startSite(inject('hearthDist'));
  context = await site.browser.newContext();
  // Keeps the core's Worker where the test can reach it: the page holds it only inside comlink.
  await context.addInitScript(() => {
    const Native = globalThis.Worker;
    globalThis.Worker = class extends Native {
      constructor(url: string | URL, options?: WorkerOptions) {
        super(url, options);
        if (options?.name === 'hearth-core') (globalThis as any).hearthCoreWorker = this;
      }
    };
  });
  page = await openHearth(context, site.server.url + '/');
  page.on('pageerror', (error) => errors.push(error.message));
});

afterAll(async () => {
  await context?.close();
  await site?.close();
});

type Json = unknown;
const value: fc.Arbitrary<Json> = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constant(undefined), fc.constant({ $port: 1 }), fc.uint8Array({ maxLength: 16 }).map((b) => ({ $buffer: [...b] })));

/** Each key of `valid` kept, dropped or replaced by something arbitrary. */
function mutated(valid: Record<string, fc.Arbitrary<Json>>): fc.Arbitrary<Record<string, Json>> {
  return fc.record(Object.fromEntries(Object.entries(valid).map(([key, good]) => [key, fc.oneof({ weight: 3, arbitrary: good }, { weight: 1, arbitrary: value })])), { requiredKeys: [] });
}

// ------------------------------------------------------------------ page → service worker

const toServiceWorker = fc.oneof(
  value,
  mutated({ type: fc.constantFrom('hearth-core-port', 'hearth-claim', 'hearth-need-port'), coreId: fc.string(), port: fc.constant({ $port: 1 }) })
    // A well-formed hand-over of a port is not malformed: it replaces the core, as documented.
    .filter((m) => !(m['type'] === 'hearth-core-port' && typeof m['coreId'] === 'string' && (m['port'] as any)?.$port === 1)),
);

const postToServiceWorker = (messages: Json[]) =>
  page.evaluate((messages) => {
    const build = (v: any): any => (v?.$port === 1 ? new MessageChannel().port2 : Array.isArray(v?.$buffer) ? new Uint8Array(v.$buffer).buffer : v);
    for (const described of messages as any[]) {
      const message = build(described);
      const fields = message && typeof message === 'object' && !Array.isArray(message) && !(message instanceof ArrayBuffer) && !(message instanceof MessagePort) ? Object.fromEntries(Object.entries(message).map(([k, v]) => [k, build(v)])) : message;
      const transfer = [fields, ...(fields && typeof fields === 'object' ? Object.values(fields) : [])].filter((x) => x instanceof MessagePort);
      navigator.serviceWorker.controller!.postMessage(fields, transfer as Transferable[]);
    }
  }, messages);

// ------------------------------------------------------------------ service worker → core

const METHODS = ['GET', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH', 'get', 'TRACE', 'CONNECT', 'G ET', ''];
const PATHS = ['/_matrix/client/versions', '/_matrix/client/v3/register', '/_matrix/client/v3/sync?timeout=0', '/_matrix/client/v3/account/whoami', '/_matrix/key/v2/server', '/nothing', 'http://[::1', 'not a url', '//x'];
const wireRequest = mutated({
  id: fc.constant('fresh'),
  method: fc.constantFrom(...METHODS),
  url: fc.constantFrom(...PATHS),
  headers: fc.array(fc.tuple(fc.constantFrom('content-type', 'authorization', 'x-a', 'bad name', ''), fc.oneof(fc.constant('application/json'), fc.string({ maxLength: 8 }))), { maxLength: 3 }),
  body: fc.oneof(fc.constant(null), fc.jsonValue({ maxDepth: 1 }).map((v) => ({ $buffer: [...new TextEncoder().encode(JSON.stringify(v))] }))),
});
const toCore = fc.oneof(
  { weight: 1, arbitrary: value },
  { weight: 1, arbitrary: mutated({ type: fc.constantFrom('abort', 'request'), id: fc.oneof(fc.integer({ min: -5, max: 5 }), value) }) },
  { weight: 4, arbitrary: fc.record({ type: fc.oneof({ weight: 5, arbitrary: fc.constant('request') }, { weight: 1, arbitrary: value }), request: fc.oneof({ weight: 5, arbitrary: wireRequest }, { weight: 1, arbitrary: value }) }, { requiredKeys: [] }) },
);

interface Outcome {
  /** What the documented protocol says of each message, in the page's own terms. */
  expected: ('answered' | 'malformed' | 'ignored')[];
  /** HEAD requests: their answers carry no body, a Matrix error's neither. */
  head: boolean[];
  answers: ({ status: number; body: string } | undefined)[];
  valid: { status: number; body: string };
  /** Answers that came for messages that should have been ignored, or twice. */
  unexpected: number;
}

/** Connects a port of the page's own to the core, as the page hands one to the service worker. */
const connectFuzzPort = () =>
  page.evaluate(() => {
    const { port1, port2 } = new MessageChannel();
    const g = globalThis as any;
    g.fuzzPort = port2;
    g.fuzzAnswers = new Map<number, { status: number; body: string }[]>();
    g.fuzzWaiters = new Map<number, () => void>();
    port2.onmessage = (event: MessageEvent) => {
      const m = event.data;
      if (m?.type !== 'response') return;
      const list = g.fuzzAnswers.get(m.response.id) ?? [];
      list.push({ status: m.response.status, body: m.response.body ? new TextDecoder().decode(m.response.body) : '' });
      g.fuzzAnswers.set(m.response.id, list);
      g.fuzzWaiters.get(m.response.id)?.();
    };
    // comlink's own wire format (comlink 4): the core's `connect(port)`, the port transferred.
    g.hearthCoreWorker.postMessage({ id: 'fuzz-connect', type: 'APPLY', path: ['connect'], argumentList: [{ type: 'RAW', value: port1 }] }, [port1]);
  });

const postToCore = (messages: Json[], validId: number): Promise<Outcome> =>
  page.evaluate(async ({ messages, validId }) => {
    const g = globalThis as any;
    const build = (v: any): any => (v?.$port === 1 ? new MessageChannel().port2 : Array.isArray(v?.$buffer) ? new Uint8Array(v.$buffer).buffer : v);
    const plain = (v: unknown): v is Record<string, any> => typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof ArrayBuffer) && !(v instanceof MessagePort);
    const until = (id: number) => new Promise<void>((resolve) => (g.fuzzAnswers.has(id) ? resolve() : g.fuzzWaiters.set(id, resolve)));
    const expected: Outcome['expected'] = [];
    const head: boolean[] = [];
    const ids: (number | undefined)[] = [];
    for (const described of messages as any[]) {
      const message = plain(described) ? Object.fromEntries(Object.entries(described).map(([k, v]) => [k, plain(v) && !('$port' in v) && !('$buffer' in v) ? Object.fromEntries(Object.entries(v).map(([k2, v2]) => [k2, build(v2)])) : build(v)])) : build(described);
      let id: number | undefined;
      if (plain(message) && message['type'] === 'request' && plain(message['request']) && message['request']['id'] === 'fresh') message['request']['id'] = id = g.fuzzNextId = (g.fuzzNextId ?? 0) + 1;
      const request = plain(message) ? message['request'] : undefined;
      let verdict: Outcome['expected'][number] = 'ignored';
      if (plain(message) && message['type'] === 'request' && plain(request) && Number.isSafeInteger(request['id'])) {
        const { method, url, headers, body } = request;
        const typed = typeof method === 'string' && typeof url === 'string' && Array.isArray(headers) && headers.every((h) => Array.isArray(h) && h.length === 2 && h.every((x) => typeof x === 'string')) && (body === null || body instanceof ArrayBuffer);
        let constructs = false;
        try {
          new Request(new URL(url, location.origin), { method, headers, body });
          constructs = true;
        } catch {
          // a Request the core cannot make either
        }
        verdict = typed && constructs ? 'answered' : 'malformed';
      }
      expected.push(verdict);
      head.push(typeof request?.['method'] === 'string' && request['method'].toUpperCase() === 'HEAD');
      ids.push(id);
      const inside = (v: unknown): unknown[] => [v, ...(plain(v) ? Object.values(v).flatMap(inside) : [])];
      g.fuzzPort.postMessage(message, inside(message).filter((x) => x instanceof MessagePort) as Transferable[]);
    }
    const validRequest = { id: validId, method: 'GET', url: `${location.origin}/_matrix/client/versions`, headers: [], body: null };
    g.fuzzPort.postMessage({ type: 'request', request: validRequest });
    await until(validId);
    for (const [i, id] of ids.entries()) if (id !== undefined && expected[i] !== 'ignored') await until(id);
    const answers = ids.map((id) => (id === undefined ? undefined : g.fuzzAnswers.get(id)?.[0]));
    const unexpected = ids.filter((id, i) => id !== undefined && (expected[i] === 'ignored' ? g.fuzzAnswers.has(id) : g.fuzzAnswers.get(id).length > 1)).length;
    return { expected, head, answers, valid: g.fuzzAnswers.get(validId)[0], unexpected };
  }, { messages, validId });

const isMatrixError = (body: string) => {
  try {
    const parsed = JSON.parse(body);
    return typeof parsed.errcode === 'string' && /^M_[A-Z_]+$/.test(parsed.errcode) && typeof parsed.error === 'string';
  } catch {
    return false;
  }
};

describe('port messages, fuzzed (fast-check, in Chromium)', () => {
  it('the service worker ignores malformed messages from pages, and still reaches the same core', { timeout: fuzzTimeout }, async () => {
    const coreId = await page.evaluate(() => (globalThis as any).hearthHost.state.coreId);
    await fc.assert(
      fc.asyncProperty(fc.array(toServiceWorker, { minLength: 1, maxLength: 4 }), async (messages) => {
        await postToServiceWorker(messages);
        const versions = await pageFetch(page, 'GET', '/_matrix/client/versions');
        expect(versions.status).toBe(200);
        expect(versions.body.versions).toContain('v1.1');
      }),
      fuzzParameters(12, 10),
    );
    expect(await page.evaluate(() => (globalThis as any).hearthHost.state)).toMatchObject({ coreId, core: 'running-here' });
    expect(errors).toEqual([]);
  });

  it('regression: a port handed over with a core ID that is no string does not retire the core (requests hung)', async () => {
    await postToServiceWorker([{ type: 'hearth-core-port', coreId: 42, port: { $port: 1 } }, { type: 'hearth-core-port', port: { $port: 1 } }]);
    expect((await pageFetch(page, 'GET', '/_matrix/client/versions')).status).toBe(200);
  });

  it('the core answers malformed requests on its port with 400 M_BAD_JSON, ignores what has no id, and still serves the port', { timeout: fuzzTimeout }, async () => {
    await connectFuzzPort();
    let validId = 2 ** 40;
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(toCore, { minLength: 1, maxLength: 4 }), async (messages) => {
          const outcome = await postToCore(messages, ++validId);
          expect(errors, 'uncaught errors in the core').toEqual([]);
          expect(outcome.valid.status).toBe(200);
          expect(outcome.unexpected).toBe(0);
          for (const [i, verdict] of outcome.expected.entries()) {
            const answer = outcome.answers[i];
            if (verdict === 'ignored') continue;
            expect(answer).toBeDefined();
            if (verdict === 'malformed') {
              expect(answer!.status).toBe(400);
              expect(JSON.parse(answer!.body).errcode).toBe('M_BAD_JSON');
            }
            if (answer!.status >= 400 && !outcome.head[i]) expect(isMatrixError(answer!.body), `${answer!.status} ${answer!.body}`).toBe(true);
          }
        }),
        fuzzParameters(15, 10),
      );
    } finally {
      // The service worker's port was superseded by the fuzz port (closed a minute later): hand it a fresh one.
      await page.evaluate(() => (globalThis as any).hearthHost.handPort(navigator.serviceWorker.controller));
    }
    expect((await pageFetch(page, 'GET', '/_matrix/client/versions')).status).toBe(200);
    expect(await page.evaluate(() => (globalThis as any).hearthHost.state.core)).toBe('running-here');
  });
});

// ------------------------------------------------------------------ core → service worker

// The core's answers as the service worker receives them (core-router.ts): the page hands the service
// worker a port of its own (`hearth-core-port` with the running core's ID, so the core's port stays),
// relays every request to a port into the real core, and answers those marked `fuzz=` itself with
// fuzzed messages. The first message that is a `response` with the request's id decides: a WireResponse
// a Response takes (an integer status 200–599, a string status text, [name, value] string headers, an
// ArrayBuffer or null body) is what the page gets; any other gives 502 M_UNKNOWN. Answers for ids the
// port was not asked, and a second answer, are ignored. A request no message answers gets a valid one last.

/** Which id an answer names: the request's, the one before it (answered already), or one never asked. */
const answerId = fc.oneof({ weight: 6, arbitrary: fc.constant('$id') }, { weight: 1, arbitrary: fc.constantFrom('$prev', '$unknown') }, { weight: 1, arbitrary: value });
const wireResponse = mutated({
  id: answerId,
  status: fc.oneof({ weight: 4, arbitrary: fc.constantFrom(200, 201, 204, 304, 400, 404, 502, 599) }, { weight: 1, arbitrary: fc.integer({ min: -1, max: 700 }) }, { weight: 1, arbitrary: fc.oneof(fc.double(), fc.constantFrom('200', 2 ** 53)) }),
  statusText: fc.oneof(fc.constantFrom('', 'OK'), fc.string({ maxLength: 4 })),
  headers: fc.array(fc.tuple(fc.constantFrom('content-type', 'x-a', 'set-cookie', 'bad name', ''), fc.oneof(fc.constant('application/json'), fc.string({ maxLength: 6 }))), { maxLength: 3 }),
  body: fc.oneof(fc.constant(null), fc.jsonValue({ maxDepth: 1 }).map((v) => ({ $buffer: [...new TextEncoder().encode(JSON.stringify(v))] }))),
});
const fromCore = fc.oneof(
  { weight: 1, arbitrary: value },
  { weight: 1, arbitrary: mutated({ type: fc.constantFrom('received', 'response'), id: answerId }) },
  { weight: 5, arbitrary: fc.record({ type: fc.oneof({ weight: 8, arbitrary: fc.constant('response') }, { weight: 1, arbitrary: value }), response: fc.oneof({ weight: 8, arbitrary: wireResponse }, { weight: 1, arbitrary: value }) }, { requiredKeys: [] }) },
);

interface Answered {
  /** What the page should get: the answer given, or 502 (`unusable`). */
  expected: { status: number; body: string } | 'unusable';
  got: { status: number; body: string };
}

/** Puts the page's relay between the service worker and the core, and sees that it is the one reached. */
const connectRelay = () =>
  page.evaluate(async () => {
    const g = globalThis as any;
    const core = new MessageChannel();
    g.hearthCoreWorker.postMessage({ id: 'fuzz-relay', type: 'APPLY', path: ['connect'], argumentList: [{ type: 'RAW', value: core.port1 }] }, [core.port1]);
    const sw = new MessageChannel();
    g.relay = sw.port1;
    core.port2.onmessage = (event: MessageEvent) => sw.port1.postMessage(event.data, event.data?.response?.body ? [event.data.response.body] : []);
    sw.port1.onmessage = (event: MessageEvent) => {
      const request = event.data?.type === 'request' ? event.data.request : undefined;
      if (request && String(request.url).includes('fuzz=')) g.onFuzzRequest(request);
      else core.port2.postMessage(event.data);
    };
    g.relayAnswer = (request: { id: number }) => sw.port1.postMessage({ type: 'response', response: { id: request.id, status: 200, statusText: '', headers: [], body: new TextEncoder().encode('relay').buffer } });
    g.onFuzzRequest = g.relayAnswer;
    navigator.serviceWorker.controller!.postMessage({ type: 'hearth-core-port', coreId: g.hearthHost.state.coreId, port: sw.port2 }, [sw.port2]);
    // The port's message and a fetch reach the service worker in no set order: until it has taken the
    // relay, a request still goes to the core's own port, which answers /versions as it is.
    for (let tries = 0; tries < 50; tries++) {
      const text = await (await fetch('/_matrix/client/versions?fuzz=ping')).text();
      if (text === 'relay' || !text.includes('"versions"')) return text;
    }
    return 'the service worker never took the relay port';
  });

const answerFromCore = (scripts: Json[][]): Promise<Answered[]> =>
  page.evaluate(async (scripts) => {
    const g = globalThis as any;
    const plain = (v: unknown): v is Record<string, any> => typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof ArrayBuffer) && !(v instanceof MessagePort);
    const results: { expected: { status: number; body: string } | 'unusable'; got: { status: number; body: string } }[] = [];
    let prev = -1;
    for (const script of scripts as any[][]) {
      let expected: (typeof results)[number]['expected'] | undefined;
      g.onFuzzRequest = (request: { id: number }) => {
        const ids: Record<string, number> = { $id: request.id, $prev: prev, $unknown: 2 ** 45 + request.id };
        const build = (v: any): any => (v?.$port === 1 ? new MessageChannel().port2 : Array.isArray(v?.$buffer) ? new Uint8Array(v.$buffer).buffer : typeof v === 'string' && v in ids ? ids[v] : plain(v) ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, build(x)])) : v);
        const inside = (v: unknown): unknown[] => [v, ...(plain(v) ? Object.values(v).flatMap(inside) : [])];
        const messages = script.map(build);
        prev = request.id;
        for (const message of messages) {
          const r = plain(message) && message['type'] === 'response' && plain(message['response']) ? message['response'] : undefined;
          if (expected === undefined && r?.['id'] === request.id) {
            const { status, statusText, headers, body } = r;
            const typed = Number.isSafeInteger(status) && status >= 200 && status <= 599 && typeof statusText === 'string' && Array.isArray(headers) && headers.every((h: unknown) => Array.isArray(h) && h.length === 2 && h.every((x) => typeof x === 'string')) && (body === null || body instanceof ArrayBuffer);
            const nullBody = [204, 205, 304].includes(status);
            try {
              if (!typed) throw new Error('untyped');
              new Response(nullBody ? null : body, { status, statusText, headers });
              expected = { status, body: nullBody || body === null ? '' : new TextDecoder().decode(body) };
            } catch {
              expected = 'unusable';
            }
          }
          g.relay.postMessage(message, inside(message).filter((x) => x instanceof MessagePort) as Transferable[]);
        }
        if (expected === undefined) {
          expected = { status: 200, body: 'last' };
          g.relay.postMessage({ type: 'response', response: { id: request.id, status: 200, statusText: 'OK', headers: [], body: new TextEncoder().encode('last').buffer } });
        }
      };
      const response = await fetch(`/_matrix/client/versions?fuzz=${results.length}`);
      results.push({ expected: expected!, got: { status: response.status, body: await response.text() } });
    }
    g.onFuzzRequest = g.relayAnswer;
    return results;
  }, scripts);

describe('core answers, fuzzed (fast-check, in Chromium)', () => {
  afterAll(async () => {
    // The service worker's port to the core was superseded by the relay: hand it the core's own again.
    await page?.evaluate(() => (globalThis as any).hearthHost.handPort(navigator.serviceWorker.controller));
  });

  it('an answer the service worker cannot use gives the page 502 M_UNKNOWN; stray and second answers are ignored; later requests work', { timeout: fuzzTimeout }, async () => {
    expect(await connectRelay()).toBe('relay');
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(fromCore, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 3 }), async (scripts) => {
        for (const { expected, got } of await answerFromCore(scripts)) {
          if (expected === 'unusable') {
            expect(got.status, got.body).toBe(502);
            expect(JSON.parse(got.body).errcode).toBe('M_UNKNOWN');
            expect(isMatrixError(got.body)).toBe(true);
          } else expect(got).toEqual(expected);
        }
        // The core behind the relay still answers, through the same service worker (not a restarted one: it still knows the relay).
        expect((await pageFetch(page, 'GET', '/_matrix/client/versions')).body.versions).toContain('v1.1');
      }),
      fuzzParameters(25, 10),
    );
    expect(await page.evaluate(async () => (await fetch('/_matrix/client/versions?fuzz=after')).text())).toBe('relay');
    expect(errors).toEqual([]);
  });
});
