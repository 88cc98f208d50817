import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { createHomeserver, type Homeserver } from '../../src/homeserver.ts';
import { CoreRouter, safeToResend } from '../../worker/core-router.ts';
import { MAX_REQUEST_BODY_BYTES, wireToRequest, type CoreMessage, type RouterMessage } from '../../worker/protocol.ts';
import { servePort } from '../../worker/serve-port.ts';
import { listSpecOperations, pathParameterExamples } from '../support/spec-schema.ts';
import { openTestDatabase } from '../support/test-database.ts';

// The service worker's router and the core's port server, wired with real
// MessageChannels (Node has them): what happens when ports come and go.
const BASE = 'http://hearth.test';
const open: MessagePort[] = [];

afterEach(() => {
  vi.useRealTimers();
  for (const port of open.splice(0)) port.close();
});

function channel(): MessageChannel {
  const pair = new MessageChannel();
  open.push(pair.port1, pair.port2);
  return pair;
}

/** A core whose answers echo the request. */
function echoCore(name: string): MessagePort {
  const { port1, port2 } = channel();
  servePort(port1, async (request) =>
    Response.json({ core: name, method: request.method, path: new URL(request.url).pathname, body: request.body ? await request.text() : null }, { headers: { 'x-core': name } }),
  );
  return port2;
}

/** A core that acknowledges requests and never answers (it is about to die). */
function stuckCore(): { port: MessagePort; received: string[] } {
  const { port1, port2 } = channel();
  const received: string[] = [];
  port1.onmessage = (event: MessageEvent<RouterMessage>) => {
    if (event.data.type !== 'request') return;
    received.push(`${event.data.request.method} ${new URL(event.data.request.url).pathname}`);
    port1.postMessage({ type: 'received', id: event.data.request.id } satisfies CoreMessage);
  };
  return { port: port2, received };
}

const until = async (condition: () => boolean) => {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(condition()).toBe(true);
};

describe('CoreRouter', () => {
  it('forwards a request and returns the core’s response, headers and body', async () => {
    const router = new CoreRouter({ requestPort: () => {} });
    router.connect(echoCore('a'), 'a');
    const response = await router.forward(new Request(`${BASE}/_matrix/client/v3/createRoom`, { method: 'POST', body: '{"name":"x"}' }));
    expect(response.status).toBe(200);
    expect(response.headers.get('x-core')).toBe('a');
    expect(await response.json()).toEqual({ core: 'a', method: 'POST', path: '/_matrix/client/v3/createRoom', body: '{"name":"x"}' });
  });

  it('queues requests until a port arrives, asking for one, and answers them all', async () => {
    // The asking interval runs on a fake clock, so the test moves time itself; messages still flow for real.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    let asks = 0;
    const router = new CoreRouter({ requestPort: () => asks++, askIntervalMs: 10 });
    const responses = Promise.all(Array.from({ length: 5 }, (_, i) => router.forward(new Request(`${BASE}/_matrix/client/v3/r${i}`))));
    await until(() => asks >= 1);
    vi.advanceTimersByTime(10);
    expect(asks).toBe(2); // once at once, then again each interval
    router.connect(echoCore('a'), 'a');
    const bodies = await Promise.all((await responses).map((r) => r.json()));
    expect(bodies.map((b) => b.path)).toEqual(['/_matrix/client/v3/r0', '/_matrix/client/v3/r1', '/_matrix/client/v3/r2', '/_matrix/client/v3/r3', '/_matrix/client/v3/r4']);
    const asksAfter = asks;
    vi.advanceTimersByTime(40);
    expect(asks).toBe(asksAfter); // it stops asking once connected
    expect(vi.getTimerCount()).toBe(0);
  });

  it('when another core takes over, resends what the old one never applied or what is safe to repeat', async () => {
    const router = new CoreRouter({ requestPort: () => {} });
    const stuck = stuckCore();
    router.connect(stuck.port, 'old');
    const get = router.forward(new Request(`${BASE}/_matrix/client/v3/sync`));
    const put = router.forward(new Request(`${BASE}/_matrix/client/v3/rooms/!r/send/m.room.message/t1`, { method: 'PUT', body: '{}' }));
    const post = router.forward(new Request(`${BASE}/_matrix/client/v3/createRoom`, { method: 'POST', body: '{}' }));
    await until(() => stuck.received.length === 3);
    router.connect(echoCore('new'), 'new');
    expect((await (await get).json()).core).toBe('new');
    expect((await (await put).json()).core).toBe('new');
    const refused = await post;
    expect(refused.status).toBe(503);
    expect(await refused.json()).toMatchObject({ errcode: 'M_UNKNOWN' });
  });

  it('resends unacknowledged requests of any method when the port closes', async () => {
    const router = new CoreRouter({ requestPort: () => {} });
    const { port1, port2 } = channel();
    router.connect(port2, 'dying');
    port1.onmessage = () => port1.close(); // dies on the first request, before acknowledging it
    const post = router.forward(new Request(`${BASE}/_matrix/client/v3/createRoom`, { method: 'POST', body: '{}' }));
    await until(() => !router.connected);
    router.connect(echoCore('next'), 'next');
    expect(await (await post).json()).toMatchObject({ core: 'next', method: 'POST' });
  });

  it('a second port from the same core keeps answers from the first', async () => {
    const router = new CoreRouter({ requestPort: () => {} });
    const first = stuckCore();
    router.connect(first.port, 'same');
    const pending = router.forward(new Request(`${BASE}/_matrix/client/v3/sync`));
    await until(() => first.received.length === 1);
    router.connect(echoCore('same'), 'same');
    const next = await router.forward(new Request(`${BASE}/_matrix/client/v3/versions`));
    expect(next.status).toBe(200);
    // Not resent: the first port still reaches a live core that may answer.
    expect(first.received).toEqual(['GET /_matrix/client/v3/sync']);
    void pending;
  });

  it('refuses a request body over the bound with M_TOO_LARGE, without reaching the core', async () => {
    const router = new CoreRouter({ requestPort: () => {} });
    const stuck = stuckCore();
    router.connect(stuck.port, 'a');
    const response = await router.forward(new Request(`${BASE}/_matrix/client/v3/createRoom`, { method: 'POST', body: new Uint8Array(MAX_REQUEST_BODY_BYTES + 1) }));
    expect(response.status).toBe(413);
    expect(await response.json()).toMatchObject({ errcode: 'M_TOO_LARGE' });
    expect(stuck.received).toEqual([]);
  });

  it('answers 503 when no core turns up in time', async () => {
    const router = new CoreRouter({ requestPort: () => {}, askIntervalMs: 5, connectTimeoutMs: 30 });
    const response = await router.forward(new Request(`${BASE}/_matrix/client/versions`));
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('5');
  });
});

/**
 * A real core that applies each request it gets and then dies before it can answer: the
 * homeserver runs the request to its end, the answer never leaves.
 */
function applyThenDie(homeserver: Homeserver): { port: MessagePort; applied: Array<{ method: string; path: string; status: number; body: unknown }> } {
  const { port1, port2 } = channel();
  const applied: Array<{ method: string; path: string; status: number; body: unknown }> = [];
  port1.onmessage = async (event: MessageEvent<RouterMessage>) => {
    if (event.data.type !== 'request') return;
    const { request } = event.data;
    port1.postMessage({ type: 'received', id: request.id } satisfies CoreMessage);
    const response = await homeserver.fetch(wireToRequest(request));
    applied.push({ method: request.method, path: new URL(request.url).pathname, status: response.status, body: await response.json() });
  };
  return { port: port2, applied };
}

describe('CoreRouter and requests the old core applied (issue 37: every PUT was sent again)', () => {
  it('sends again only reads and the spec’s PUTs with a transaction ID, for every operation of the client and federation APIs', () => {
    const checked: string[] = [];
    for (const api of ['client', 'federation'] as const) {
      for (const op of listSpecOperations(api)) {
        const examples = pathParameterExamples(op);
        const path = op.template.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(examples[name] ?? `some-${name}`));
        const expected = ['GET', 'HEAD', 'OPTIONS'].includes(op.method) || (op.method === 'PUT' && op.template.endsWith('/{txnId}'));
        expect([op.method, op.template, safeToResend(op.method, `${BASE}${path}`)]).toEqual([op.method, op.template, expected]);
        if (op.method === 'PUT' && expected) checked.push(op.template);
      }
    }
    // The four the spec has today; a new one would show here.
    expect(checked.sort()).toEqual([
      '/_matrix/client/v3/rooms/{roomId}/redact/{eventId}/{txnId}',
      '/_matrix/client/v3/rooms/{roomId}/send/{eventType}/{txnId}',
      '/_matrix/client/v3/sendToDevice/{eventType}/{txnId}',
      '/_matrix/federation/v1/send/{txnId}',
    ]);
  });

  it('a media upload and an alias the old core applied get 503 from the new one, not a wrong 409; a send with a transaction ID gets its first event back', async () => {
    const { database, cleanup } = await openTestDatabase();
    const homeserver = await createHomeserver({ database, seed: crypto.getRandomValues(new Uint8Array(32)), rateLimits: false, passwordIterations: 1000 });
    onTestFinished(async () => (await homeserver.close(), await cleanup()));
    const call = async (method: string, path: string, body: unknown, token?: string) => {
      const response = await homeserver.fetch(
        new Request(`${BASE}${path}`, { method, body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) } }),
      );
      expect(response.status).toBe(200);
      return (await response.json()) as Record<string, string>;
    };
    const token = (await call('POST', '/_matrix/client/v3/register', { username: 'alice', password: 'a long password', auth: { type: 'm.login.dummy' } })).access_token!;
    const roomId = (await call('POST', '/_matrix/client/v3/createRoom', {}, token)).room_id!;
    const mediaPath = (await call('POST', '/_matrix/media/v1/create', {}, token)).content_uri!.replace('mxc://', '/_matrix/media/v3/upload/');
    const alias = encodeURIComponent(`#hall:${homeserver.serverName}`);

    const router = new CoreRouter({ requestPort: () => {} });
    const dying = applyThenDie(homeserver);
    router.connect(dying.port, 'old');
    const auth = { authorization: `Bearer ${token}` };
    const upload = router.forward(new Request(`${BASE}${mediaPath}`, { method: 'PUT', body: 'hello', headers: { ...auth, 'content-type': 'text/plain' } }));
    const directory = router.forward(new Request(`${BASE}/_matrix/client/v3/directory/room/${alias}`, { method: 'PUT', body: JSON.stringify({ room_id: roomId }), headers: auth }));
    const send = router.forward(new Request(`${BASE}/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/t1`, { method: 'PUT', body: JSON.stringify({ msgtype: 'm.text', body: 'hi' }), headers: auth }));
    await until(() => dying.applied.length === 3);
    expect(dying.applied.map((a) => a.status)).toEqual([200, 200, 200]);

    // The core restarts (same data, as a new leader's core opens the same database) and hands over a port.
    router.connect(restartedCore(homeserver), 'new');
    for (const answer of [await upload, await directory]) {
      expect(answer.status).toBe(503);
      expect(await answer.json()).toMatchObject({ errcode: 'M_UNKNOWN', error: expect.stringContaining('may or may not have been applied') });
    }
    const resent = await send;
    expect(resent.status).toBe(200);
    const firstEvent = dying.applied.find((a) => a.path.includes('/send/'))!.body as { event_id: string };
    expect(await resent.json()).toEqual({ event_id: firstEvent.event_id });
  });
});

function restartedCore(homeserver: Homeserver): MessagePort {
  const { port1, port2 } = channel();
  servePort(port1, (request) => homeserver.fetch(request));
  return port2;
}

describe('servePort', () => {
  it('answers requests concurrently: a slow one does not hold up the next', async () => {
    const { port1, port2 } = channel();
    let releaseSlow!: () => void;
    const slow = new Promise<void>((resolve) => (releaseSlow = resolve));
    servePort(port1, async (request) => {
      if (new URL(request.url).pathname.endsWith('/slow')) await slow;
      return new Response(new URL(request.url).pathname);
    });
    const router = new CoreRouter({ requestPort: () => {} });
    router.connect(port2, 'a');
    const slowResponse = router.forward(new Request(`${BASE}/_matrix/slow`));
    const fast = await router.forward(new Request(`${BASE}/_matrix/fast`));
    expect(await fast.text()).toBe('/_matrix/fast');
    releaseSlow();
    expect(await (await slowResponse).text()).toBe('/_matrix/slow');
  });

  it('turns a handler failure into a Matrix 500', async () => {
    const { port1, port2 } = channel();
    servePort(port1, async () => {
      throw new Error('boom');
    });
    const router = new CoreRouter({ requestPort: () => {} });
    router.connect(port2, 'a');
    const response = await router.forward(new Request(`${BASE}/_matrix/client/versions`));
    expect(response.status).toBe(500);
    expect(await response.json()).toEqual({ errcode: 'M_UNKNOWN', error: 'boom' });
  });
});

describe('servePort closeWhenIdle', () => {
  it('answers what is in flight, then closes', async () => {
    const { port1, port2 } = channel();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let handled = 0;
    const served = servePort(port1, async () => {
      handled++;
      await gate;
      return new Response('done');
    });
    const router = new CoreRouter({ requestPort: () => {} });
    router.connect(port2, 'a');
    const pending = router.forward(new Request(`${BASE}/_matrix/client/v3/sync`));
    await until(() => handled === 1);
    served.closeWhenIdle();
    release();
    expect(await (await pending).text()).toBe('done');
    // Closed now: the router sees the port go and asks for another.
    await until(() => !router.connected);
  });
});

describe('servePort and malformed messages (issue 24: found by test/e2e/port-messages.fuzz.test.ts)', () => {
  it('answers a request it cannot make with 400 M_BAD_JSON, ignores a message with no id, and serves the next request', async () => {
    const { port1, port2 } = channel();
    const errors: unknown[] = [];
    const onError = (error: unknown) => errors.push(error);
    process.on('uncaughtException', onError);
    onTestFinished(() => void process.off('uncaughtException', onError));
    servePort(port1, async () => new Response('ok'));
    const answers: CoreMessage[] = [];
    port2.onmessage = (event: MessageEvent<CoreMessage>) => answers.push(event.data);
    // Before the fix, each of these threw in the core's message handler (the page saw the worker fail) or left the router waiting.
    for (const bad of [null, { type: 'request' }, { type: 'abort' }, { type: 'request', request: { id: 'x' } }]) port2.postMessage(bad);
    port2.postMessage({ type: 'request', request: { id: 1, method: 'PUT' } });
    port2.postMessage({ type: 'request', request: { id: 2, method: 'CONNECT', url: `${BASE}/x`, headers: [], body: null } });
    port2.postMessage({ type: 'request', request: { id: 3, method: 'GET', url: `${BASE}/_matrix/client/versions`, headers: [], body: null } } satisfies RouterMessage);
    await until(() => answers.filter((a) => a.type === 'response').length === 3);
    const responses = answers.flatMap((a) => (a.type === 'response' ? [a.response] : []));
    expect(responses.map((r) => [r.id, r.status])).toEqual(expect.arrayContaining([[1, 400], [2, 400], [3, 200]]));
    for (const r of responses.filter((r) => r.status === 400)) expect(JSON.parse(new TextDecoder().decode(r.body!))).toMatchObject({ errcode: 'M_BAD_JSON' });
    expect(answers.filter((a) => a.type === 'received').map((a) => a.id)).toEqual([1, 2, 3]);
    expect(errors).toEqual([]);
  });
});

describe('CoreRouter and answers it cannot use (issue 24: found by test/e2e/port-messages.fuzz.test.ts)', () => {
  /** A core that answers each request with the messages `script` gives for its id. */
  function scriptedCore(script: (id: number) => unknown[]): MessagePort {
    const { port1, port2 } = channel();
    port1.onmessage = (event: MessageEvent<RouterMessage>) => {
      if (event.data.type === 'request') for (const message of script(event.data.request.id)) port1.postMessage(message);
    };
    return port2;
  }
  const wire = (id: number, fields: Record<string, unknown> = {}) => ({ type: 'response', response: { id, status: 200, statusText: '', headers: [], body: new TextEncoder().encode('ok').buffer, ...fields } });
  const versions = () => new Request(`${BASE}/_matrix/client/versions`);

  it.each([
    ['a status no Response takes', { status: 600 }],
    ['a 1xx status', { status: 101 }],
    ['a status that is no integer', { status: '200' }],
    ['a header name no Headers takes', { headers: [['bad name', 'x']] }],
    ['headers that are no list', { headers: { a: 'b' } }],
    ['a body that is not bytes', { body: { not: 'bytes' } }],
  ])('%s gives 502 M_UNKNOWN (it left the request waiting, or answered the body as text)', async (_, fields) => {
    const router = new CoreRouter({ requestPort: () => {} });
    router.connect(scriptedCore((id) => [wire(id, fields)]), 'a');
    const response = await router.forward(versions());
    expect(response.status).toBe(502);
    expect(await response.json()).toMatchObject({ errcode: 'M_UNKNOWN', error: expect.stringContaining("answer could not be used") });
  });

  it('a message of another type is no answer, nor is a second one; nothing posted throws', async () => {
    const errors: unknown[] = [];
    const onError = (error: unknown) => errors.push(error);
    process.on('uncaughtException', onError);
    onTestFinished(() => void process.off('uncaughtException', onError));
    const router = new CoreRouter({ requestPort: () => {} });
    const junk = (id: number) => [null, 7, { type: 'received' }, { type: 'response', response: null }, { type: 'nonsense', response: wire(id, { status: 418 }).response }];
    router.connect(scriptedCore((id) => [...junk(id), wire(id), wire(id, { status: 500 })]), 'a');
    const response = await router.forward(versions());
    expect([response.status, await response.text()]).toEqual([200, 'ok']);
    expect((await router.forward(versions())).status).toBe(200);
    expect(errors).toEqual([]);
  });

  it('an answer from a port the request was not sent on is ignored; a request no port answers gets 504 M_UNKNOWN in time, and the core an abort', async () => {
    const router = new CoreRouter({ requestPort: () => {}, answerTimeoutMs: 100 });
    const { port1: older, port2 } = channel();
    router.connect(port2, 'a');
    const asked: RouterMessage[] = [];
    const { port1: current, port2: currentEnd } = channel();
    current.onmessage = (event: MessageEvent<RouterMessage>) => {
      asked.push(event.data);
      // The older port of the same core answers a request it never had (before the fix, that was the answer).
      if (event.data.type === 'request') older.postMessage(wire(event.data.request.id));
    };
    router.connect(currentEnd, 'a');
    const response = await router.forward(versions());
    expect(response.status).toBe(504);
    expect(await response.json()).toMatchObject({ errcode: 'M_UNKNOWN' });
    await until(() => asked.some((m) => m.type === 'abort'));
  });
});
