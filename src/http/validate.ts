import { z } from 'zod';
import { badJson, notJson } from './matrix-error.ts';

/** Checks a parsed body (or part of one) against a schema: 400 `M_BAD_JSON` naming the first field that is wrong. */
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

/** Parses a body's text as a JSON object: 400 `M_NOT_JSON` otherwise. Empty text counts as `{}` where the endpoint allows it. */
export function parseJsonObject(text: string, options: { allowEmpty?: boolean } = {}): Record<string, unknown> {
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
