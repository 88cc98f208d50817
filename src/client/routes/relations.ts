import type { Hono } from 'hono';
import { requireSession, type Ctx, type Env } from '../context.ts';
import { forbidden, invalidParam, notFound } from '../../http/matrix-error.ts';
import { intQuery, requireRoomId } from '../http.ts';
import { on, V1 } from './route.ts';

/** The most children or thread roots one page holds, whatever the client asks. */
const MAX_LIMIT = 1000;


/** GET /relations (client-server §Relationships) and GET /threads (§Threading), under v1. */
export function relationsRoutes(app: Hono<Env>): void {
  const relations = async (c: Ctx) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const eventId = c.req.param('eventId')!;
    const dir = c.req.query('dir') ?? 'b';
    if (dir !== 'b' && dir !== 'f') throw invalidParam('dir must be b or f');
    const recurse = c.req.query('recurse');
    if (recurse !== undefined && recurse !== 'true' && recurse !== 'false') throw invalidParam('recurse must be true or false');
    const relType = c.req.param('relType');
    const eventType = c.req.param('eventType');
    const from = c.req.query('from');
    const to = c.req.query('to');
    const page = await c.get('services').sync.relations.relations(roomId, eventId, session, {
      dir,
      limit: Math.max(1, intQuery(c, 'limit', 50, MAX_LIMIT)),
      ...(relType !== undefined ? { relType } : {}),
      ...(eventType !== undefined ? { eventType } : {}),
      ...(from ? { from } : {}),
      ...(to ? { to } : {}),
      ...(recurse !== undefined ? { recurse: recurse === 'true' } : {}),
    });
    if (!page) throw notFound('Event not found');
    return c.json(page);
  };
  on(app, 'GET', '/rooms/:roomId/relations/:eventId', relations, V1);
  on(app, 'GET', '/rooms/:roomId/relations/:eventId/:relType', relations, V1);
  on(app, 'GET', '/rooms/:roomId/relations/:eventId/:relType/:eventType', relations, V1);

  on(app, 'GET', '/rooms/:roomId/threads', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const include = c.req.query('include') ?? 'all';
    if (include !== 'all' && include !== 'participated') throw invalidParam('include must be all or participated');
    const limit = intQuery(c, 'limit', 20, MAX_LIMIT);
    if (limit < 1) throw invalidParam('limit must be greater than zero');
    const services = c.get('services');
    if (!(await services.sync.visibility.mayRead(roomId, session.userId))) throw forbidden(`${session.userId} is not in room ${roomId}`);
    const from = c.req.query('from');
    return c.json(await services.sync.relations.threads(roomId, session, { include, limit, ...(from ? { from } : {}) }));
  }, V1);
}
