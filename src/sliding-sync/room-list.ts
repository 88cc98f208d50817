import type { Rooms } from '../rooms/rooms.ts';
import type { LocalMembership } from '../rooms/timeline.ts';
import type { Sync } from '../sync/sync.ts';
import type { Users } from '../users/users.ts';
import type { ConnectionState } from './store.ts';
import { BUMP_EVENT_TYPES, type ListFilters } from './types.ts';

/** A room the user may see in a list, with its place in the stream order. */
export interface Candidate {
  roomId: string;
  membership: LocalMembership;
  bumpStamp: number;
}

/**
 * Joined rooms' bump stamps, kept in memory for every request (so a first screen does not probe all of a
 * user's rooms each time): the rooms with live events since the cache's position are probed again, one
 * query finds them (the stream index). A room the user is not joined to has its stamp bounded by its
 * membership and is probed each time (there are few).
 */
export class BumpStamps {
  private readonly stamps = new Map<string, number>();
  private position = 0;

  constructor(private readonly rooms: Rooms) {}

  async of(memberships: LocalMembership[], upTo: number): Promise<Map<string, number>> {
    if (upTo > this.position) {
      for (const roomId of await this.rooms.timeline.roomsWithEvents(this.position, upTo)) this.stamps.delete(roomId);
      this.position = upTo;
    }
    const out = new Map<string, number>();
    const probe: { roomId: string; upTo: number; joined: boolean }[] = [];
    for (const m of memberships) {
      const known = m.membership === 'join' ? this.stamps.get(m.roomId) : undefined;
      if (known !== undefined) out.set(m.roomId, known);
      else probe.push({ roomId: m.roomId, upTo: m.membership === 'join' ? upTo : m.streamOrdering, joined: m.membership === 'join' });
    }
    const found = await this.rooms.timeline.latestOfTypes(probe, BUMP_EVENT_TYPES);
    for (const { roomId, joined } of probe) {
      const stamp = found.get(roomId) ?? 0;
      out.set(roomId, stamp);
      // Cached only for joined rooms, and only while the cache has seen up to this answer's position.
      if (joined && upTo === this.position) {
        if (this.stamps.size >= 100_000) this.stamps.clear();
        this.stamps.set(roomId, stamp);
      }
    }
    return out;
  }
}

/**
 * The rooms a user's lists draw from, sorted by recency from the index of each room's latest
 * bump event (one query for all of them), and the facts list filters ask for, read only when asked
 * (is_encrypted reads one state event per room, room_types the create event, spaces the spaces' children).
 */
export class RoomLists {
  private dmRooms: Set<string> | undefined;
  private readonly facts = new Map<string, Promise<{ encrypted: boolean; type: string | null; direct: boolean }>>();
  private readonly spaceChildren = new Map<string, Promise<Set<string>>>();

  constructor(
    private readonly rooms: Rooms,
    private readonly users: Users,
    private readonly sync: Sync,
    private readonly userId: string,
    private readonly bumpStamps: BumpStamps,
  ) {}

  /**
   * Joined, invited and knocked rooms; rooms the user was kicked or banned from; and a room the user
   * left themselves until the connection has been told. Newest first.
   */
  async candidates(from: ConnectionState, upTo: number): Promise<Candidate[]> {
    const memberships = await this.rooms.timeline.membershipsOf(this.userId, upTo);
    const kept: LocalMembership[] = [];
    for (const m of memberships) {
      if (m.membership === 'join' || m.membership === 'invite' || m.membership === 'knock') {
        kept.push(m);
      } else if ((m.membership === 'leave' || m.membership === 'ban') && !m.forgotten) {
        const sent = from.rooms.get(m.roomId);
        if (sent && sent.membership !== m.membership) kept.push(m);
        else if ((await this.rooms.getEvent(m.eventId))?.event.sender !== this.userId) kept.push(m);
      }
    }
    const stamps = await this.bumpStamps.of(kept, upTo);
    const out = kept.map((m) => ({
      roomId: m.roomId,
      membership: m,
      bumpStamp: m.membership === 'join' ? stamps.get(m.roomId) || m.streamOrdering : Math.max(stamps.get(m.roomId) ?? 0, m.streamOrdering),
    }));
    return out.sort((a, b) => b.bumpStamp - a.bumpStamp || (a.roomId < b.roomId ? -1 : 1));
  }

  /** The candidates a list's filters keep, in order. */
  async filter(candidates: Candidate[], filters: ListFilters | undefined): Promise<Candidate[]> {
    if (!filters) return candidates;
    let rooms = candidates;
    if (filters.is_invite !== undefined) rooms = rooms.filter((c) => (c.membership.membership === 'invite') === filters.is_invite);
    if (filters.spaces) {
      const children = new Set<string>();
      for (const space of filters.spaces) for (const child of await this.childrenOf(space)) children.add(child);
      rooms = rooms.filter((c) => children.has(c.roomId));
    }
    const needFacts = filters.is_dm !== undefined || filters.is_encrypted !== undefined || filters.room_types !== undefined || filters.not_room_types !== undefined;
    if (!needFacts) return rooms;
    const dms = filters.is_dm !== undefined ? await this.directRooms() : undefined;
    const out: Candidate[] = [];
    for (const c of rooms) {
      const facts = await this.factsOf(c);
      if (dms && (dms.has(c.roomId) || facts.direct) !== filters.is_dm) continue;
      if (filters.is_encrypted !== undefined && facts.encrypted !== filters.is_encrypted) continue;
      if (filters.room_types && !filters.room_types.includes(facts.type)) continue;
      if (filters.not_room_types?.includes(facts.type)) continue;
      out.push(c);
    }
    return out;
  }

  /** Rooms the user's m.direct account data names. */
  async directRooms(): Promise<Set<string>> {
    if (this.dmRooms) return this.dmRooms;
    const direct = (await this.users.accountData.get(this.userId, '', 'm.direct')) ?? {};
    this.dmRooms = new Set(Object.values(direct).flatMap((ids) => (Array.isArray(ids) ? ids.filter((id): id is string => typeof id === 'string') : [])));
    return this.dmRooms;
  }

  /** Whether the room is encrypted, its create event's type, and (invites) whether the invite says it is direct. */
  factsOf(c: Candidate): Promise<{ encrypted: boolean; type: string | null; direct: boolean }> {
    let facts = this.facts.get(c.roomId);
    if (!facts) {
      facts = this.readFacts(c);
      this.facts.set(c.roomId, facts);
    }
    return facts;
  }

  private async readFacts(c: Candidate): Promise<{ encrypted: boolean; type: string | null; direct: boolean }> {
    if (c.membership.membership === 'invite' || c.membership.membership === 'knock') {
      const stripped = await this.sync.strippedState(c.roomId, c.membership.eventId);
      const create = stripped.find((e) => e['type'] === 'm.room.create');
      const member = stripped.find((e) => e['type'] === 'm.room.member' && e['state_key'] === this.userId);
      const type = (create?.['content'] as Record<string, unknown> | undefined)?.['type'];
      return {
        encrypted: stripped.some((e) => e['type'] === 'm.room.encryption'),
        type: typeof type === 'string' ? type : null,
        direct: (member?.['content'] as Record<string, unknown> | undefined)?.['is_direct'] === true,
      };
    }
    const create = await this.rooms.currentStateEvent(c.roomId, 'm.room.create', '');
    const type = create?.event.content['type'];
    return { encrypted: (await this.rooms.currentStateEvent(c.roomId, 'm.room.encryption', '')) !== undefined, type: typeof type === 'string' ? type : null, direct: false };
  }

  private childrenOf(spaceId: string): Promise<Set<string>> {
    let children = this.spaceChildren.get(spaceId);
    if (!children) {
      children = this.rooms.currentState(spaceId).then((state) => {
        const out = new Set<string>();
        for (const stored of state.values()) {
          const via = stored.event.content['via'];
          if (stored.event.type === 'm.space.child' && Array.isArray(via) && via.length > 0) out.add(stored.event.state_key!);
        }
        return out;
      });
      this.spaceChildren.set(spaceId, children);
    }
    return children;
  }
}
