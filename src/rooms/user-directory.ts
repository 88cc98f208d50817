import type { Rooms } from './rooms.ts';

/** One result of a user directory search (client-server §User directory). */
export interface DirectoryUser {
  user_id: string;
  display_name?: string;
  avatar_url?: string;
}

/**
 * The user directory: the users a searcher may find are those who share a room with
 * them and those in rooms anyone may join or read (world_readable) that a local user is in
 * (a room our server has left is a stale copy), as Synapse does by default. Worked out from
 * the rooms' current state at each search rather than kept in an index: a personal server
 * has a few hundred rooms at most, and reading live state means display names, joins,
 * leaves, join rule and history visibility changes show at once with nothing to keep in step.
 *
 * A user matches when every word of the term starts a word of their user ID or display
 * name (case-insensitive). Users who share a room with the searcher come first. The
 * searcher finds themselves only through an open room (Synapse pairs only distinct users).
 */
export async function searchUserDirectory(rooms: Rooms, searcher: string, term: string, limit: number): Promise<{ results: DirectoryUser[]; limited: boolean }> {
  const wanted = words(term);
  if (wanted.length === 0) return { results: [], limited: false };
  const shared = new Set(await rooms.roomsOf(searcher));
  const open = new Set(await rooms.roomsOpenToAll());
  const candidates = new Map<string, DirectoryUser & { sharesRoom: boolean }>();
  for (const roomId of new Set([...shared, ...open])) {
    for (const userId of await rooms.members(roomId)) {
      // A private room shares nothing with oneself: the searcher is found only through an open room, as in Synapse.
      if (userId === searcher && !open.has(roomId)) continue;
      const known = candidates.get(userId);
      if (known) {
        known.sharesRoom ||= shared.has(roomId);
        continue;
      }
      const content = (await rooms.currentStateEvent(roomId, 'm.room.member', userId))?.event.content ?? {};
      const entry: DirectoryUser & { sharesRoom: boolean } = { user_id: userId, sharesRoom: shared.has(roomId) };
      if (typeof content['displayname'] === 'string' && content['displayname'] !== '') entry.display_name = content['displayname'];
      if (typeof content['avatar_url'] === 'string' && content['avatar_url'] !== '') entry.avatar_url = content['avatar_url'];
      candidates.set(userId, entry);
    }
  }
  const matches = [...candidates.values()].filter((user) => {
    const have = words(`${user.user_id} ${user.display_name ?? ''}`);
    return wanted.every((w) => have.some((h) => h.startsWith(w)));
  });
  matches.sort((a, b) => Number(b.sharesRoom) - Number(a.sharesRoom) || (a.display_name ?? a.user_id).localeCompare(b.display_name ?? b.user_id));
  return { results: matches.slice(0, limit).map(({ sharesRoom: _, ...user }) => user), limited: matches.length > limit };
}

/** Lower-cased words; a user ID's sigil, localpart and server name are separate words. */
function words(text: string): string[] {
  return text.toLowerCase().split(/[^\p{L}\p{N}_]+/u).filter(Boolean);
}
