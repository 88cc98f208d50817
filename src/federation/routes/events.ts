import type { Hono } from 'hono';
import { z } from 'zod';
import { forbidden, missingParam, notFound } from '../../http/matrix-error.ts';
import { integerQuery } from '../../http/query.ts';
import { validate } from '../../http/validate.ts';
import type { PDU } from '../../events/pdu.ts';
import { redactEvent } from '../../events/redaction.ts';
import type { RoomVersion } from '../../events/room-versions.ts';
import type { StoredEvent } from '../../rooms/rooms.ts';
import type { FederationCtx, FederationEnv } from '../context.ts';
import { requireAllowedByAcl } from '../acl.ts';
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

/** History and state are served to servers in the room, never to others. */
async function roomForOrigin(c: FederationCtx, roomId: string): Promise<RoomVersion> {
  const { rooms } = c.get('services');
  const version = await rooms.roomVersion(roomId);
  if (!version) throw notFound(`room ${roomId} is unknown here`);
  if (!(await rooms.joinedServers(roomId)).includes(c.get('origin'))) throw forbidden(`${c.get('origin')} is not in room ${roomId}`);
  await requireAllowedByAcl(c, roomId);
  return version;
}

/** The event must be one of this room's that we hold. */
async function eventInRoom(c: FederationCtx, roomId: string, eventId: string) {
  const stored = await c.get('services').rooms.getEvent(eventId);
  if (!stored || stored.event.room_id !== roomId || stored.rejected) throw notFound(`event ${eventId} is unknown here`);
  return stored;
}

/**
 * History as another server may see it: events its users could not see under the room's
 * history visibility go redacted (`Visibility.serverMaySee`), keeping their place in the DAG,
 * and so do events a redaction applied to.
 */
async function historyFor(c: FederationCtx, events: StoredEvent[], version: RoomVersion): Promise<PDU[]> {
  const { visibility } = c.get('services').sync;
  const origin = c.get('origin');
  const pdus: PDU[] = [];
  for (const stored of events) {
    const pdu = toPdu(stored.event, version);
    const whole = stored.redactedBy === null && (await visibility.serverMaySee(origin, stored));
    pdus.push(whole ? pdu : (redactEvent(pdu, version) as unknown as PDU));
  }
  return pdus;
}

/** /event, /state, /state_ids, /event_auth, /backfill and /get_missing_events. */
export function eventRoutes(app: Hono<FederationEnv>): void {
  const envelope = (c: FederationCtx, pdus: unknown[]) => ({ origin: c.get('services').serverName, origin_server_ts: c.get('services').now(), pdus });

  app.get('/_matrix/federation/v1/event/:eventId', async (c) => {
    const stored = await c.get('services').rooms.getEvent(c.req.param('eventId'));
    if (!stored || stored.rejected) throw notFound('event not found');
    const version = await roomForOrigin(c, stored.event.room_id);
    return c.json(envelope(c, await historyFor(c, [stored], version)));
  });

  /** The state before an event, as the IDs of its events and of their auth chain. */
  const stateAt = async (c: FederationCtx) => {
    const { rooms, federation } = c.get('services');
    const roomId = c.req.param('roomId')!;
    // A request without event_id is malformed whatever its room: 400, before the room is looked up.
    const eventId = c.req.query('event_id');
    if (!eventId) throw missingParam('event_id is required');
    const version = await roomForOrigin(c, roomId);
    await eventInRoom(c, roomId, eventId);
    const nids = await rooms.stateAtEvent(eventId, 'before');
    if (!nids) throw notFound(`no state is known at ${eventId}`);
    const state = [...(await rooms.loadStateEvents(nids)).values()].map((s) => s.event);
    const authChain = await federation.graph.authChainOf(state, version);
    return { version, state, authChain };
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
    const roomId = c.req.param('roomId');
    const version = await roomForOrigin(c, roomId);
    await eventInRoom(c, roomId, c.req.param('eventId'));
    const chain = await c.get('services').federation.graph.authChain([c.req.param('eventId')], version);
    return c.json({ auth_chain: chain.map((e) => toPdu(e, version)) });
  });

  app.get('/_matrix/federation/v1/backfill/:roomId', async (c) => {
    const roomId = c.req.param('roomId');
    const version = await roomForOrigin(c, roomId);
    const from = c.req.queries('v') ?? [];
    if (from.length === 0) throw missingParam('v is required');
    const limit = integerQuery('limit', c.req.query('limit'), { fallback: 10, max: MAX_EVENTS_PER_ANSWER, emptyIsInvalid: true });
    const events = await c.get('services').federation.graph.backfill(roomId, from, limit);
    return c.json(envelope(c, await historyFor(c, events, version)));
  });

  app.post('/_matrix/federation/v1/get_missing_events/:roomId', async (c) => {
    const roomId = c.req.param('roomId');
    const version = await roomForOrigin(c, roomId);
    const body = validate(missingEventsSchema, c.get('body'));
    const limit = Math.min(body.limit ?? 10, MAX_EVENTS_PER_ANSWER);
    const events = await c.get('services').federation.graph.missingEvents(roomId, body.earliest_events, body.latest_events, limit, body.min_depth ?? 0);
    return c.json({ events: await historyFor(c, events, version) });
  });
}
