import type { Rooms } from './rooms.ts';

/**
 * Sends a local user's join again in a room, its content their membership and profile as
 * they are now (as Synapse does; the memberships component builds it).
 */
export type RejoinWithProfile = (roomId: string) => Promise<unknown>;

/**
 * A local user's profile changed: their member event in every room they are joined
 * to says so, as in Synapse and Dendrite, so other members see the new name and
 * avatar. A room that no longer lets them send it keeps the old profile.
 */
export async function updateMemberProfiles(rooms: Pick<Rooms, 'roomsOf'>, userId: string, rejoin: RejoinWithProfile): Promise<void> {
  for (const roomId of await rooms.roomsOf(userId, ['join'])) {
    try {
      await rejoin(roomId);
    } catch {
      // Kept as it was: the change applies where it may.
    }
  }
}
