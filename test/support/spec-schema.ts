/**
 * The Matrix specification's own machine-readable definitions (test/spec-data/data: OpenAPI 3.1
 * for the client-server and server-server APIs, JSON Schema 2020-12 for events) as the oracle for
 * Hearth's HTTP bodies and events in tests.
 *
 * Every validator throws an Error naming the spec operation (or event schema) and listing ajv's
 * errors; a path or method the spec doesn't define throws too, so a test can't pass by accident.
 * Everything loads lazily on first use and compiled validators are cached.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import yaml from 'js-yaml';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv';

export type SpecApi = 'client' | 'federation';

/** One operation of the OpenAPI definitions, with its full path template. */
export interface SpecOperation {
  api: SpecApi;
  /** File relative to test/spec-data/data, e.g. 'api/client-server/room_send.yaml'. */
  file: string;
  method: string;
  /** Full template, e.g. '/_matrix/client/v3/rooms/{roomId}/send/{eventType}/{txnId}'. */
  template: string;
  /** Other prefixes the same operation answers on (r0 for v3). */
  aliases: string[];
  operationId: string;
  /** JSON pointer of the operation object in its file. */
  pointer: string;
}

/** A request or response body example embedded in the OpenAPI definitions, $refs resolved. */
export interface SpecExample {
  operation: SpecOperation;
  kind: 'request' | 'response';
  /** Response status key ('200', '4XX', …); undefined for requests. */
  status?: string;
  name: string;
  value: unknown;
}

// ---------------------------------------------------------------------------------------------
// Files, URIs and $ref resolution

const DATA_DIR = fileURLToPath(new URL('../spec-data/data/', import.meta.url));
/** Every spec file gets an absolute URI under this base, so relative $refs resolve as URLs. */
const BASE_URI = 'https://spec-data.hearth.invalid/data/';
const ERROR_SCHEMA = 'api/client-server/definitions/errors/error.yaml';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

const API_DIRS: Record<SpecApi, string> = {
  client: 'api/client-server',
  federation: 'api/server-server',
};

/** Keys whose values are data (examples, defaults, enums), never schemas to scan or rewrite. */
const DATA_KEYS = new Set(['example', 'examples', 'default', 'enum', 'const']);

function uriOf(file: string): string {
  return BASE_URI + file;
}

function fileOf(uri: string): string {
  const noFragment = uri.split('#')[0]!;
  if (!noFragment.startsWith(BASE_URI)) throw new Error(`spec-schema: $ref outside the spec data: ${uri}`);
  return decodeURIComponent(noFragment.slice(BASE_URI.length));
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const docs = new Map<string, Json>();

/** Parses a spec file (YAML or JSON) once; OpenAPI 3.0 `nullable` is rewritten to a 2020-12 type union. */
function loadDoc(file: string): Json {
  let doc = docs.get(file);
  if (doc === undefined) {
    const text = readFileSync(DATA_DIR + file, 'utf8');
    doc = (file.endsWith('.json') ? JSON.parse(text) : yaml.load(text)) as Json;
    rewriteNullable(doc);
    docs.set(file, doc);
  }
  return doc;
}

/** `{type: T, nullable: true}` (OpenAPI 3.0) → `{type: [T, 'null']}`, which ajv understands. */
function rewriteNullable(node: Json): void {
  if (Array.isArray(node)) {
    for (const item of node) rewriteNullable(item);
    return;
  }
  if (!isObject(node)) return;
  if (node.nullable === true) {
    const type = node.type;
    if (typeof type === 'string') node.type = [type, 'null'];
    else if (Array.isArray(type) && !type.includes('null')) type.push('null');
    if (Array.isArray(node.enum) && !node.enum.includes(null)) node.enum.push(null);
    delete node.nullable;
  }
  for (const [key, value] of Object.entries(node)) if (!DATA_KEYS.has(key)) rewriteNullable(value);
}

function escapePointerSegment(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

function pointerOf(segments: string[]): string {
  return segments.map((s) => '/' + escapePointerSegment(s)).join('');
}

function getPointer(doc: Json, pointer: string): Json | undefined {
  if (pointer === '' || pointer === '/') return doc;
  let node: Json | undefined = doc;
  for (const raw of pointer.replace(/^\//, '').split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(node)) node = node[Number(key)];
    else if (isObject(node)) node = node[key];
    else return undefined;
  }
  return node;
}

interface Located {
  file: string;
  pointer: string;
  node: Json;
}

/** Follows an OpenAPI Reference Object (`{$ref}`) chain to the object it names. */
function deref(loc: Located): Located {
  let current = loc;
  for (let hops = 0; isObject(current.node) && typeof current.node.$ref === 'string'; hops++) {
    if (hops > 20) throw new Error(`spec-schema: $ref loop at ${current.file}#${current.pointer}`);
    const target = new URL(current.node.$ref, uriOf(current.file));
    const file = fileOf(target.href);
    const pointer = decodeURIComponent(target.hash.replace(/^#/, ''));
    const node = getPointer(loadDoc(file), pointer);
    if (node === undefined) throw new Error(`spec-schema: dangling $ref ${current.node.$ref} in ${current.file}`);
    current = { file, pointer, node };
  }
  return current;
}

/** Walks keys from an OpenAPI object, following Reference Objects on the way. */
function child(loc: Located, ...keys: string[]): Located | undefined {
  let current: Located = deref(loc);
  for (const key of keys) {
    const next = rawChild(current, key);
    if (!next) return undefined;
    current = deref(next);
  }
  return current;
}

/** One key down without following a $ref there (schemas: ajv resolves those, siblings included). */
function rawChild(loc: Located, key: string): Located | undefined {
  const { file, pointer, node } = deref(loc);
  if (!isObject(node) || node[key] === undefined) return undefined;
  return { file, pointer: pointer + '/' + escapePointerSegment(key), node: node[key]! };
}

/**
 * Resolves `$ref`s inside example data the way matrix-spec's own tooling does (scripts/helpers.py):
 * the referenced file or fragment is loaded, its own refs resolved, and the sibling keys are then
 * laid over it (a shallow merge).
 */
function resolveExampleRefs(value: Json, file: string): Json {
  if (Array.isArray(value)) return value.map((item) => resolveExampleRefs(item, file));
  if (!isObject(value)) return value;
  let result: JsonObject = {};
  if (typeof value.$ref === 'string') {
    const target = new URL(value.$ref, uriOf(file));
    const targetFile = fileOf(target.href);
    const fragment = getPointer(loadDoc(targetFile), decodeURIComponent(target.hash.replace(/^#/, '')));
    if (fragment === undefined) throw new Error(`spec-schema: dangling example $ref ${value.$ref} in ${file}`);
    const resolved = resolveExampleRefs(fragment, targetFile);
    // A $ref alone may stand for any value (an array of stripped state events, say).
    if (!isObject(resolved)) {
      if (Object.keys(value).length === 1) return resolved;
      throw new Error(`spec-schema: example $ref ${value.$ref} in ${file} has siblings but is not an object`);
    }
    result = resolved;
  }
  for (const [key, item] of Object.entries(value)) {
    if (key !== '$ref') result[key] = resolveExampleRefs(item, file);
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// ajv

const MATRIX_FORMATS: Record<string, RegExp> = {
  // The spec's string-formats.yaml names these; the patterns follow the appendices' grammars
  // loosely enough for every historical identifier (room IDs lost their server name in v12).
  'mx-user-id': /^@[^:]+:.+$/s,
  'mx-room-id': /^!.+$/s,
  'mx-event-id': /^\$.+$/s,
  'mx-room-alias': /^#[^:]*:.+$/s,
  'mx-server-name': /^(\[[0-9A-Fa-f:.]+\]|[0-9A-Za-z.-]+)(:[0-9]{1,5})?$/,
  'mx-mxc-uri': /^mxc:\/\/[^/]+\/[^/]+$/,
  'mx-unpadded-base64': /^[A-Za-z0-9+/]*$/,
  'mx-urlsafe-unpadded-base64': /^[A-Za-z0-9_-]*$/,
  uri: /^[A-Za-z][A-Za-z0-9+.-]*:\S*$/,
  email: /^[^\s@]+@[^\s@]+$/,
};

let ajvInstance: Ajv2020 | undefined;

function ajv(): Ajv2020 {
  if (ajvInstance) return ajvInstance;
  // strict: false lets OpenAPI's `example`, `x-*` extensions and other annotations through;
  // validateSchema: false because whole OpenAPI documents are registered as schema resources so
  // that fragment refs (#/paths/…, #/components/…) resolve against them.
  const instance = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  for (const [name, pattern] of Object.entries(MATRIX_FORMATS)) instance.addFormat(name, pattern);
  instance.addFormat('int64', {
    type: 'number',
    validate: (n: number) => Number.isInteger(n) && Math.abs(n) <= 2 ** 63,
  });
  instance.addFormat('int32', {
    type: 'number',
    validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31,
  });
  instance.addFormat('float', { type: 'number', validate: () => true });
  ajvInstance = instance;
  return instance;
}

const registered = new Set<string>();

/** Registers a file with ajv, and every file its schemas $ref, transitively. */
function register(file: string): void {
  if (registered.has(file)) return;
  registered.add(file);
  const doc = loadDoc(file);
  // An explicit $id on every file: without it ajv resolves the refs inside a file reached through
  // a $ref-only fragment (`schema: {$ref: definitions/x.yaml}`) against the referring file.
  if (isObject(doc)) doc.$id = uriOf(file);
  ajv().addSchema(doc as object, uriOf(file));
  const refs = new Set<string>();
  collectSchemaRefs(doc, refs);
  for (const ref of refs) {
    const target = new URL(ref, uriOf(file));
    if (!target.href.startsWith(BASE_URI)) continue;
    const targetFile = fileOf(target.href);
    if (targetFile !== file && existsSync(DATA_DIR + targetFile)) register(targetFile);
  }
}

function collectSchemaRefs(node: Json, refs: Set<string>): void {
  if (Array.isArray(node)) {
    for (const item of node) collectSchemaRefs(item, refs);
    return;
  }
  if (!isObject(node)) return;
  for (const [key, value] of Object.entries(node)) {
    if (key === '$ref' && typeof value === 'string') refs.add(value);
    else if (!DATA_KEYS.has(key)) collectSchemaRefs(value, refs);
  }
}

const validators = new Map<string, ValidateFunction>();

function validatorFor(file: string, pointer: string): ValidateFunction {
  const key = `${file}#${pointer}`;
  let validate = validators.get(key);
  if (!validate) {
    register(file);
    const fragment = pointer
      .split('/')
      .map((segment) => encodeURIComponent(segment))
      .join('/');
    validate = ajv().compile({ $ref: `${uriOf(file)}#${fragment}` });
    validators.set(key, validate);
  }
  return validate;
}

function formatErrors(errors: ErrorObject[] | null | undefined): string {
  const lines = (errors ?? []).map((e) => {
    const params = Object.keys(e.params).length ? ' ' + JSON.stringify(e.params) : '';
    const schemaPath = safeDecode(e.schemaPath.replace(BASE_URI, ''));
    return `    ${e.instancePath || '(root)'} ${e.message ?? e.keyword}${params}  [schema ${schemaPath}]`;
  });
  const shown = lines.slice(0, 30);
  if (lines.length > shown.length) shown.push(`    … and ${lines.length - shown.length} more`);
  return shown.join('\n');
}

// ---------------------------------------------------------------------------------------------
// Operations and path matching

type Segment = { literal: string } | { param: string };

interface IndexedOperation extends SpecOperation {
  /** Segment lists of the template and its aliases. */
  patterns: Segment[][];
}

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];
/** Path parameters that may be left off the end of the path with their slash (the spec says so for stateKey). */
const OMITTABLE_TRAILING_PARAMS = new Set(['stateKey']);

const indexes = new Map<SpecApi, IndexedOperation[]>();

function splitTemplate(template: string): Segment[] {
  return template
    .slice(1)
    .split('/')
    .map((part) => {
      const m = /^\{([^}]+)\}$/.exec(part);
      return m ? { param: m[1]! } : { literal: part };
    });
}

function operationIndex(api: SpecApi): IndexedOperation[] {
  let index = indexes.get(api);
  if (index) return index;
  index = [];
  const dir = API_DIRS[api];
  for (const name of readdirSync(DATA_DIR + dir).sort()) {
    if (!name.endsWith('.yaml')) continue;
    const file = `${dir}/${name}`;
    const doc = loadDoc(file);
    if (!isObject(doc) || !isObject(doc.paths)) continue;
    const basePath = String(getPointer(doc, '/servers/0/variables/basePath/default') ?? '');
    for (const [pathKey, pathItem] of Object.entries(doc.paths)) {
      if (!isObject(pathItem)) continue;
      // matrix-spec defines some paths twice (in different files, or with a trailing space as a
      // key-uniqueness hack); both copies are kept and a body may match either.
      const template = basePath + pathKey.trim();
      const aliases: string[] = [];
      if (template.startsWith('/_matrix/client/v3/')) aliases.push(template.replace('/v3/', '/r0/'));
      if (template.startsWith('/_matrix/media/v3/')) aliases.push(template.replace('/v3/', '/r0/'));
      for (const method of HTTP_METHODS) {
        const op = pathItem[method];
        if (!isObject(op)) continue;
        index.push({
          api,
          file,
          method: method.toUpperCase(),
          template,
          aliases,
          operationId: typeof op.operationId === 'string' ? op.operationId : `${method} ${pathKey}`,
          pointer: pointerOf(['paths', pathKey, method]),
          patterns: [template, ...aliases].map(splitTemplate),
        });
      }
    }
  }
  indexes.set(api, index);
  return index;
}

/** Every operation of one API, as the spec defines it. */
export function listSpecOperations(api: SpecApi): SpecOperation[] {
  return operationIndex(api).map(({ patterns: _patterns, ...op }) => op);
}

interface PathMatch {
  /** Extra path segments swallowed by parameters, plus omitted trailing parameters: lower is better. */
  cost: number;
  params: Record<string, string>;
}

/**
 * Matches concrete path segments against a template. A parameter takes one segment, or several
 * when the caller left a '/' unencoded in it (event IDs of room v3, state keys); literals must
 * equal the decoded segment. Returns the cheapest match.
 */
function matchSegments(pattern: Segment[], segments: string[]): PathMatch | undefined {
  let best: PathMatch | undefined;
  const params: Record<string, string> = {};
  const last = pattern[pattern.length - 1];
  const lastOmittable = last !== undefined && 'param' in last && OMITTABLE_TRAILING_PARAMS.has(last.param);
  const walk = (ti: number, si: number, cost: number): void => {
    if (best && cost >= best.cost) return;
    if (ti === pattern.length) {
      if (si === segments.length) best = { cost, params: { ...params } };
      return;
    }
    const seg = pattern[ti]!;
    if ('literal' in seg) {
      if (si < segments.length && safeDecode(segments[si]!) === seg.literal) walk(ti + 1, si + 1, cost);
      return;
    }
    const omittable = OMITTABLE_TRAILING_PARAMS.has(seg.param) && ti === pattern.length - 1;
    if (omittable && si === segments.length) {
      params[seg.param] = '';
      walk(ti + 1, si, cost + 1);
      delete params[seg.param];
    }
    // Leave at least one segment for each later template segment that can't be omitted.
    const later = pattern.length - ti - 1;
    const maxTake = segments.length - si - (lastOmittable && later > 0 ? later - 1 : later);
    for (let take = 1; take <= maxTake; take++) {
      const raw = segments.slice(si, si + take);
      const value = raw.map(safeDecode).join('/');
      if (value === '' && !omittable) continue;
      params[seg.param] = value;
      walk(ti + 1, si + take, cost + take - 1);
      delete params[seg.param];
    }
  };
  walk(0, 0, 0);
  return best;
}

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function pathSegments(path: string): string[] {
  const noOrigin = path.replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/]+/, '');
  const noQuery = noOrigin.split(/[?#]/)[0]!;
  if (!noQuery.startsWith('/')) throw new Error(`spec-schema: not an absolute path: ${path}`);
  return noQuery.slice(1).split('/');
}

/** An operation a concrete path addresses, with the decoded path parameters. */
export interface SpecMatch extends SpecOperation {
  params: Record<string, string>;
}

/**
 * The spec operations a concrete request path and method address (several only where the spec
 * itself defines the same path twice). Throws if the spec has none.
 */
export function findSpecOperations(api: SpecApi, method: string, path: string): SpecMatch[] {
  const segments = pathSegments(path);
  const matches: Array<{ op: IndexedOperation; cost: number; params: Record<string, string> }> = [];
  for (const op of operationIndex(api)) {
    let best: PathMatch | undefined;
    for (const pattern of op.patterns) {
      const m = matchSegments(pattern, segments);
      if (m && (!best || m.cost < best.cost)) best = m;
    }
    if (best) matches.push({ op, cost: best.cost, params: best.params });
  }
  const upper = method.toUpperCase();
  const forMethod = matches.filter((m) => m.op.method === upper);
  if (forMethod.length === 0) {
    const others = [...new Set(matches.map((m) => `${m.op.method} ${m.op.template}`))];
    throw new Error(
      others.length
        ? `spec-schema: the ${api} API has no ${upper} on ${path}; the spec defines: ${others.join(', ')}`
        : `spec-schema: no ${api} API operation in the spec matches ${upper} ${path}`,
    );
  }
  const cheapest = Math.min(...forMethod.map((m) => m.cost));
  const best = forMethod.filter((m) => m.cost === cheapest);
  // Among equally cheap matches prefer templates with more literal segments (more specific).
  const literals = (op: IndexedOperation): number => op.patterns[0]!.filter((s) => 'literal' in s).length;
  const most = Math.max(...best.map((m) => literals(m.op)));
  return best
    .filter((m) => literals(m.op) === most)
    .map(({ op: { patterns: _patterns, ...op }, params }) => ({ ...op, params }));
}

// ---------------------------------------------------------------------------------------------
// Request and response validation

function operationLocated(op: SpecOperation): Located {
  return { file: op.file, pointer: op.pointer, node: getPointer(loadDoc(op.file), op.pointer)! };
}

function describe(op: SpecOperation): string {
  return `${op.method} ${op.template} (operationId ${op.operationId}, ${op.file})`;
}

type SchemaTarget = { file: string; pointer: string; label: string } | { none: string };

function responseSchema(op: SpecOperation, status: number): SchemaTarget {
  const responses = child(operationLocated(op), 'responses');
  const key = String(status);
  const response =
    (responses && child(responses, key)) ??
    (responses && child(responses, `${key[0]}XX`)) ??
    (responses && child(responses, 'default'));
  if (!response) {
    if (status >= 400) {
      return { file: ERROR_SCHEMA, pointer: '', label: `${status} response (standard error schema)` };
    }
    const documented = isObject(responses?.node) ? Object.keys(responses.node).join(', ') : 'none';
    throw new Error(`spec-schema: ${describe(op)} documents no ${status} response (documented: ${documented})`);
  }
  const json = child(response, 'content', 'application/json');
  if (!json) return { none: `the ${status} response has no JSON body in the spec` };
  const schema = rawChild(json, 'schema');
  if (!schema) return { none: `the ${status} response has no JSON schema in the spec` };
  return { file: schema.file, pointer: schema.pointer, label: `${status} response` };
}

function requestSchema(op: SpecOperation, body: unknown): SchemaTarget {
  const requestBody = child(operationLocated(op), 'requestBody');
  if (!requestBody) {
    if (body === undefined || body === null || (isObject(body) && Object.keys(body).length === 0)) {
      return { none: 'the operation takes no request body' };
    }
    throw new Error(`spec-schema: ${describe(op)} takes no request body, but one was given`);
  }
  const content = child(requestBody, 'content');
  const json = content && child(content, 'application/json');
  if (!json) return { none: 'the request body is not JSON in the spec' };
  const schema = rawChild(json, 'schema');
  if (!schema) return { none: 'the request body has no JSON schema in the spec' };
  if (body === undefined && isObject(requestBody.node) && requestBody.node.required !== true) {
    return { none: 'the request body is optional and none was given' };
  }
  return { file: schema.file, pointer: schema.pointer, label: 'request body' };
}

function validateOperations(
  api: SpecApi,
  method: string,
  path: string,
  body: unknown,
  target: (op: SpecOperation) => SchemaTarget,
): void {
  const ops = findSpecOperations(api, method, path);
  const failures: string[] = [];
  for (const op of ops) {
    let t: SchemaTarget;
    try {
      t = target(op);
    } catch (e) {
      failures.push((e as Error).message);
      continue;
    }
    if ('none' in t) return;
    const validate = validatorFor(t.file, t.pointer);
    if (validate(body)) return;
    failures.push(`${describe(op)}, ${t.label} does not match the spec:\n${formatErrors(validate.errors)}`);
  }
  throw new Error(`spec-schema: ${method.toUpperCase()} ${path}\n  ${failures.join('\n  ')}`);
}

/** Validates a client-server API response body against the spec for that path, method and status. */
export function validateClientResponse(method: string, path: string, status: number, body: unknown): void {
  validateOperations('client', method, path, body, (op) => responseSchema(op, status));
}

/** Validates a client-server API request body against the spec for that path and method. */
export function validateClientRequest(method: string, path: string, body: unknown): void {
  validateOperations('client', method, path, body, (op) => requestSchema(op, body));
}

/** Validates a server-server (federation or key) API response body. */
export function validateFederationResponse(method: string, path: string, status: number, body: unknown): void {
  validateOperations('federation', method, path, body, (op) => responseSchema(op, status));
}

/** Validates a server-server (federation or key) API request body. */
export function validateFederationRequest(method: string, path: string, body: unknown): void {
  validateOperations('federation', method, path, body, (op) => requestSchema(op, body));
}

// ---------------------------------------------------------------------------------------------
// Events

const EVENT_SCHEMA_DIR = 'event-schemas/schema';
let eventSchemaFiles: Set<string> | undefined;

/**
 * The event schema file (relative to test/spec-data/data) for a client-format event: by `type`,
 * refined by `content.msgtype` or `content.method` where the spec has a variant schema
 * (m.room.message$m.text, m.key.verification.start$m.sas.v1); unknown types get the generic state
 * or room event schema.
 */
export function eventSchemaFor(event: object): string {
  eventSchemaFiles ??= new Set(readdirSync(DATA_DIR + EVENT_SCHEMA_DIR).filter((f) => f.endsWith('.yaml')));
  const e = event as { type?: unknown; content?: unknown; state_key?: unknown };
  if (typeof e.type === 'string') {
    const content = isObject(e.content) ? e.content : {};
    for (const variant of [content.msgtype, content.method]) {
      const name = `${e.type}$${String(variant)}.yaml`;
      if (typeof variant === 'string' && eventSchemaFiles.has(name)) return `${EVENT_SCHEMA_DIR}/${name}`;
    }
    if (eventSchemaFiles.has(`${e.type}.yaml`)) return `${EVENT_SCHEMA_DIR}/${e.type}.yaml`;
  }
  const generic = 'state_key' in e ? 'state_event.yaml' : 'room_event.yaml';
  return `${EVENT_SCHEMA_DIR}/core-event-schema/${generic}`;
}

/**
 * Validates a client-format event (as /messages, /event or /context return it) against the spec.
 * `schema` overrides the choice: a file name under event-schemas/schema without '.yaml', such as
 * 'm.room.member' or 'core-event-schema/sync_state_event'.
 */
export function validateEvent(event: object, schema?: string): void {
  const file = schema === undefined ? eventSchemaFor(event) : `${EVENT_SCHEMA_DIR}/${schema}.yaml`;
  if (!existsSync(DATA_DIR + file)) throw new Error(`spec-schema: no event schema ${file}`);
  const validate = validatorFor(file, '');
  if (validate(event)) return;
  const type = (event as { type?: unknown }).type;
  throw new Error(
    `spec-schema: event of type ${JSON.stringify(type)} does not match ${file}:\n${formatErrors(validate.errors)}`,
  );
}

// ---------------------------------------------------------------------------------------------
// The spec's own examples, for the self-test

/**
 * Every request and response body example embedded in one API's OpenAPI files: response
 * `examples` (and `example`), request `example`/`examples` or the request schema's `example`,
 * as matrix-spec's scripts/check-openapi-sources.py picks them.
 */
export function listSpecExamples(api: SpecApi): SpecExample[] {
  const out: SpecExample[] = [];
  const take = (operation: SpecOperation, kind: SpecExample['kind'], status: string | undefined, json: Located) => {
    const node = json.node;
    if (!isObject(node)) return;
    if (node.example !== undefined) {
      out.push({ operation, kind, status, name: 'example', value: resolveExampleRefs(node.example, json.file) });
    }
    if (isObject(node.examples)) {
      for (const [name, entry] of Object.entries(node.examples)) {
        const resolved = resolveExampleRefs(entry, json.file);
        if (isObject(resolved) && resolved.value !== undefined) {
          out.push({ operation, kind, status, name, value: resolved.value });
        }
      }
    }
    if (kind === 'request' && node.example === undefined && !isObject(node.examples)) {
      // A sibling `example` beside a schema's $ref wins over the referenced schema's own.
      let schema = rawChild(json, 'schema');
      for (let hops = 0; schema && isObject(schema.node) && hops < 20; hops++) {
        if (schema.node.example !== undefined) {
          const value = resolveExampleRefs(schema.node.example, schema.file);
          out.push({ operation, kind, status, name: 'schema example', value });
          break;
        }
        if (typeof schema.node.$ref !== 'string') break;
        schema = deref({ ...schema, node: { $ref: schema.node.$ref } });
      }
    }
  };
  for (const operation of listSpecOperations(api)) {
    const opLoc = operationLocated(operation);
    const json = child(opLoc, 'requestBody', 'content', 'application/json');
    if (json) take(operation, 'request', undefined, json);
    const responses = child(opLoc, 'responses');
    if (responses && isObject(responses.node)) {
      for (const status of Object.keys(responses.node)) {
        const rjson = child(responses, status, 'content', 'application/json');
        if (rjson) take(operation, 'response', status, rjson);
      }
    }
  }
  return out;
}

/**
 * The top-level property names of an operation's JSON request body (through $refs and
 * allOf/oneOf/anyOf), or undefined when the operation takes no JSON body: what a fuzzer fills.
 */
export function requestBodyProperties(op: SpecOperation): string[] | undefined {
  const json = child(operationLocated(op), 'requestBody', 'content', 'application/json');
  if (!json) return undefined;
  const names = new Set<string>();
  const walk = (loc: Located | undefined, depth: number): void => {
    if (!loc || depth > 10 || !isObject(loc.node)) return;
    const props = child(loc, 'properties');
    if (props && isObject(props.node)) for (const key of Object.keys(props.node)) names.add(key);
    for (const key of ['allOf', 'oneOf', 'anyOf']) {
      const list = child(loc, key);
      if (list && Array.isArray(list.node)) list.node.forEach((_, i) => walk(child(list, String(i)), depth + 1));
    }
  };
  walk(child(json, 'schema'), 0);
  return [...names];
}

/** Example values of an operation's path parameters, for building a concrete path from its template. */
export function pathParameterExamples(op: SpecOperation): Record<string, string> {
  const out: Record<string, string> = {};
  const opLoc = operationLocated(op);
  const pathItem: Located = {
    file: op.file,
    pointer: op.pointer.replace(/\/[^/]+$/, ''),
    node: getPointer(loadDoc(op.file), op.pointer.replace(/\/[^/]+$/, ''))!,
  };
  for (const owner of [pathItem, opLoc]) {
    const params = child(owner, 'parameters');
    if (!params || !Array.isArray(params.node)) continue;
    params.node.forEach((_, i) => {
      const p = child(params, String(i));
      if (!p || !isObject(p.node) || p.node.in !== 'path' || typeof p.node.name !== 'string') return;
      const schema = isObject(p.node.schema) ? p.node.schema : {};
      const example = p.node.example ?? schema.example;
      if (example !== undefined) out[p.node.name] = String(example);
    });
  }
  return out;
}

/** Every event example in event-schemas/examples (except the core/ fragments), $refs resolved. */
export function listEventExamples(): Array<{ file: string; event: JsonObject }> {
  const dir = 'event-schemas/examples';
  const out: Array<{ file: string; event: JsonObject }> = [];
  for (const name of readdirSync(DATA_DIR + dir).sort()) {
    // *.json at the top level are fragments (invite/knock room state) that examples $ref.
    if (!name.endsWith('.yaml')) continue;
    const file = `${dir}/${name}`;
    const event = resolveExampleRefs(loadDoc(file), file);
    if (isObject(event)) out.push({ file, event });
  }
  return out;
}
