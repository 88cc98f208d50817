import { describe, expect, it } from 'vitest';
import {
  eventSchemaFor,
  findSpecOperations,
  listEventExamples,
  listSpecExamples,
  listSpecOperations,
  pathParameterExamples,
  validateClientRequest,
  validateClientResponse,
  validateEvent,
  validateFederationRequest,
  validateFederationResponse,
  type SpecApi,
  type SpecExample,
  type SpecOperation,
} from './spec-schema.ts';

/**
 * Spec examples that are wrong against the schema validateEvent picks, keyed by example file.
 * Each is still checked against the schema matrix-spec's own CI uses (see below).
 */
const BROKEN_EVENT_EXAMPLES: Record<string, string> = {
  // Illustrates only the fields common to every verification method, yet says "method": "m.sas.v1",
  // so it lacks the four fields the m.sas.v1 variant requires (matrix-spec checks it against the
  // common m.key.verification.start schema only; the m.sas.v1 example has them all).
  'event-schemas/examples/m.key.verification.start.yaml': 'common-fields example claiming method m.sas.v1',
};

/** A concrete request path for an operation, from its path parameters' examples. */
function concretePath(op: SpecOperation): string {
  const params = pathParameterExamples(op);
  return op.template.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(params[name] ?? 'x'));
}

function validateExample(api: SpecApi, example: SpecExample, path: string): void {
  const { method } = example.operation;
  if (api === 'client') {
    if (example.kind === 'request') validateClientRequest(method, path, example.value);
    else validateClientResponse(method, path, Number(example.status), example.value);
  } else {
    if (example.kind === 'request') validateFederationRequest(method, path, example.value);
    else validateFederationResponse(method, path, Number(example.status), example.value);
  }
}

const same = (a: SpecOperation) => (b: SpecOperation) => a.file === b.file && a.pointer === b.pointer;

describe.each(['client', 'federation'] as const)('%s API: the spec against itself', (api) => {
  const operations = listSpecOperations(api);
  const examples = listSpecExamples(api);

  it('finds the operations and examples (a loader that finds nothing must not pass)', () => {
    expect(operations.length).toBeGreaterThan(api === 'client' ? 150 : 30);
    expect(examples.length).toBeGreaterThan(api === 'client' ? 250 : 50);
  });

  it('routes a concrete path for every operation back to that operation', () => {
    for (const op of operations) {
      const path = concretePath(op);
      const found = findSpecOperations(api, op.method, path).find(same(op));
      expect(found, `${op.method} ${path}`).toBeDefined();
      const params = pathParameterExamples(op);
      for (const [name, value] of Object.entries(found!.params)) expect(value).toBe(params[name] ?? 'x');
      for (const alias of op.aliases) {
        const aliasPath = path.replace(/^\/_matrix\/(client|media)\/v3\//, '/_matrix/$1/r0/');
        expect(findSpecOperations(api, op.method, aliasPath).some(same(op)), `${op.method} ${aliasPath}`).toBe(true);
        expect(alias).toContain('/r0/');
      }
    }
  });

  it.each(examples.map((e) => [`${e.operation.method} ${e.operation.template} ${e.kind} ${e.status ?? ''} ${e.name}`, e] as const))(
    'example validates: %s',
    (_, example) => {
      const path = concretePath(example.operation);
      validateExample(api, example, path);
      expect(findSpecOperations(api, example.operation.method, path).some(same(example.operation))).toBe(true);
    },
  );
});

describe('event examples', () => {
  const examples = listEventExamples();

  it('finds them', () => {
    expect(examples.length).toBeGreaterThan(80);
  });

  it.each(examples.map((e) => [e.file, e] as const))('%s validates via validateEvent', (file, { event }) => {
    if (file in BROKEN_EVENT_EXAMPLES) {
      expect(() => validateEvent(event)).toThrow();
      return;
    }
    validateEvent(event);
  });

  it.each(examples.map((e) => [e.file, e] as const))(
    '%s validates against the schema matrix-spec checks it with',
    (file, { event }) => {
      // scripts/check-event-schema-examples.py: the example's name up to '$' names the schema.
      const schema = file.replace(/^.*\//, '').replace(/(\$.*)?\.yaml$/, '');
      validateEvent(event, schema);
      expect(eventSchemaFor(event)).toMatch(new RegExp(`/${schema.replace(/\./g, '\\.')}(\\$[^/]*)?\\.yaml$`));
    },
  );

  it('the core examples validate against the generic schemas unknown types fall back to', () => {
    const roomEvent = {
      type: 'org.example.custom.event',
      content: { key: 'value' },
      event_id: '$143273582443PhrSn:example.org',
      room_id: '!jEsUZKDJdhlrceRyVU:example.org',
      sender: '@example:example.org',
      origin_server_ts: 1432735824653,
      unsigned: { age: 1234, membership: 'join' },
    };
    expect(eventSchemaFor(roomEvent)).toBe('event-schemas/schema/core-event-schema/room_event.yaml');
    validateEvent(roomEvent);
    const stateEvent = { ...roomEvent, state_key: 'ArbitraryString' };
    expect(eventSchemaFor(stateEvent)).toBe('event-schemas/schema/core-event-schema/state_event.yaml');
    validateEvent(stateEvent);
  });
});

describe('path matching', () => {
  const send = (path: string) => findSpecOperations('client', 'PUT', path).map((op) => op.operationId);

  it('matches concrete paths with raw or percent-encoded parameters, and both v3 and r0', () => {
    expect(send('/_matrix/client/v3/rooms/!abc:x/send/m.room.message/txn1')).toEqual(['sendMessage']);
    expect(send('/_matrix/client/v3/rooms/%21abc%3Ax/send/m.room.message/txn1')).toEqual(['sendMessage']);
    expect(send('/_matrix/client/r0/rooms/!abc:x/send/m.room.message/txn1')).toEqual(['sendMessage']);
    expect(send('https://hs.example/_matrix/client/v3/rooms/!abc:x/send/m.room.message/t?access_token=x')).toEqual([
      'sendMessage',
    ]);
  });

  it('lets a parameter swallow unencoded slashes, but prefers templates that need no swallowing', () => {
    // A room v3 event ID (standard base64) with a raw '/'.
    const ops = findSpecOperations('client', 'GET', '/_matrix/client/v3/rooms/!r:x/event/$ab/cd+ef');
    expect(ops.map((op) => [op.operationId, op.params])).toEqual([
      ['getOneRoomEvent', { roomId: '!r:x', eventId: '$ab/cd+ef' }],
    ]);
    // A state key with raw slashes, and one with encoded ones.
    const state = (path: string) => findSpecOperations('client', 'PUT', path).map((op) => op.params.stateKey);
    expect(state('/_matrix/client/v3/rooms/!r:x/state/org.example/a/b/c')).toEqual(['a/b/c']);
    expect(state('/_matrix/client/v3/rooms/!r:x/state/org.example/a%2Fb%3F')).toEqual(['a/b?']);
    // relations/{eventId}/{relType}/{eventType} beats relType swallowing "m.annotation/m.reaction".
    const rel = findSpecOperations('client', 'GET', '/_matrix/client/v1/rooms/!r:x/relations/$e/m.annotation/m.reaction');
    expect(rel.map((op) => op.template)).toEqual([
      '/_matrix/client/v1/rooms/{roomId}/relations/{eventId}/{relType}/{eventType}',
    ]);
  });

  it('lets an empty state key drop its trailing slash, as the spec allows', () => {
    const get = (path: string) => findSpecOperations('client', 'GET', path).map((op) => op.operationId);
    expect(get('/_matrix/client/v3/rooms/!r:x/state/m.room.name/')).toEqual(['getRoomStateWithKey']);
    expect(get('/_matrix/client/v3/rooms/!r:x/state/m.room.name')).toEqual(['getRoomStateWithKey']);
    const [match] = findSpecOperations('client', 'GET', '/_matrix/client/v3/rooms/!r:x/state/m.room.name');
    expect(match!.params).toEqual({ roomId: '!r:x', eventType: 'm.room.name', stateKey: '' });
    expect(get('/_matrix/client/v3/rooms/!r:x/state')).toEqual(['getRoomState']);
  });

  it('knows /versions, the v1 endpoints, the media API and the federation and key prefixes', () => {
    expect(findSpecOperations('client', 'GET', '/_matrix/client/versions')[0]!.operationId).toBe('getVersions');
    expect(findSpecOperations('client', 'GET', '/_matrix/client/v1/rooms/!r:x/hierarchy')[0]!.operationId).toBe(
      'getSpaceHierarchy',
    );
    expect(findSpecOperations('client', 'GET', '/_matrix/client/v1/media/config')).toHaveLength(1);
    expect(findSpecOperations('federation', 'GET', '/_matrix/federation/v1/version')[0]!.operationId).toBe(
      'getVersion',
    );
    expect(findSpecOperations('federation', 'PUT', '/_matrix/federation/v2/invite/!r:x/$e')[0]!.operationId).toBe(
      'sendInviteV2',
    );
    expect(findSpecOperations('federation', 'GET', '/_matrix/key/v2/server')[0]!.template).toBe('/_matrix/key/v2/server');
  });

  it('throws on unknown paths, wrong methods, wrong version prefixes and the wrong API', () => {
    expect(() => findSpecOperations('client', 'GET', '/_matrix/client/v3/no/such/endpoint')).toThrow(/no client API operation/);
    expect(() => findSpecOperations('client', 'DELETE', '/_matrix/client/v3/sync')).toThrow(/has no DELETE.*GET/);
    // hierarchy only exists under v1.
    expect(() => findSpecOperations('client', 'GET', '/_matrix/client/v3/rooms/!r:x/hierarchy')).toThrow();
    expect(() => findSpecOperations('client', 'GET', '/_matrix/federation/v1/version')).toThrow();
    expect(() => findSpecOperations('federation', 'GET', '/_matrix/client/v3/sync')).toThrow();
    expect(() => validateClientResponse('GET', '/_matrix/client/v3/nope', 200, {})).toThrow(/nope/);
  });
});

describe('negative cases', () => {
  const sendPath = '/_matrix/client/v3/rooms/!abc:x/send/m.room.message/txn1';

  it('accepts a valid response', () => {
    validateClientResponse('PUT', sendPath, 200, { event_id: '$abc' });
    validateClientResponse('GET', '/_matrix/client/v3/account/whoami', 200, { user_id: '@a:x', device_id: 'D' });
  });

  it('throws on a wrong field type, naming the operation and the field', () => {
    expect(() => validateClientResponse('PUT', sendPath, 200, { event_id: 42 })).toThrow(
      /sendMessage[\s\S]*\/event_id must be string/,
    );
    expect(() =>
      validateClientResponse('GET', '/_matrix/client/v3/sync', 200, { next_batch: 's1', rooms: { join: [] } }),
    ).toThrow(/sync[\s\S]*\/rooms\/join must be object/);
  });

  it('throws on a missing required field', () => {
    expect(() => validateClientResponse('GET', '/_matrix/client/v3/account/whoami', 200, { device_id: 'D' })).toThrow(
      /getTokenOwner[\s\S]*must have required property 'user_id'/,
    );
    expect(() => validateClientResponse('GET', '/_matrix/client/v3/sync', 200, {})).toThrow(/next_batch/);
  });

  it('applies the Matrix string formats', () => {
    expect(() => validateClientResponse('PUT', sendPath, 200, { event_id: 'not-an-event-id' })).toThrow(/event_id/);
    expect(() =>
      validateClientResponse('GET', '/_matrix/client/v3/account/whoami', 200, { user_id: 'alice' }),
    ).toThrow(/user_id/);
  });

  it('checks error responses against the standard error schema, documented or not', () => {
    validateClientResponse('PUT', sendPath, 400, { errcode: 'M_UNKNOWN', error: 'bad' });
    validateClientResponse('GET', '/_matrix/client/v3/sync', 403, { errcode: 'M_FORBIDDEN', error: 'no' });
    expect(() => validateClientResponse('GET', '/_matrix/client/v3/sync', 403, { error: 'no' })).toThrow(/errcode/);
  });

  it('throws on an undocumented success status', () => {
    expect(() => validateClientResponse('PUT', sendPath, 201, { event_id: '$abc' })).toThrow(/no 201 response/);
  });

  it('validates request bodies, and refuses a body where the spec takes none', () => {
    validateClientRequest('POST', '/_matrix/client/v3/login', {
      type: 'm.login.password',
      identifier: { type: 'm.id.user', user: 'alice' },
      password: 'pw',
    });
    expect(() => validateClientRequest('POST', '/_matrix/client/v3/login', { password: 'pw' })).toThrow(
      /login[\s\S]*required property 'type'/,
    );
    expect(() => validateClientRequest('POST', '/_matrix/client/v3/createRoom', { visibility: 'secret' })).toThrow(
      /visibility/,
    );
    validateClientRequest('GET', '/_matrix/client/v3/sync', undefined);
    expect(() => validateClientRequest('GET', '/_matrix/client/v3/sync', { x: 1 })).toThrow(/takes no request body/);
  });

  it('accepts either definition where the spec defines a path twice', () => {
    const invite = '/_matrix/client/v3/rooms/!r:x/invite';
    validateClientRequest('POST', invite, { user_id: '@b:x' });
    validateClientRequest('POST', invite, { id_server: 'id.x', id_access_token: 't', medium: 'email', address: 'a@x' });
    expect(() => validateClientRequest('POST', invite, { user_id: 7 })).toThrow(/inviteUser[\s\S]*inviteBy3PID/);
  });

  it('validates federation bodies', () => {
    validateFederationResponse('GET', '/_matrix/federation/v1/version', 200, { server: { name: 'hearth' } });
    expect(() =>
      validateFederationResponse('GET', '/_matrix/federation/v1/version', 200, { server: { name: 1 } }),
    ).toThrow(/getVersion/);
    expect(() => validateFederationRequest('PUT', '/_matrix/federation/v1/send/txn1', { origin: 'x' })).toThrow(
      /pdus/,
    );
  });

  it('validates events by type and msgtype, and throws with the schema named', () => {
    const base = { event_id: '$e', room_id: '!r:x', sender: '@a:x', origin_server_ts: 1 };
    validateEvent({ ...base, type: 'm.room.message', content: { msgtype: 'm.text', body: 'hi' } });
    expect(eventSchemaFor({ type: 'm.room.message', content: { msgtype: 'm.image' } })).toMatch(/m\.room\.message\$m\.image/);
    expect(eventSchemaFor({ type: 'm.room.message', content: { msgtype: 'org.custom' } })).toMatch(/m\.room\.message\.yaml/);
    expect(() =>
      validateEvent({ ...base, type: 'm.room.message', content: { msgtype: 'm.text', body: 5 } }),
    ).toThrow(/m\.room\.message\$m\.text\.yaml[\s\S]*\/content\/body must be string/);
    expect(() =>
      validateEvent({ ...base, type: 'm.room.member', state_key: '@a:x', content: { membership: 'married' } }),
    ).toThrow(/membership/);
    expect(() => validateEvent({ type: 'org.example.custom', content: {} })).toThrow(/room_event\.yaml[\s\S]*event_id/);
  });
});
