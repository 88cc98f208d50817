import { authEventIds, referenceIds } from '../events/pdu.ts';
import type { RoomEvent } from '../events/event.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import type { Rooms, StoredEvent } from './rooms.ts';

/**
 * Walks over a room's event graph, for what other servers ask of it: auth chains
 * (joins, /event_auth, /state), history going back (/backfill) and the events
 * between two points (/get_missing_events). Read-only, on the room engine's API.
 */
export class RoomGraph {
  constructor(private readonly rooms: Rooms) {}

  /**
   * Every event in the auth chains of the given events (of a room of this version), not the
   * events themselves; oldest first by depth. From v12 the chains hold the create event, which
   * auth_events imply.
   */
  async authChain(eventIds: Iterable<string>, version: RoomVersion): Promise<RoomEvent[]> {
    const start: RoomEvent[] = [];
    for (const id of new Set(eventIds)) {
      const stored = await this.rooms.getEvent(id);
      if (stored) start.push(stored.event);
    }
    return this.authChainOf(start, version);
  }

  /**
   * The same from events in hand (a room's state, loaded already): a state of 20,000 events is
   * not read a second time, one by one, through a cache smaller than it.
   */
  async authChainOf(events: Iterable<RoomEvent>, version: RoomVersion): Promise<RoomEvent[]> {
    const seen = new Map<string, RoomEvent>();
    const pending: string[] = [];
    for (const event of events) pending.push(...authEventIds(event, version));
    while (pending.length > 0) {
      const id = pending.pop()!;
      if (seen.has(id)) continue;
      const stored = await this.rooms.getEvent(id);
      if (!stored) continue;
      seen.set(id, stored.event);
      pending.push(...authEventIds(stored.event, version));
    }
    return [...seen.values()].sort((a, b) => a.depth - b.depth);
  }

  /**
   * Events going back from (and including) `fromIds` by prev events, newest first by
   * depth, at most `limit` (server-server §Backfilling). Only events with history
   * (not outliers), never rejected ones.
   */
  async backfill(roomId: string, fromIds: string[], limit: number): Promise<StoredEvent[]> {
    const found = new Map<string, StoredEvent>();
    // Breadth-first by depth: take the deepest waiting event each time.
    const frontier: StoredEvent[] = [];
    const queued = new Set<string>();
    const push = async (id: string) => {
      if (queued.has(id)) return;
      queued.add(id);
      const stored = await this.rooms.getEvent(id);
      if (usable(stored, roomId)) frontier.push(stored);
    };
    for (const id of fromIds) await push(id);
    while (frontier.length > 0 && found.size < limit) {
      frontier.sort((a, b) => a.event.depth - b.event.depth);
      const stored = frontier.pop()!;
      found.set(stored.event.event_id, stored);
      for (const id of referenceIds(stored.event.prev_events)) await push(id);
    }
    return [...found.values()];
  }

  /**
   * Events before `latest` and after `earliest` (server-server §get_missing_events):
   * walking back from the latest events' prev events, stopping at the earliest ones
   * and below minDepth. Oldest first.
   */
  async missingEvents(roomId: string, earliest: string[], latest: string[], limit: number, minDepth: number): Promise<StoredEvent[]> {
    const stop = new Set(earliest);
    const seen = new Set<string>([...latest, ...earliest]);
    const found: StoredEvent[] = [];
    let frontier: string[] = [];
    for (const id of latest) {
      const stored = await this.rooms.getEvent(id);
      if (stored?.event.room_id === roomId) frontier.push(...referenceIds(stored.event.prev_events));
    }
    while (frontier.length > 0 && found.length < limit) {
      const next: string[] = [];
      for (const id of frontier) {
        if (seen.has(id) || stop.has(id) || found.length >= limit) continue;
        seen.add(id);
        const stored = await this.rooms.getEvent(id);
        if (!usable(stored, roomId) || stored.event.depth < minDepth) continue;
        found.push(stored);
        next.push(...referenceIds(stored.event.prev_events));
      }
      frontier = next;
    }
    return found.sort((a, b) => a.event.depth - b.event.depth);
  }
}

function usable(stored: StoredEvent | undefined, roomId: string): stored is StoredEvent {
  return !!stored && stored.event.room_id === roomId && !stored.rejected && !stored.outlier;
}
