import type { Hono } from 'hono';
import { z } from 'zod';
import { missingParam, notFound } from '../../http/matrix-error.ts';
import { integerQuery } from '../../http/query.ts';
import { validate } from '../../http/validate.ts';
import type { FederationCtx, FederationEnv } from '../context.ts';
import { toPdu } from '../pdus.ts';

/** How many events one /backfill or /get_missing_events answer carries at most. */
const MAX_EVENTS_PER_ANSWER = 100;

// Both lists default to none, as Synapse reads them: a body without them asks for nothing, and is answered so.
const missingEventsSchema = z
  .object({
    earliest_events: z.array(z.string()).default([]),
    latest_events: z.array(z.string()).default([]),
    limit: z.number().int().min(0).optional(),
    min_depth: z.number().int().optional(),
  })
  .loose();

/** /event, /state, /state_ids, /event_auth, /backfill and /get_missing_events. */
export function eventRoutes(app: Hono<FederationEnv>): void {
  const envelope = (c: FederationCtx, pdus: unknown[]) => ({ origin: c.get('services').serverName, origin_server_ts: c.get('services').now(), pdus });
  const served = (c: FederationCtx) => c.get('services').federation.served;

  app.get('/_matrix/federation/v1/event/:eventId', async (c) => {
    const pdus = await served(c).event(c.get('origin'), c.req.param('eventId'));
    if (!pdus) throw notFound('event not found');
    return c.json(envelope(c, pdus));
  });

  /** The state before an event, as its events and those of their auth chain. */
  const stateAt = async (c: FederationCtx) => {
    // A request without event_id is malformed whatever its room: 400, before the room is looked up.
    const eventId = c.req.query('event_id');
    if (!eventId) throw missingParam('event_id is required');
    return served(c).stateBefore(c.get('origin'), c.req.param('roomId')!, eventId);
  };
  app.get('/_matrix/federation/v1/state/:roomId', async (c) => {
    const { version, state, authChain } = await stateAt(c);
    return c.json({ pdus: state.map((e) => toPdu(e, version)), auth_chain: authChain.map((e) => toPdu(e, version)) });
  });
  app.get('/_matrix/federation/v1/state_ids/:roomId', async (c) => {
    const { state, authChain } = await stateAt(c);
    return c.json({ pdu_ids: state.map((e) => e.event_id), auth_chain_ids: authChain.map((e) => e.event_id) });
  });

  app.get('/_matrix/federation/v1/event_auth/:roomId/:eventId', async (c) => {
    return c.json({ auth_chain: await served(c).eventAuth(c.get('origin'), c.req.param('roomId'), c.req.param('eventId')) });
  });

  app.get('/_matrix/federation/v1/backfill/:roomId', async (c) => {
    const roomId = c.req.param('roomId');
    const from = c.req.queries('v') ?? [];
    // Malformed whatever its room, as /state without event_id: 400 before the room is looked up.
    if (from.length === 0) throw missingParam('v is required');
    const limit = integerQuery('limit', c.req.query('limit'), { fallback: 10, max: MAX_EVENTS_PER_ANSWER, emptyIsInvalid: true });
    const pdus = await served(c).backfill(c.get('origin'), roomId, from, limit);
    return c.json(envelope(c, pdus));
  });

  app.post('/_matrix/federation/v1/get_missing_events/:roomId', async (c) => {
    const body = validate(missingEventsSchema, c.get('body'));
    const limit = Math.min(body.limit ?? 10, MAX_EVENTS_PER_ANSWER);
    const events = await served(c).missingEvents(c.get('origin'), c.req.param('roomId'), body.earliest_events, body.latest_events, limit, body.min_depth ?? 0);
    return c.json({ events });
  });
}
