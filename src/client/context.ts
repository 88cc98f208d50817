import type { Context } from 'hono';
import type { Session } from '../users/users.ts';
import { MatrixError, missingToken, unknownToken } from '../http/matrix-error.ts';
import type { ClientServices } from './services.ts';

/**
 * `body` is the request body as text, once read (http.ts readBody); `guestsAllowed`, set by
 * the route (`on(…, { guests: true })`), lets guest accounts' tokens through requireSession.
 */
export type Env = { Variables: { session: Session; services: ClientServices; body: string; guestsAllowed: boolean } };
export type Ctx = Context<Env>;

/** The access token from `Authorization: Bearer …` or, as the spec still allows, `?access_token=`. */
export function accessToken(c: Context): string | undefined {
  const header = c.req.header('authorization');
  if (header) {
    const match = /^Bearer\s+(\S+)$/i.exec(header.trim());
    return match ? match[1] : undefined;
  }
  return c.req.query('access_token') || undefined;
}

/**
 * Authenticates the request; M_MISSING_TOKEN / M_UNKNOWN_TOKEN otherwise. A guest's token
 * passes only on the endpoints open to guests (client-server §Guest access; Synapse's list):
 * elsewhere 403 M_GUEST_ACCESS_FORBIDDEN.
 */
export async function requireSession(c: Ctx): Promise<Session> {
  const existing = c.get('session');
  if (existing) return existing;
  const token = accessToken(c);
  if (!token) throw missingToken();
  const session = await c.get('services').users.authenticate(token);
  if (!session) throw unknownToken();
  if (session.isGuest && !c.get('guestsAllowed')) throw new MatrixError(403, 'M_GUEST_ACCESS_FORBIDDEN', 'Guest access is not allowed on this endpoint');
  c.set('session', session);
  return session;
}
