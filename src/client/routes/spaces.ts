import type { Hono } from 'hono';
import { DEFAULT_HIERARCHY_LIMIT, MAX_HIERARCHY_DEPTH, MAX_HIERARCHY_LIMIT } from '../../spaces/hierarchy.ts';
import { requireSession, type Ctx, type Env } from '../context.ts';
import { invalidParam } from '../../http/matrix-error.ts';
import { requireRoomId } from '../http.ts';
import { integerQuery } from '../../http/query.ts';
import { on, V1 } from './route.ts';

/** An optional integer query parameter of at least `min`; M_INVALID_PARAM otherwise. */
const intParam = (c: Ctx, name: string, min: number, fallback: number, max: number): number => integerQuery(name, c.req.query(name), { min, fallback, max });

export function spacesRoutes(app: Hono<Env>): void {
  on(
    app,
    'GET',
    '/rooms/:roomId/hierarchy',
    async (c) => {
      const session = await requireSession(c);
      const roomId = requireRoomId(c);
      const suggested = c.req.query('suggested_only');
      if (suggested !== undefined && suggested !== 'true' && suggested !== 'false') throw invalidParam('suggested_only must be true or false');
      const page = await c.get('services').spaces.page({
        userId: session.userId,
        roomId,
        suggestedOnly: suggested === 'true',
        limit: intParam(c, 'limit', 1, DEFAULT_HIERARCHY_LIMIT, MAX_HIERARCHY_LIMIT),
        maxDepth: intParam(c, 'max_depth', 0, MAX_HIERARCHY_DEPTH, MAX_HIERARCHY_DEPTH),
        from: c.req.query('from') || undefined,
      });
      return c.json(page);
    },
    V1,
  );
}
