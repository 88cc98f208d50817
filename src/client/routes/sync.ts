import type { Hono } from 'hono';
import { filterSchema, type Filter } from '../../sync/filter.ts';
import { requireSession, type Env } from '../context.ts';
import { invalidParam, MatrixError, notFound } from '../../http/matrix-error.ts';
import { intQuery, requireRoomId } from '../http.ts';
import { isValidRoomAlias, isValidRoomId } from '../../events/identifiers.ts';
import { validate } from '../../http/validate.ts';
import { on } from './route.ts';

export function syncRoutes(app: Hono<Env>): void {
  on(app, 'GET', '/sync', async (c) => {
    const session = await requireSession(c);
    const services = c.get('services');
    let filter: Filter = {};
    const filterParam = c.req.query('filter');
    if (filterParam) {
      if (filterParam.trimStart().startsWith('{')) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(filterParam);
        } catch {
          throw new MatrixError(400, 'M_NOT_JSON', 'filter is not valid JSON');
        }
        filter = validate(filterSchema, parsed);
      } else {
        const stored = await services.users.getFilter(session.userId, filterParam);
        if (!stored) throw notFound(`Unknown filter ${filterParam}`);
        filter = validate(filterSchema, stored);
      }
    }
    const setPresence = c.req.query('set_presence') ?? 'online';
    if (!['online', 'offline', 'unavailable'].includes(setPresence)) throw invalidParam('set_presence must be online, offline or unavailable');
    const since = c.req.query('since');
    const response = await services.sync.sync({
      userId: session.userId,
      deviceId: session.deviceId,
      ...(since ? { since } : {}),
      filter,
      fullState: c.req.query('full_state') === 'true',
      // Long-polls are capped (in the browser, below the service worker's lifetime).
      timeoutMs: Math.min(intQuery(c, 'timeout', 0), services.config.maxSyncTimeoutMs),
      setPresence: setPresence as 'online' | 'offline' | 'unavailable',
    });
    return c.json(response);
  });

  // The deprecated event stream (still in the spec, served by Synapse), long-polled like /sync, 30 s by default as Synapse waits.
  on(app, 'GET', '/events', async (c) => {
    const session = await requireSession(c);
    const services = c.get('services');
    const from = c.req.query('from');
    const roomId = c.req.query('room_id');
    if (roomId !== undefined && !isValidRoomId(roomId)) throw invalidParam(`invalid room ID ${roomId}`);
    // A guest reads one room at a time, as Synapse asks of them.
    if (session.isGuest && roomId === undefined) throw new MatrixError(400, 'M_MISSING_PARAM', 'Guests must give room_id');
    return c.json(await services.sync.eventStream.events(session, {
      ...(from ? { from } : {}),
      ...(roomId ? { roomId } : {}),
      timeoutMs: Math.min(intQuery(c, 'timeout', 30_000), services.config.maxSyncTimeoutMs),
    }));
  });

  // Peeking through /sync (MSC2753): the room comes in this device's syncs under rooms.peek.
  on(app, 'POST', '/peek/:roomIdOrAlias', async (c) => {
    const session = await requireSession(c);
    const services = c.get('services');
    const idOrAlias = c.req.param('roomIdOrAlias')!;
    let roomId = idOrAlias;
    if (idOrAlias.startsWith('#')) {
      if (!isValidRoomAlias(idOrAlias)) throw invalidParam(`invalid room alias ${idOrAlias}`);
      roomId = (await services.rooms.resolveAlias(idOrAlias)) ?? '';
      if (!roomId) throw notFound(`Room alias ${idOrAlias} not found`);
    } else if (!isValidRoomId(idOrAlias)) throw invalidParam(`invalid room ID or alias ${idOrAlias}`);
    await services.sync.peeks.peek(session.userId, session.deviceId, roomId);
    return c.json({ room_id: roomId });
  });

  on(app, 'POST', '/rooms/:roomId/unpeek', async (c) => {
    const session = await requireSession(c);
    await c.get('services').sync.peeks.unpeek(session.userId, session.deviceId, requireRoomId(c));
    return c.json({});
  });

  on(app, 'GET', '/rooms/:roomId/initialSync', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    return c.json(await c.get('services').history.roomInitialSync(roomId, session, intQuery(c, 'limit', 10, 1000)));
  });

  on(app, 'GET', '/notifications', async (c) => {
    const session = await requireSession(c);
    const from = c.req.query('from');
    const only = c.req.query('only');
    const result = await c.get('services').sync.push.notifications(session, {
      limit: intQuery(c, 'limit', 20, 100),
      ...(from ? { from } : {}),
      ...(only ? { only } : {}),
    });
    return c.json(result);
  });
}
