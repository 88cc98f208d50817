import type { Hono } from 'hono';
import { z } from 'zod';
import { ALL_KEYS, type SearchKey } from '../../search/query.ts';
import { roomEventFilterSchema } from '../../sync/filter.ts';
import { requireSession, type Env } from '../context.ts';
import { parseBody } from '../http.ts';
import { on } from './route.ts';

const roomEventsSchema = z
  .object({
    search_term: z.string(),
    keys: z.array(z.enum(ALL_KEYS as [SearchKey, ...SearchKey[]])).optional(),
    filter: roomEventFilterSchema.optional(),
    order_by: z.enum(['rank', 'recent']).optional(),
    event_context: z
      .object({
        before_limit: z.number().int().min(0).optional(),
        after_limit: z.number().int().min(0).optional(),
        include_profile: z.boolean().optional(),
      })
      .loose()
      .optional(),
    include_state: z.boolean().optional(),
    // Accepted and ignored: results come ungrouped (`groups` is left out of the answer).
    groupings: z.object({ group_by: z.array(z.object({ key: z.enum(['room_id', 'sender']) }).loose()).optional() }).loose().optional(),
  })
  .loose();

const searchSchema = z.object({ search_categories: z.object({ room_events: roomEventsSchema.optional() }).loose() }).loose();

export function searchRoutes(app: Hono<Env>): void {
  on(app, 'POST', '/search', async (c) => {
    const session = await requireSession(c);
    const body = await parseBody(c, searchSchema);
    const criteria = body.search_categories.room_events;
    if (!criteria) return c.json({ search_categories: {} });
    const nextBatch = c.req.query('next_batch');
    const roomEvents = await c.get('services').search.roomEvents(session, criteria, nextBatch || undefined);
    return c.json({ search_categories: { room_events: roomEvents } });
  });
}
