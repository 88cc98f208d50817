import type { Hono } from 'hono';
import { z } from 'zod';
import { MatrixError } from '../../http/matrix-error.ts';
import { validate } from '../../http/validate.ts';
import type { FederationCtx, FederationEnv } from '../context.ts';
import { requireAllowedByAcl, serverAllowedInRoom } from '../acl.ts';
import { makeMembership, sendJoin, sendKnock, sendLeave, type InboundMembershipDeps, type RemoteMembership, type SendMembershipRequest } from '../inbound-memberships.ts';
import { isPduShaped } from '../pdus.ts';

const inviteSchema = z.object({ room_version: z.string(), event: z.record(z.string(), z.unknown()), invite_room_state: z.array(z.unknown()).optional() }).loose();

/**
 * make_join / send_join (v2), make_leave / send_leave (v2), make_knock / send_knock
 * and invite (v2): how other servers' users come and go in rooms we are in.
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
  app.put('/_matrix/federation/v2/send_join/:roomId/:eventId', async (c) => c.json(await sendJoin(deps(c), sendRequest(c))));
  app.put('/_matrix/federation/v2/send_leave/:roomId/:eventId', async (c) => {
    await sendLeave(deps(c), sendRequest(c));
    return c.json({});
  });
  app.put('/_matrix/federation/v1/send_knock/:roomId/:eventId', async (c) => c.json(await sendKnock(deps(c), sendRequest(c))));

  app.put('/_matrix/federation/v2/invite/:roomId/:eventId', async (c) => {
    const { federation } = c.get('services');
    const body = validate(inviteSchema, c.get('body'));
    const pdu = body.event;
    if (!isPduShaped(pdu) || pdu.room_id !== c.req.param('roomId')) throw new MatrixError(400, 'M_BAD_JSON', 'the invite is not an event for this room');
    // A room we hold has its ACL; for one we do not, the inviting server is all we know of it.
    if (await c.get('services').rooms.roomVersion(pdu.room_id)) await requireAllowedByAcl(c, pdu.room_id);
    const signed = await federation.receiveInvite(c.get('origin'), body.room_version, pdu, body.invite_room_state ?? []);
    return c.json({ event: signed });
  });
}
