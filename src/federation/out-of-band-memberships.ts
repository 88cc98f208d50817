import type { JsonObject } from '../crypto/canonical-json.ts';
import type { RoomEvent } from '../events/event.ts';
import { serverNameOf } from '../events/identifiers.ts';
import { computeEventId, contentHashMatches, eventIdOf, referenceIds, type PDU } from '../events/pdu.ts';
import { getRoomVersion, type RoomVersion } from '../events/room-versions.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';

// Memberships of local users in rooms we hold nothing of but an invite or a knock, changed
// with no resident server's say: an invite withdrawn by its inviter, and a leave we make here.

/**
 * An invite of a local user withdrawn by its inviter (a kick or a ban of the invitee), for a room we
 * hold nothing of but that invite: stored beside it, so the invitee's /sync shows the room as left
 * and their client can no longer accept it. As in Synapse, we cannot auth it against the room's
 * state, so it must name the invite among its auth events, be sent by the inviter and be signed by
 * the inviter's server. Anything else for such a room is not ours to keep: undefined.
 */
export async function receiveRescindedInvite(
  rooms: Rooms,
  pdu: PDU,
  signedBy: (pdu: PDU, version: RoomVersion, server: string) => Promise<boolean>,
): Promise<{ eventId: string; stored: StoredEvent } | undefined> {
  const membership = pdu.content['membership'];
  const invitee = pdu.state_key;
  if (pdu.type !== 'm.room.member' || typeof invitee !== 'string' || invitee === pdu.sender || (membership !== 'leave' && membership !== 'ban')) return undefined;
  if (serverNameOf(invitee) !== rooms.serverName || pdu.room_id === undefined) return undefined;
  const local = await rooms.localMembership(invitee, pdu.room_id);
  const invite = local?.membership === 'invite' ? await rooms.getEvent(local.eventId) : undefined;
  if (!invite || invite.event.sender !== pdu.sender || !referenceIds(pdu.auth_events).includes(invite.event.event_id)) return undefined;
  const version = strippedStateVersion(invite.event);
  const eventId = version && eventIdOf(pdu, version);
  if (!version || !eventId || !contentHashMatches(pdu) || !(await signedBy(pdu, version, serverNameOf(pdu.sender)))) return undefined;
  return { eventId, stored: await rooms.recordRemoteMembership({ ...(pdu as unknown as RoomEvent), event_id: eventId }) };
}

/**
 * Rejects an invite, or withdraws a knock, that no server in the room would take the leave for (all
 * have left, or none can be reached): the leave is made here, on top of the invite or knock alone,
 * and kept with the user's memberships, as Synapse does. Undefined when the user holds neither.
 */
export async function leaveOutOfBand(
  rooms: Rooms,
  roomId: string,
  userId: string,
  content: JsonObject,
  sign: (template: Record<string, unknown>, version: RoomVersion, content: JsonObject) => Promise<{ event: PDU }>,
): Promise<StoredEvent | undefined> {
  // A room we hold a copy of takes its leave in the DAG, not out of band.
  if (await rooms.exists(roomId)) return undefined;
  const local = await rooms.localMembership(userId, roomId);
  const previous = local && (local.membership === 'invite' || local.membership === 'knock') ? await rooms.getEvent(local.eventId) : undefined;
  const version = previous && strippedStateVersion(previous.event);
  if (!previous || !version) return undefined;
  const prev = previous.event;
  const reference = version.eventReferences === 'pairs' ? [prev.event_id, { sha256: prev.hashes.sha256 }] : prev.event_id;
  const template = { type: 'm.room.member', room_id: roomId, sender: userId, state_key: userId, prev_events: [reference], auth_events: [...prev.auth_events, reference], depth: prev.depth + 1 };
  const { event } = await sign(template, version, { ...content, membership: 'leave' });
  return rooms.recordRemoteMembership({ ...(event as unknown as RoomEvent), event_id: computeEventId(event, version) });
}

/** The room version an invite's or knock's stripped state names in its m.room.create (1 when it names none). */
function strippedStateVersion(membership: RoomEvent): RoomVersion | undefined {
  const unsigned = membership.unsigned as { invite_room_state?: unknown; knock_room_state?: unknown } | undefined;
  const state = unsigned?.invite_room_state ?? unsigned?.knock_room_state;
  const create = Array.isArray(state) ? state.find((e) => (e as { type?: unknown })?.type === 'm.room.create') : undefined;
  const id = (create as { content?: { room_version?: unknown } } | undefined)?.content?.room_version;
  return getRoomVersion(typeof id === 'string' ? id : '1');
}
