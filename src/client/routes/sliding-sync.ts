import type { Hono } from 'hono';
import { z } from 'zod';
import { requireSession, type Env } from '../context.ts';
import { intQuery, parseBody } from '../http.ts';
import { on } from './route.ts';

const requiredState = z.array(z.tuple([z.string(), z.string()])).max(1000).default([]);
const timelineLimit = z.number().int().min(0).max(1000).default(0);
const roomConfig = z.object({ required_state: requiredState, timeline_limit: timelineLimit });
const roomTypes = z.array(z.string().nullable()).max(100);
const list = roomConfig.extend({
  ranges: z.array(z.tuple([z.number().int().min(0), z.number().int().min(0)]).refine(([a, b]) => a <= b, 'a range starts at or before its end')).max(100).default([]),
  filters: z.object({
    is_dm: z.boolean().optional(),
    is_encrypted: z.boolean().optional(),
    is_invite: z.boolean().optional(),
    room_types: roomTypes.optional(),
    not_room_types: roomTypes.optional(),
    spaces: z.array(z.string()).max(100).optional(),
  }).optional(),
});
const scoped = z.object({ enabled: z.boolean().optional(), lists: z.array(z.string()).optional(), rooms: z.array(z.string()).optional() });
const body = z.object({
  conn_id: z.string().max(200).optional(),
  txn_id: z.string().max(200).optional(),
  lists: z.record(z.string().max(100), list).refine((l) => Object.keys(l).length <= 100, 'at most 100 lists').default({}),
  room_subscriptions: z.record(z.string().startsWith('!'), roomConfig).default({}),
  unsubscribe_rooms: z.array(z.string()).default([]),
  extensions: z.object({
    to_device: z.object({ enabled: z.boolean().optional(), since: z.string().optional(), limit: z.number().int().min(1).optional() }).optional(),
    e2ee: z.object({ enabled: z.boolean().optional() }).optional(),
    account_data: scoped.optional(),
    receipts: scoped.optional(),
    typing: scoped.optional(),
  }).default({}),
});

/** Simplified sliding sync (MSC4186), at the unstable prefix Synapse and matrix-js-sdk use. */
export function slidingSyncRoutes(app: Hono<Env>): void {
  on(app, 'POST', '/sync', async (c) => {
    const session = await requireSession(c);
    const services = c.get('services');
    const request = await parseBody(c, body, { allowEmpty: true });
    const pos = c.req.query('pos');
    return c.json(await services.slidingSync.sync({
      userId: session.userId,
      deviceId: session.deviceId,
      connId: request.conn_id ?? '',
      ...(pos !== undefined ? { pos } : {}),
      ...(request.txn_id !== undefined ? { txnId: request.txn_id } : {}),
      timeoutMs: Math.min(intQuery(c, 'timeout', 0), services.config.maxSyncTimeoutMs),
      lists: request.lists,
      roomSubscriptions: request.room_subscriptions,
      unsubscribeRooms: request.unsubscribe_rooms,
      extensions: request.extensions,
    }));
  }, ['/_matrix/client/unstable/org.matrix.simplified_msc3575']);
}
