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

export function on(app: Hono<Env>, method: Method, path: string, handler: Handler, prefixes: string[] = V3): void {
  const paths = prefixes.map((p) => p + path);
  app.on(method, paths, handler);
  const list = knownPatterns.get(app) ?? [];
  for (const p of paths) list.push({ method, regex: toRegex(p) });
  knownPatterns.set(app, list);
}

/** True when the path is an endpoint we serve, under another method (405 rather than 404). */
export function knownPathOtherMethod(app: Hono<Env>, method: string, path: string): boolean {
  return (knownPatterns.get(app) ?? []).some((p) => p.method !== method && p.regex.test(path));
}
