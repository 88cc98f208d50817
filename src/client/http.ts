import type { Context } from 'hono';
import { z } from 'zod';
import type { Env } from './context.ts';
import { isValidRoomId } from '../events/identifiers.ts';
import { badJson, invalidParam, notJson, tooLarge } from './errors.ts';

/** Request bodies above this size are refused with M_TOO_LARGE before parsing. */
export const MAX_BODY_BYTES = 1024 * 1024;

const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Reads a request's body once, before any route looks at the request: bodies over
 * the limit are refused with M_TOO_LARGE and bodies that are not UTF-8 with
 * M_NOT_JSON, whatever else is wrong with the request (client-server §API
 * standards: JSON bodies are UTF-8). Routes parse the text it leaves.
 */
export async function readBody(c: Context<Env>): Promise<void> {
  const length = Number(c.req.header('content-length') ?? '0');
  if (length > MAX_BODY_BYTES) throw tooLarge(`request body exceeds ${MAX_BODY_BYTES} bytes`);
  const buffer = new Uint8Array(await c.req.arrayBuffer());
  if (buffer.length > MAX_BODY_BYTES) throw tooLarge(`request body exceeds ${MAX_BODY_BYTES} bytes`);
  let text: string;
  try {
    text = utf8Decoder.decode(buffer);
  } catch {
    throw notJson('Request body is not valid UTF-8');
  }
  c.set('body', text);
}

/** Parses the request's JSON object body (read by readBody). Empty bodies count as `{}` where the endpoint allows it. */
export async function readJsonObject(c: Context<Env>, options: { allowEmpty?: boolean } = {}): Promise<Record<string, unknown>> {
  if (c.get('body') === undefined) await readBody(c);
  const text = c.get('body')!;
  if (text.trim() === '') {
    if (options.allowEmpty) return {};
    throw notJson('Request body is empty; a JSON object was expected');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw notJson();
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw notJson('Request body must be a JSON object');
  return value as Record<string, unknown>;
}

/** Parses and validates a body against a schema: M_NOT_JSON for bad JSON, M_BAD_JSON for the wrong shape. */
export async function parseBody<S extends z.ZodType>(c: Context<Env>, schema: S, options: { allowEmpty?: boolean } = {}): Promise<z.infer<S>> {
  return validate(schema, await readJsonObject(c, options));
}

export function validate<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const result = schema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const where = issue.path.length > 0 ? issue.path.join('.') : 'body';
    throw badJson(`${where}: ${issue.message}`);
  }
  return result.data;
}

/** JSON object with any content, as Matrix event content is. */
export const jsonObject = z.record(z.string(), z.unknown());

/** Parses an optional non-negative integer query parameter. */
export function intQuery(c: Context, name: string, fallback: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = c.req.query(name);
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw badJson(`${name} must be a non-negative integer`);
  return Math.min(Number(raw), max);
}

/** The `roomId` path parameter, or 400 `M_INVALID_PARAM` when it is not a room ID. */
export function requireRoomId(c: Context<Env>): string {
  const roomId = c.req.param('roomId')!;
  if (!isValidRoomId(roomId)) throw invalidParam(`invalid room ID ${roomId}`);
  return roomId;
}
