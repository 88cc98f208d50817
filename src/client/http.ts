import type { Context } from 'hono';
import type { z } from 'zod';
import type { Env } from './context.ts';
import { isValidRoomId } from '../events/identifiers.ts';
import { badJson, invalidParam, notJson } from '../http/matrix-error.ts';
import { integerQuery } from '../http/query.ts';
import { readRequestBody } from '../http/request-body.ts';
import { parseJsonObject, validate } from '../http/validate.ts';

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
  const buffer = await readRequestBody(c.req.raw, MAX_BODY_BYTES);
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
  return parseJsonObject(c.get('body')!, options);
}

/** Parses and validates a body against a schema: M_NOT_JSON for bad JSON, M_BAD_JSON for the wrong shape. */
export async function parseBody<S extends z.ZodType>(c: Context<Env>, schema: S, options: { allowEmpty?: boolean } = {}): Promise<z.infer<S>> {
  return validate(schema, await readJsonObject(c, options));
}

/** Parses an optional non-negative integer query parameter (400 M_BAD_JSON otherwise), at most `max`. */
export function intQuery(c: Context, name: string, fallback: number, max = Number.MAX_SAFE_INTEGER): number {
  return integerQuery(name, c.req.query(name), { fallback, max, refuse: badJson });
}

/** The `roomId` path parameter, or 400 `M_INVALID_PARAM` when it is not a room ID. */
export function requireRoomId(c: Context<Env>): string {
  const roomId = c.req.param('roomId')!;
  if (!isValidRoomId(roomId)) throw invalidParam(`invalid room ID ${roomId}`);
  return roomId;
}
