import type { Hono } from 'hono';
import { filterSchema, type Filter } from '../../sync/filter.ts';
import { requireSession, type Env } from '../context.ts';
import { invalidParam, MatrixError, notFound } from '../../http/matrix-error.ts';
import { intQuery } from '../http.ts';
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
    return c.json(await services.sync.eventStream.events(session, {
      ...(from ? { from } : {}),
      timeoutMs: Math.min(intQuery(c, 'timeout', 30_000), services.config.maxSyncTimeoutMs),
    }));
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
