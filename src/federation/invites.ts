import { asRoomEvent, authEventIds, eventIdOf, referenceIds, type PDU } from '../events/pdu.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import { RoomError } from '../rooms/errors.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';

/**
 * An invite that came by `/invite` for a room this server is joined to, whose prev and auth
 * events we hold, is taken into the room at once as the ordinary remote event it is (signed by
 * its origin, checked by the room engine like any other): a local user's join right after it then
 * builds on the invite, instead of waiting for its copy by `/send` (then a duplicate, ignored).
 * Returns undefined when the invite is for a room we do not follow (or not yet far enough to place
 * it): the caller keeps it beside the room, for /sync. An invite the room's auth rules refuse, by
 * its history or the room as it is now, is refused.
 */
export async function takeInviteIntoRoom(rooms: Rooms, pdu: PDU, version: RoomVersion): Promise<StoredEvent | undefined> {
  const roomId = pdu.room_id;
  const eventId = eventIdOf(pdu, version);
  if (roomId === undefined || eventId === undefined) return undefined;
  const held = await rooms.roomVersion(roomId);
  if (held?.id !== version.id || !(await rooms.joinedServers(roomId)).includes(rooms.serverName)) return undefined;
  for (const id of authEventIds(asRoomEvent(pdu, eventId, version), version)) if (!(await rooms.getEvent(id))) return undefined;
  for (const id of referenceIds(pdu.prev_events)) {
    const stored = await rooms.getEvent(id);
    if (!stored || stored.outlier) return undefined;
  }
  const stored = await rooms.receiveEvent(pdu);
  if (stored.rejected) throw new RoomError('forbidden', `the invite breaks the room's auth rules: ${stored.rejected}`);
  if (stored.softFailed) throw new RoomError('forbidden', 'the invite is not allowed by the room as it is now');
  return stored;
}
