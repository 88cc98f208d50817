import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fuzzParameters, fuzzTimeout } from '../support/fuzz.ts';
import { listSpecOperations, requestBodyProperties, type SpecOperation } from '../support/spec-schema.ts';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

// Random JSON (and some that is not JSON) to every client-server endpoint the spec gives a
// JSON body, against a running homeserver: the answer is a success or a 4xx in the Matrix
// error shape, never a 5xx of its own (a 502 says another server failed it), and the server
// goes on serving valid requests afterwards.

let server: TestServer;
let alice: Account;
let bob: Account;

beforeAll(async () => {
  server = await startTestServer();
  alice = await register(server, 'alice');
  bob = await register(server, 'bob');
});
afterAll(() => server?.close());

const operations = listSpecOperations('client').filter((op) => requestBodyProperties(op) !== undefined);

/** Real values for each path parameter, in a room made for this operation; `odd` overrides some with any string. */
let shared: Promise<{ room: string; eventId: string }> | undefined;
async function pathFor(op: SpecOperation, odd?: Record<string, string>): Promise<string> {
  const { room, eventId } = await (odd ? (shared ??= fixture()) : fixture());
  const values: Record<string, string> = {
    userId: alice.userId, roomId: room, roomIdOrAlias: room, eventId, deviceId: alice.deviceId,
    txnId: crypto.randomUUID(), eventType: 'm.room.message', stateKey: '', type: 'm.fuzz', tag: 'u.fuzz', keyName: 'displayname',
    kind: 'override', ruleId: 'fuzz', receiptType: 'm.read', version: '1', sessionId: 'session', appserviceId: 'as', networkId: 'net',
    roomAlias: `#fuzz-${crypto.randomUUID()}:${server.homeserver.serverName}`,
  };
  return op.template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = odd?.[name] ?? values[name];
    if (value === undefined) throw new Error(`no value for path parameter ${name} of ${op.template}`);
    return encodeURIComponent(value);
  });
}

/** A room of alice's (bob invited) with one message in it. */
async function fixture(): Promise<{ room: string; eventId: string }> {
  const room = (await api(server, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat', invite: [bob.userId] } })).body.room_id as string;
  const sent = await api(server, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(room)}/send/m.room.message/${crypto.randomUUID()}`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'hi' } });
  return { room, eventId: sent.body.event_id };
}

/** A Matrix error, or a success; never a 5xx. */
async function expectMatrixAnswer(method: string, path: string, text?: string): Promise<void> {
  const response = await fetch(server.url + path, {
    method,
    headers: { authorization: `Bearer ${alice.accessToken}`, ...(text === undefined ? {} : { 'content-type': 'application/json' }) },
    body: text,
  });
  const answer = await response.text();
  const what = `${method} ${path} ${text} → ${response.status} ${answer}`;
  // 502 is what the API answers when another server fails it (here: a remote user, and this server has no federation).
  expect(response.status === 502 || response.status < 500, what).toBe(true);
  if (response.status < 400) return;
  const parsed = JSON.parse(answer) as Record<string, unknown>;
  // User-interactive auth answers 401 with its flows (errcode only once a stage failed).
  if (response.status === 401 && Array.isArray(parsed['flows'])) return;
  expect(parsed['errcode'], what).toMatch(/^M_[A-Z_]+$/);
  expect(parsed['error'], what).toBeTypeOf('string');
}

const junk = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(-1, 0, 2 ** 53, 1.5, -0, '', 'x'.repeat(300), [], {}, null, true, ['@alice:nowhere'], { '': null }),
  fc.constantFrom('@bob:' + 'localhost', '!nope:localhost', '#nope:localhost', 'm.login.password', 'public_chat', 'private_chat', '1', '10', 'm.room.message', 'org.matrix.msc2432'),
);
/** A body: any JSON, an object of the spec's own keys with junk values, or bytes that are not JSON. */
const body = (properties: string[]) => fc.oneof(
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
  fc.dictionary(properties.length > 0 ? fc.oneof(fc.constantFrom(...properties), fc.string({ maxLength: 5 })) : fc.string({ maxLength: 5 }), junk, { maxKeys: 5 }).map((v) => JSON.stringify(v)),
  fc.constantFrom('{', 'nul', '{"a":1,}', '\u0000', '[1,2', '{"a":NaN}', '', '{"a":1e400}', '{"__proto__":{"admin":true}}', '"\\ud800"'),
);

describe('client request bodies, fuzzed', { timeout: fuzzTimeout }, () => {
  it(`${operations.length} endpoints with a JSON body: a success or a 4xx Matrix error, never a 5xx`, async () => {
    expect(operations.length).toBeGreaterThan(60);
    for (const op of operations) {
      const path = await pathFor(op);
      await fc.assert(
        fc.asyncProperty(body(requestBodyProperties(op)!), (text) => expectMatrixAnswer(op.method.toUpperCase(), path, text)),
        fuzzParameters(4, 25),
      );
    }
    await stillServing();
  });

  it('the same endpoints with odd path segments (any string in place of an ID): a success or a 4xx Matrix error', async () => {
    const odd = fc.oneof(fc.string({ unit: 'binary', maxLength: 12 }), fc.constantFrom('', '%', '..', '!', '@', '$', '#', ':', '@a:b:c', '!x:' + 'y'.repeat(300), '\u0000', ' '));
    for (const op of operations) {
      const params = [...op.template.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
      if (params.length === 0) continue;
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...params), odd, body(requestBodyProperties(op)!), async (param, value, text) => {
          await expectMatrixAnswer(op.method.toUpperCase(), await pathFor(op, { [param]: value }), text);
        }),
        fuzzParameters(2, 50),
      );
    }
    await stillServing();
  });
});

describe('query strings, fuzzed', { timeout: fuzzTimeout }, () => {
  it('sync tokens, pagination tokens, filters and limits: any value gives a success or a 4xx Matrix error', async () => {
    const { room, eventId } = await (shared ??= fixture());
    const since = (await api(server, 'GET', '/_matrix/client/v3/sync?timeout=0', { token: alice.accessToken })).body.next_batch as string;
    const r = encodeURIComponent(room);
    const queries: [path: string, params: string[]][] = [
      ['/_matrix/client/v3/sync', ['since', 'filter', 'set_presence', 'full_state', 'timeout']],
      [`/_matrix/client/v3/rooms/${r}/messages`, ['from', 'to', 'dir', 'limit', 'filter']],
      [`/_matrix/client/v3/rooms/${r}/context/${encodeURIComponent(eventId)}`, ['limit', 'filter']],
      [`/_matrix/client/v1/rooms/${r}/relations/${encodeURIComponent(eventId)}`, ['from', 'to', 'limit', 'dir', 'recurse']],
      [`/_matrix/client/v1/rooms/${r}/threads`, ['from', 'limit', 'include']],
      [`/_matrix/client/v3/rooms/${r}/members`, ['at', 'membership', 'not_membership']],
      ['/_matrix/client/v3/publicRooms', ['limit', 'since', 'server']],
      ['/_matrix/client/v3/keys/changes', ['from', 'to']],
      ['/_matrix/client/v3/notifications', ['from', 'limit', 'only']],
      ['/_matrix/client/v3/events', ['from', 'timeout', 'room_id']],
      [`/_matrix/client/v1/rooms/${r}/hierarchy`, ['from', 'limit', 'max_depth', 'suggested_only']],
      [`/_matrix/client/v1/rooms/${r}/timestamp_to_event`, ['ts', 'dir']],
    ];
    const value = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 16 }),
      fc.constantFrom(since, `${since}x`, since.slice(0, -1), 's0', 's-1', 's99999999999999999999', '0', '-1', '1e3', 'NaN', '9007199254740993', 'b', 'f', '{}', '{"room":{"timeline":{"limit":-1}}}', '{"room":{"rooms":[1]}}', 'true', 'online', 'm.room.message'),
      fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
    );
    await fc.assert(
      fc.asyncProperty(fc.nat(queries.length - 1), fc.array(fc.tuple(fc.nat(4), value), { minLength: 1, maxLength: 3 }), async (which, picks) => {
        const [path, params] = queries[which]!;
        const query = new URLSearchParams(picks.map(([p, v]) => [params[p % params.length]!, v]));
        if (path.endsWith('/sync') || path.endsWith('/events')) query.set('timeout', '0');
        await expectMatrixAnswer('GET', `${path}?${query}`);
      }),
      fuzzParameters(60, 10),
    );
    await stillServing();
  });
});

/** Still serving: alice can sync and talk. */
async function stillServing(): Promise<void> {
  const room = (await api(server, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: {} })).body.room_id;
  expect((await api(server, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(room)}/send/m.room.message/after`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'after' } })).status).toBe(200);
  expect((await api(server, 'GET', '/_matrix/client/v3/sync?timeout=0', { token: alice.accessToken })).status).toBe(200);
}
