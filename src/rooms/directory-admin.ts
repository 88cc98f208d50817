import type { JsonObject } from '../crypto/canonical-json.ts';
import { RoomError } from './errors.ts';
import { requireMayDeleteAlias, requireMayPublish } from './room-policy.ts';
import type { Rooms } from './rooms.ts';

/** What deleting an alias and listing a room read and write of the room engine. */
export type DirectoryRooms = Pick<Rooms, 'roomVersion' | 'currentStateEvent' | 'resolveAlias' | 'aliasCreator' | 'deleteAlias' | 'sendEvents' | 'exists' | 'setPublished'>;

/**
 * Deletes a local alias (client-server DELETE /directory/room/{roomAlias}): its creator may,
 * and anyone with the level to send `m.room.canonical_alias`. An alias that no longer resolves
 * does not stay the room's canonical one or an alternative (as Synapse does); the deleter may
 * lack the power to change that event, and the alias is gone either way.
 */
export async function deleteRoomAlias(rooms: DirectoryRooms, alias: string, userId: string): Promise<void> {
  const roomId = await rooms.resolveAlias(alias);
  if (!roomId) throw new RoomError('not_found', `Room alias ${alias} not found`);
  await requireMayDeleteAlias(rooms, alias, roomId, userId);
  await rooms.deleteAlias(alias);
  const canonical = (await rooms.currentStateEvent(roomId, 'm.room.canonical_alias', ''))?.event.content ?? {};
  const alternatives = Array.isArray(canonical['alt_aliases']) ? canonical['alt_aliases'] : [];
  if (canonical['alias'] !== alias && !alternatives.includes(alias)) return;
  const content: JsonObject = { ...(canonical as JsonObject), alt_aliases: alternatives.filter((a) => a !== alias) as JsonObject[] };
  if (content['alias'] === alias) delete content['alias'];
  if ((content['alt_aliases'] as unknown[]).length === 0) delete content['alt_aliases'];
  await rooms.sendEvents(roomId, [{ type: 'm.room.canonical_alias', state_key: '', sender: userId, content }]).catch(() => undefined);
}

/** Lists a room in the public directory or takes it off (PUT /directory/list/room/{roomId}), for a user with the room's `state_default` level. */
export async function setRoomVisibility(rooms: DirectoryRooms, roomId: string, userId: string, visibility: 'public' | 'private'): Promise<void> {
  if (!(await rooms.exists(roomId))) throw new RoomError('not_found', 'Unknown room');
  await requireMayPublish(rooms, roomId, userId);
  await rooms.setPublished(roomId, visibility === 'public');
}
