import { serverNameOf } from '../events/identifiers.ts';
import type { RoomEvent } from '../events/event.ts';
import { computeEventId, receivedEventForms, type PDU } from '../events/pdu.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import type { RoomGraph } from '../rooms/dag.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import { CodedError } from '../util/coded-error.ts';
import { isPduShaped, toPdu } from './pdus.ts';
import { joinAuthoriser, needsVouching } from './restricted-joins.ts';

/** A make_ or send_ request from another server that we refuse, with its status and errcode. */
export class InboundMembershipError extends CodedError {
  override name = 'InboundMembershipError';
}

const forbidden = (message: string) => new InboundMembershipError(403, 'M_FORBIDDEN', message);
const badJson = (message: string) => new InboundMembershipError(400, 'M_BAD_JSON', message);

/**
 * What answering other servers' membership requests uses (structural, so that this module
 * imports neither the Federation class nor the routes' context, which import the routes).
 */
export interface InboundMembershipDeps {
  serverName: string;
  rooms: Rooms;
  federation: {
    /** Hands an accepted event on to the room's other servers. */
    forward(event: RoomEvent, version: RoomVersion, origin: string): Promise<void>;
    graph: Pick<RoomGraph, 'authChain' | 'authChainOf'>;
    /** Whether a server's signature on an event verifies. */
    signedBy(pdu: PDU, version: RoomVersion, server: string): Promise<boolean>;
    /** The event with our signature added (a restricted join we vouch for). */
    countersign(pdu: PDU, version: RoomVersion): Promise<PDU>;
  };
  /** Whether the room's server ACL lets the server take part (`acl.ts`). */
  serverAllowed(roomId: string, serverName: string): Promise<boolean>;
}

export type RemoteMembership = 'join' | 'leave' | 'knock';

/** The send_join answer (server-server §Joining rooms, v2). */
export interface SendJoinAnswer {
  origin: string;
  state: PDU[];
  auth_chain: PDU[];
  event: PDU;
  members_omitted: false;
  servers_in_room: string[];
}

/** The room must be one we are in, to hand out templates and take joins for it, and the room's ACL must let the origin in. */
async function residentRoom(deps: InboundMembershipDeps, origin: string, roomId: string): Promise<RoomVersion> {
  const version = await deps.rooms.roomVersion(roomId);
  if (!version || !(await deps.rooms.joinedServers(roomId)).includes(deps.serverName)) {
    throw new InboundMembershipError(404, 'M_NOT_FOUND', `this server is not in room ${roomId}`);
  }
  if (!(await deps.serverAllowed(roomId, origin))) throw forbidden(`${origin} is denied by the server ACL of ${roomId}`);
  return version;
}

function requireUserOf(origin: string, userId: string): void {
  if (serverNameOf(userId) !== origin) throw forbidden(`${userId} is not a user of ${origin}`);
}

/**
 * make_join, make_leave, make_knock: an unsigned membership template for a user of the origin,
 * built on the room's current state. A join or knock needs a room version the origin
 * supports (`ver`, v1 when it names none).
 */
export async function makeMembership(
  deps: InboundMembershipDeps,
  request: { origin: string; roomId: string; userId: string; membership: RemoteMembership; supportedVersions?: string[] },
): Promise<{ room_version: string; event: Record<string, unknown> }> {
  const { origin, roomId, userId, membership } = request;
  requireUserOf(origin, userId);
  const version = await residentRoom(deps, origin, roomId);
  if (membership !== 'leave' && !(request.supportedVersions ?? ['1']).includes(version.id)) {
    throw new InboundMembershipError(400, 'M_INCOMPATIBLE_ROOM_VERSION', `the room is version ${version.id}`, { room_version: version.id });
  }
  // A restricted room's join names the user of ours who vouches for it (refused here when the joiner is in no allowed room).
  const authoriser = membership === 'join' ? await joinAuthoriser(deps.rooms, roomId, userId) : undefined;
  const content = { membership, ...(authoriser ? { join_authorised_via_users_server: authoriser } : {}) };
  const { event } = await deps.rooms.prepareEvent(roomId, { type: 'm.room.member', sender: userId, state_key: userId, content });
  return { room_version: version.id, event };
}

/** A send_ body: a membership event of the right kind by a user of the origin, with the ID and room in the path. */
function membershipEvent(origin: string, version: RoomVersion, body: unknown, roomId: string, pathEventId: string | undefined, membership: string): { pdu: PDU; eventId: string } {
  if (!isPduShaped(body)) throw badJson('the body is not an event');
  let eventId: string;
  try {
    eventId = computeEventId(body, version);
  } catch {
    throw badJson('the event has no valid event ID');
  }
  if (eventId !== pathEventId) throw badJson(`the event's ID is ${eventId}, not ${pathEventId}`);
  if (body.room_id !== roomId) throw badJson('the event is for another room');
  if (body.type !== 'm.room.member' || body.content['membership'] !== membership || body.state_key !== body.sender) {
    throw badJson(`the event is not a ${membership} by its sender`);
  }
  requireUserOf(origin, body.sender);
  return { pdu: body, eventId };
}

/** A send_ request: what the origin sent, with where it is for. */
export interface SendMembershipRequest {
  origin: string;
  roomId: string;
  /** The event ID the path names. */
  eventId: string | undefined;
  body: unknown;
}

/**
 * Stores a remote server's membership event as any other event from it; it must be accepted.
 * The sending server may know only us, so we hand the event on to the rest of the room.
 */
async function acceptMembership(deps: InboundMembershipDeps, request: SendMembershipRequest, membership: RemoteMembership): Promise<{ version: RoomVersion; pdu: PDU; eventId: string; stored: StoredEvent }> {
  const version = await residentRoom(deps, request.origin, request.roomId);
  const sent = membershipEvent(request.origin, version, request.body, request.roomId, request.eventId, membership);
  const { eventId } = sent;
  // JSON the room's version forbids (a float from v6 on) is 400 M_BAD_JSON, before any signature is looked at.
  receivedEventForms(sent.pdu, version);
  // An event its sender's server did not sign is no request of theirs: 403, as Synapse answers (the room engine would say 400).
  if (!(await deps.federation.signedBy(sent.pdu, version, request.origin))) throw forbidden(`the ${membership} is not signed by ${request.origin}`);
  const pdu = membership === 'join' ? await vouchedFor(deps, version, request.roomId, sent.pdu) : sent.pdu;
  const stored = await deps.rooms.receiveEvent(pdu);
  if (stored.rejected || stored.softFailed) throw forbidden(`the ${membership} is not allowed: ${stored.rejected ?? 'the room no longer allows it'}`);
  await deps.federation.forward(stored.event, version, request.origin);
  return { version, pdu, eventId, stored };
}

/**
 * A join that names one of our users as its authoriser (a restricted room's, from our make_join):
 * checked again (the joiner must still be in an allowed room) and countersigned, which the auth
 * rules require of the authoriser's server. We vouch for no other server's users.
 */
async function vouchedFor(deps: InboundMembershipDeps, version: RoomVersion, roomId: string, pdu: PDU): Promise<PDU> {
  const authoriser = pdu.content['join_authorised_via_users_server'];
  if (!version.restrictedJoins || authoriser === undefined) return pdu;
  if (typeof authoriser !== 'string' || serverNameOf(authoriser) !== deps.serverName) {
    throw forbidden(`${deps.serverName} vouches only for joins authorised by its own users, not ${String(authoriser)}`);
  }
  await needsVouching(deps.rooms, roomId, pdu.sender);
  return deps.federation.countersign(pdu, version);
}

/** send_join (v2): the join goes in, and the joining server gets the room's state before it with its auth chain. */
export async function sendJoin(deps: InboundMembershipDeps, request: SendMembershipRequest): Promise<SendJoinAnswer> {
  const { version, pdu, eventId, stored } = await acceptMembership(deps, request, 'join');
  const state = await deps.rooms.loadStateEvents((await deps.rooms.stateAtEvent(eventId, 'before')) ?? new Map());
  const stateEvents = [...state.values()].map((s) => s.event);
  const authChain = await deps.federation.graph.authChainOf([...stateEvents, stored.event], version);
  return {
    origin: deps.serverName,
    state: stateEvents.map((e) => toPdu(e, version)),
    auth_chain: authChain.map((e) => toPdu(e, version)),
    // The join as it went in: with our signature when we vouched for it.
    event: toPdu(stored.event, version),
    members_omitted: false,
    servers_in_room: await deps.rooms.joinedServers(request.roomId),
  };
}

/** send_leave (v2). */
export async function sendLeave(deps: InboundMembershipDeps, request: SendMembershipRequest): Promise<void> {
  await acceptMembership(deps, request, 'leave');
}

/** send_knock: the knock goes in, and the knocking server gets the room's stripped state. */
export async function sendKnock(deps: InboundMembershipDeps, request: SendMembershipRequest): Promise<{ knock_room_state: Record<string, unknown>[] }> {
  await acceptMembership(deps, request, 'knock');
  return { knock_room_state: await deps.rooms.strippedState(request.roomId) };
}
