import type { RoomEvent } from '../events/event.ts';
import { serverNameOf } from '../events/identifiers.ts';
import { contentHashMatches, referenceIds, type PDU } from '../events/pdu.ts';
import { getRoomVersion, type RoomVersion } from '../events/room-versions.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import { eventIdOf } from './pdus.ts';

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
  if (serverNameOf(invitee) !== rooms.serverName) return undefined;
  const local = await rooms.localMembership(invitee, pdu.room_id);
  const invite = local?.membership === 'invite' ? await rooms.getEvent(local.eventId) : undefined;
  if (!invite || invite.event.sender !== pdu.sender || !referenceIds(pdu.auth_events).includes(invite.event.event_id)) return undefined;
  const version = inviteRoomVersion(invite.event);
  const eventId = version && eventIdOf(pdu, version);
  if (!version || !eventId || !contentHashMatches(pdu) || !(await signedBy(pdu, version, serverNameOf(pdu.sender)))) return undefined;
  return { eventId, stored: await rooms.recordRemoteMembership({ ...(pdu as unknown as RoomEvent), event_id: eventId }) };
}

/** The room version the invite's stripped state names in its m.room.create (1 when it names none). */
function inviteRoomVersion(invite: RoomEvent): RoomVersion | undefined {
  const state = (invite.unsigned as { invite_room_state?: unknown } | undefined)?.invite_room_state;
  const create = Array.isArray(state) ? state.find((e) => (e as { type?: unknown })?.type === 'm.room.create') : undefined;
  const id = (create as { content?: { room_version?: unknown } } | undefined)?.content?.room_version;
  return getRoomVersion(typeof id === 'string' ? id : '1');
}
