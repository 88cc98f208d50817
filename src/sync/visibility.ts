import { stateKey } from '../events/event.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';

/**
 * History visibility (client-server §Room history visibility): whether a user may
 * see an event, from the room's state at that event. Rejected, soft-failed and
 * outlier events are never served.
 */
export class Visibility {
  constructor(private readonly rooms: Rooms) {}

  async canSee(userId: string, stored: StoredEvent, currentMembership?: string): Promise<boolean> {
    if (stored.rejected || stored.softFailed || stored.outlier || stored.stateSnapshot === null) return false;
    const event = stored.event;
    // Users always see their own membership changes (a leave, a kick, a ban).
    if (event.type === 'm.room.member' && event.state_key === userId) return true;
    const state = await this.rooms.stateStore.load(stored.stateSnapshot);
    const visibilityNid = state.get(stateKey('m.room.history_visibility', ''));
    const visibilityEvent = visibilityNid === undefined ? undefined : await this.rooms.getEventByNid(visibilityNid);
    const visibility = String(visibilityEvent?.event.content['history_visibility'] ?? 'shared');
    if (visibility === 'world_readable') return true;

    const memberNid = state.get(stateKey('m.room.member', userId));
    const member = memberNid === undefined ? undefined : await this.rooms.getEventByNid(memberNid);
    const membership = member?.event.content['membership'] as string | undefined;
    if (membership === 'join') return true;
    if (visibility === 'invited') return membership === 'invite';
    if (visibility === 'shared') {
      const current = currentMembership ?? (await this.rooms.membership(event.room_id, userId));
      return current === 'join';
    }
    return false;
  }

  async filter(userId: string, events: StoredEvent[]): Promise<StoredEvent[]> {
    if (events.length === 0) return events;
    const current = await this.rooms.membership(events[0]!.event.room_id, userId);
    const out: StoredEvent[] = [];
    for (const stored of events) if (await this.canSee(userId, stored, current)) out.push(stored);
    return out;
  }
}
