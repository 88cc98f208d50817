/**
 * Sync and pagination tokens: `s<stream>_<ephemeral>`. The stream part is the
 * global persistent stream position; the ephemeral part covers typing and presence.
 */
export interface SyncToken {
  stream: number;
  ephemeral: number;
}

export class TokenError extends Error {
  override name = 'TokenError';
}

export function formatToken(token: SyncToken): string {
  return `s${token.stream}_${token.ephemeral}`;
}

export function parseToken(text: string): SyncToken {
  const match = /^s(\d{1,15})(?:_(\d{1,15}))?$/.exec(text);
  if (!match) throw new TokenError(`invalid token ${JSON.stringify(text)}`);
  return { stream: Number(match[1]), ephemeral: Number(match[2] ?? 0) };
}
