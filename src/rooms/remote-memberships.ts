import type { RoomEvent } from '../events/event.ts';
import { nextStreamId } from '../storage/stream.ts';
import { upsertLocalMembership, type RoomStore } from './room-store.ts';
import type { StoredEvent } from './types.ts';

/**
 * Local users' memberships of rooms we are not in (yet): an invite, knock or leave from
 * another server, for a room we may not hold, kept so /sync can show it. The
 * `local_memberships` table holds each local user's membership as we last heard of it,
 * whether it came this way or from the room's own events (room-store.ts).
 */
export class RemoteMemberships {
  constructor(private readonly store: RoomStore) {}

  /**
   * An invite for a local user from another server, to a room we may not know:
   * kept as an outlier with the stripped state it came with, so /sync can show it.
   */
  async record(event: RoomEvent): Promise<StoredEvent> {
    const userId = event.state_key!;
    const membership = String(event.content['membership']);
    let position = 0;
    const stored = await this.store.db.transaction((tx) => {
      const row = this.store.storedIn(tx, event.event_id) ?? this.store.insertEvent(tx, event, { streamOrdering: null, stateSnapshot: null, replacesState: null, outlier: true });
      // A room we are joined to learns of the membership by its own events; this is for the others.
      const joined = tx.get("SELECT 1 FROM local_memberships WHERE user_id = ? AND room_id = ? AND membership = 'join'", [userId, event.room_id]);
      if (!joined) {
        position = nextStreamId(tx);
        upsertLocalMembership(tx, userId, event.room_id, membership, event.event_id, position);
      }
      return row;
    });
    if (position > 0) this.store.options.notify({ position, userIds: [userId] });
    return this.store.cache(stored);
  }

  /** A local user's membership as we last heard of it, in rooms we hold and rooms we don't. */
  async localMembership(userId: string, roomId: string): Promise<{ membership: string; eventId: string } | undefined> {
    const row = await this.store.db.get<{ membership: string; event_id: string }>(
      'SELECT membership, event_id FROM local_memberships WHERE user_id = ? AND room_id = ?', [userId, roomId],
    );
    return row ? { membership: row.membership, eventId: row.event_id } : undefined;
  }

  /** Hides a room the user has left from their /sync (client-server POST /forget). */
  async forget(userId: string, roomId: string): Promise<boolean> {
    return this.store.db.transaction(
      (tx) => tx.run("UPDATE local_memberships SET forgotten = 1 WHERE user_id = ? AND room_id = ? AND membership IN ('leave', 'ban')", [userId, roomId]).changes > 0,
    );
  }
}
