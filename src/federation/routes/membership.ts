import type { Hono } from 'hono';
import { z } from 'zod';
import { MatrixError, forbidden, notFound } from '../../http/matrix-error.ts';
import { validate } from '../../http/validate.ts';
import { serverNameOf } from '../../events/identifiers.ts';
import { computeEventId, type PDU } from '../../events/pdu.ts';
import type { RoomVersion } from '../../events/room-versions.ts';
import type { FederationCtx, FederationEnv } from '../context.ts';
import { requireAllowedByAcl } from '../acl.ts';
import { isPduShaped, toPdu } from '../pdus.ts';

const inviteSchema = z.object({ room_version: z.string(), event: z.record(z.string(), z.unknown()), invite_room_state: z.array(z.unknown()).optional() }).loose();

/** The room must be one we are in, to hand out templates and take joins for it. */
async function residentRoom(c: FederationCtx, roomId: string): Promise<RoomVersion> {
  const { rooms, serverName } = c.get('services');
  const version = await rooms.roomVersion(roomId);
  if (!version || !(await rooms.joinedServers(roomId)).includes(serverName)) throw notFound(`this server is not in room ${roomId}`);
  await requireAllowedByAcl(c, roomId);
  return version;
}

function requireUserOfOrigin(c: FederationCtx, userId: string): void {
  if (serverNameOf(userId) !== c.get('origin')) throw forbidden(`${userId} is not a user of ${c.get('origin')}`);
}

/** The body of a send_*: a membership event of the right kind by a user of the origin, with the ID in the path. */
function membershipEvent(c: FederationCtx, version: RoomVersion, membership: string): { pdu: PDU; eventId: string } {
  const pdu = c.get('body');
  if (!isPduShaped(pdu)) throw new MatrixError(400, 'M_BAD_JSON', 'the body is not an event');
  let eventId: string;
  try {
    eventId = computeEventId(pdu, version);
  } catch {
    throw new MatrixError(400, 'M_BAD_JSON', 'the event has no valid event ID');
  }
  if (eventId !== c.req.param('eventId')) throw new MatrixError(400, 'M_BAD_JSON', `the event's ID is ${eventId}, not ${c.req.param('eventId')}`);
  if (pdu.room_id !== c.req.param('roomId')) throw new MatrixError(400, 'M_BAD_JSON', 'the event is for another room');
  if (pdu.type !== 'm.room.member' || pdu.content['membership'] !== membership || pdu.state_key !== pdu.sender) {
    throw new MatrixError(400, 'M_BAD_JSON', `the event is not a ${membership} by its sender`);
  }
  requireUserOfOrigin(c, pdu.sender);
  return { pdu, eventId };
}

/**
 * make_join / send_join (v2), make_leave / send_leave (v2), make_knock / send_knock
 * and invite (v2): how other servers' users come and go in rooms we are in.
 */
export function membershipRoutes(app: Hono<FederationEnv>): void {
  const makeMembership = (membership: 'join' | 'leave' | 'knock') => async (c: FederationCtx) => {
    const { rooms } = c.get('services');
    const roomId = c.req.param('roomId')!;
    const userId = c.req.param('userId')!;
    requireUserOfOrigin(c, userId);
    const version = await residentRoom(c, roomId);
    if (membership !== 'leave') {
      const supported = c.req.queries('ver') ?? ['1'];
      if (!supported.includes(version.id)) {
        throw new MatrixError(400, 'M_INCOMPATIBLE_ROOM_VERSION', `the room is version ${version.id}`, { room_version: version.id });
      }
    }
    const { event } = await rooms.prepareEvent(roomId, { type: 'm.room.member', sender: userId, state_key: userId, content: { membership } });
    return c.json({ room_version: version.id, event });
  };
  app.get('/_matrix/federation/v1/make_join/:roomId/:userId', makeMembership('join'));
  app.get('/_matrix/federation/v1/make_leave/:roomId/:userId', makeMembership('leave'));
  app.get('/_matrix/federation/v1/make_knock/:roomId/:userId', makeMembership('knock'));

  /** Stores a remote server's membership event as any other event from it; it must be accepted. */
  const acceptMembership = async (c: FederationCtx, membership: string) => {
    const { rooms } = c.get('services');
    const version = await residentRoom(c, c.req.param('roomId')!);
    const { pdu, eventId } = membershipEvent(c, version, membership);
    const stored = await rooms.receiveEvent(pdu);
    if (stored.rejected || stored.softFailed) throw forbidden(`the ${membership} is not allowed: ${stored.rejected ?? 'the room no longer allows it'}`);
    // The joining server knows only us: we hand its event on to the rest of the room.
    await c.get('services').federation.forward(stored.event, version, c.get('origin'));
    return { version, eventId, pdu };
  };

  app.put('/_matrix/federation/v2/send_join/:roomId/:eventId', async (c) => {
    const { rooms, serverName, federation } = c.get('services');
    const { version, eventId, pdu } = await acceptMembership(c, 'join');
    const state = await rooms.loadStateEvents((await rooms.stateAtEvent(eventId, 'before')) ?? new Map());
    const stateEvents = [...state.values()].map((s) => s.event);
    const authChain = await federation.graph.authChain([...stateEvents.map((e) => e.event_id), eventId]);
    return c.json({
      origin: serverName,
      state: stateEvents.map((e) => toPdu(e, version)),
      auth_chain: authChain.map((e) => toPdu(e, version)),
      event: pdu,
      members_omitted: false,
      servers_in_room: await rooms.joinedServers(c.req.param('roomId')!),
    });
  });

  app.put('/_matrix/federation/v2/send_leave/:roomId/:eventId', async (c) => {
    await acceptMembership(c, 'leave');
    return c.json({});
  });

  app.put('/_matrix/federation/v1/send_knock/:roomId/:eventId', async (c) => {
    const { rooms } = c.get('services');
    const { pdu } = await acceptMembership(c, 'knock');
    return c.json({ knock_room_state: await rooms.strippedState(pdu.room_id) });
  });

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
