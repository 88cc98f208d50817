import type { Hono } from 'hono';
import { requireSession, type Env } from '../context.ts';
import { on } from './route.ts';

/** Hearth's own endpoints, under the unstable prefix the spec sets aside for extensions. */
export const HEARTH_UNSTABLE = ['/_matrix/client/unstable/org.hearth'];

export function hearthRoutes(app: Hono<Env>): void {
  // The caller's events that some server in their room has not received yet (issue 12: the page
  // shows them as pending). Durable: it reads the outgoing queue, so it survives restarts.
  on(
    app,
    'GET',
    '/pending',
    async (c) => {
      const session = await requireSession(c);
      const pending = await c.get('services').federation.pendingEvents(session.userId);
      const body: Record<string, { room_id: string; destinations: string[] }> = {};
      for (const [eventId, { roomId, destinations }] of pending) body[eventId] = { room_id: roomId, destinations };
      return c.json({ pending: body });
    },
    HEARTH_UNSTABLE,
  );
}
