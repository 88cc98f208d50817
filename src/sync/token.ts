import type { TopologicalPosition } from '../rooms/timeline.ts';
import { CodedError } from '../util/coded-error.ts';

/**
 * Sync tokens, `s<stream>_<ephemeral>`: the stream part is the global persistent
 * stream position; the ephemeral part covers typing and presence.
 */
export interface SyncToken {
  stream: number;
  ephemeral: number;
}

/**
 * Pagination tokens of /messages and /context: a topological position in one
 * room, `t<depth>_<stream>` (the stream part is negative for backfilled history),
 * or a sync token, which /messages accepts too (a /sync prev_batch, for instance).
 */
export type PaginationToken = { topological: TopologicalPosition } | { sync: SyncToken };

/** A token that does not parse: 400 `M_INVALID_PARAM`. */
export class TokenError extends CodedError {
  override name = 'TokenError';
  constructor(message: string) {
    super(400, 'M_INVALID_PARAM', message);
  }
}

export function formatToken(token: SyncToken): string {
  return `s${token.stream}_${token.ephemeral}`;
}

export function parseToken(text: string): SyncToken {
  const match = /^s(\d{1,15})(?:_(\d{1,15}))?$/.exec(text);
  if (!match) throw new TokenError(`invalid token ${JSON.stringify(text)}`);
  return { stream: Number(match[1]), ephemeral: Number(match[2] ?? 0) };
}

export function formatTopologicalToken(position: TopologicalPosition): string {
  return `t${position.depth}_${position.stream}`;
}

export function parsePaginationToken(text: string): PaginationToken {
  if (!text.startsWith('t')) return { sync: parseToken(text) };
  const match = /^t(-?\d{1,16})_(-?\d{1,16})$/.exec(text);
  const [depth, stream] = [Number(match?.[1]), Number(match?.[2])];
  if (!match || !Number.isSafeInteger(depth) || !Number.isSafeInteger(stream)) throw new TokenError(`invalid token ${JSON.stringify(text)}`);
  return { topological: { depth, stream } };
}
