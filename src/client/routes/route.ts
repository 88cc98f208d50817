import type { Hono } from 'hono';
import type { Ctx, Env } from '../context.ts';

/** Most endpoints live under v3 and, for older clients, the legacy r0 prefix. */
export const V3 = ['/_matrix/client/v3', '/_matrix/client/r0'];
export const V1 = ['/_matrix/client/v1'];
/** Cross-signing's endpoints also under the unstable prefix they began with, as Synapse still serves them (older clients use it). */
export const V3_AND_UNSTABLE = [...V3, '/_matrix/client/unstable'];

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';
type Handler = (c: Ctx) => Promise<Response> | Response;

const knownPatterns = new WeakMap<object, { method: Method; regex: RegExp }[]>();

function toRegex(path: string): RegExp {
  const source = path
    .split('/')
    .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^${source}/?$`);
}

/**
 * The endpoints guest accounts may call (client-server §Guest access), as Synapse opens them, which
 * clients are written against: reading and syncing, joining and leaving, sending in rooms they are
 * in, their devices and keys, and their display name. Every other endpoint refuses a guest's token
 * with 403 M_GUEST_ACCESS_FORBIDDEN (`requireSession`).
 */
const GUEST_ENDPOINTS = new Set([
  'GET /account/whoami', 'GET /capabilities', 'GET /devices', 'GET /devices/:deviceId', 'PUT /devices/:deviceId',
  'GET /events', 'GET /sync', 'POST /sync', 'GET /joined_rooms', 'GET /publicRooms', 'POST /publicRooms',
  'POST /keys/upload', 'POST /keys/query', 'GET /keys/changes', 'POST /keys/claim', 'POST /keys/signatures/upload', 'PUT /sendToDevice/:eventType/:txnId',
  'GET /download/:serverName/:mediaId', 'GET /download/:serverName/:mediaId/:fileName', 'GET /thumbnail/:serverName/:mediaId',
  'GET /rooms/:roomId/relations/:eventId', 'GET /rooms/:roomId/relations/:eventId/:relType', 'GET /rooms/:roomId/relations/:eventId/:relType/:eventType',
  'POST /join/:roomIdOrAlias', 'POST /rooms/:roomId/join', 'POST /rooms/:roomId/leave',
  'PUT /rooms/:roomId/send/:eventType/:txnId', 'POST /rooms/:roomId/send/:eventType',
  'GET /rooms/:roomId/state', 'GET /rooms/:roomId/state/:eventType', 'GET /rooms/:roomId/state/:eventType/', 'GET /rooms/:roomId/state/:eventType/:stateKey',
  'PUT /rooms/:roomId/state/:eventType', 'PUT /rooms/:roomId/state/:eventType/', 'PUT /rooms/:roomId/state/:eventType/:stateKey',
  'GET /rooms/:roomId/members', 'GET /rooms/:roomId/messages', 'GET /rooms/:roomId/initialSync', 'GET /rooms/:roomId/event/:eventId',
  'GET /rooms/:roomId/context/:eventId', 'GET /rooms/:roomId/hierarchy',
  'GET /profile/:userId/displayname', 'PUT /profile/:userId/displayname',
]);

export function on(app: Hono<Env>, method: Method, path: string, handler: Handler, prefixes: string[] = V3): void {
  const paths = prefixes.map((p) => p + path);
  app.on(method, paths, GUEST_ENDPOINTS.has(`${method} ${path}`) ? (c) => (c.set('guestsAllowed', true), handler(c)) : handler);
  const list = knownPatterns.get(app) ?? [];
  for (const p of paths) list.push({ method, regex: toRegex(p) });
  knownPatterns.set(app, list);
}

/** True when the path is an endpoint we serve, under another method (405 rather than 404). */
export function knownPathOtherMethod(app: Hono<Env>, method: string, path: string): boolean {
  return (knownPatterns.get(app) ?? []).some((p) => p.method !== method && p.regex.test(path));
}
