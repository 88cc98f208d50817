import type { Hono } from 'hono';
import { z } from 'zod';
import { validate } from '../../http/validate.ts';
import type { FederationCtx, FederationEnv } from '../context.ts';
import { serverAllowedInRoom } from '../acl.ts';
import { makeMembership, sendJoin, sendKnock, sendLeave, type InboundMembershipDeps, type RemoteMembership, type SendMembershipRequest } from '../inbound-memberships.ts';

const inviteSchema = z.object({ room_version: z.string(), event: z.record(z.string(), z.unknown()), invite_room_state: z.array(z.unknown()).optional() }).loose();
const inviteV1Schema = z.object({ unsigned: z.object({ invite_room_state: z.array(z.unknown()).optional() }).loose().optional() }).loose();

/**
 * make_join / send_join (v2 and v1), make_leave / send_leave (v2 and v1), make_knock /
 * send_knock and invite (v2 and v1): how other servers' users come and go in rooms we are in.
 */
export function membershipRoutes(app: Hono<FederationEnv>): void {
  const deps = (c: FederationCtx): InboundMembershipDeps => {
    const services = c.get('services');
    return { ...services, serverAllowed: (roomId, server) => serverAllowedInRoom(services.rooms, roomId, server) };
  };
  const make = (membership: RemoteMembership) => async (c: FederationCtx) => {
    const request = { origin: c.get('origin'), roomId: c.req.param('roomId')!, userId: c.req.param('userId')!, membership, supportedVersions: c.req.queries('ver') };
    return c.json(await makeMembership(deps(c), request));
  };
  app.get('/_matrix/federation/v1/make_join/:roomId/:userId', make('join'));
  app.get('/_matrix/federation/v1/make_leave/:roomId/:userId', make('leave'));
  app.get('/_matrix/federation/v1/make_knock/:roomId/:userId', make('knock'));

  const sendRequest = (c: FederationCtx): SendMembershipRequest => ({ origin: c.get('origin'), roomId: c.req.param('roomId')!, eventId: c.req.param('eventId'), body: c.get('body') });
  const join = async (c: FederationCtx) => sendJoin(deps(c), sendRequest(c));
  const leave = async (c: FederationCtx) => {
    await sendLeave(deps(c), sendRequest(c));
    return {};
  };
  app.put('/_matrix/federation/v2/send_join/:roomId/:eventId', async (c) => c.json(await join(c)));
  app.put('/_matrix/federation/v2/send_leave/:roomId/:eventId', async (c) => c.json(await leave(c)));
  // The v1 forms, which older servers still call: the same, answered as `[200, body]` (a
  // historical quirk the spec kept until MSC4376 removed them).
  app.put('/_matrix/federation/v1/send_join/:roomId/:eventId', async (c) => c.json([200, await join(c)]));
  app.put('/_matrix/federation/v1/send_leave/:roomId/:eventId', async (c) => c.json([200, await leave(c)]));
  app.put('/_matrix/federation/v1/send_knock/:roomId/:eventId', async (c) => c.json(await sendKnock(deps(c), sendRequest(c))));

  const invite = async (c: FederationCtx, roomVersion: string | undefined, pdu: unknown, inviteRoomState: unknown[]) => ({
    event: await c.get('services').federation.receiveInvite(c.get('origin'), c.req.param('roomId')!, roomVersion, pdu, inviteRoomState),
  });
  app.put('/_matrix/federation/v2/invite/:roomId/:eventId', async (c) => {
    const body = validate(inviteSchema, c.get('body'));
    return c.json(await invite(c, body.room_version, body.event, body.invite_room_state ?? []));
  });
  // v1: the body is the invite event itself, its room's stripped state in `unsigned`.
  app.put('/_matrix/federation/v1/invite/:roomId/:eventId', async (c) => {
    const body = validate(inviteV1Schema, c.get('body'));
    return c.json([200, await invite(c, undefined, body, body.unsigned?.invite_room_state ?? [])]);
  });
}
