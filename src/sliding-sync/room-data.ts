import { stateKey, type StateKey } from '../events/event.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import type { UserPushRules } from '../sync/push.ts';
import type { Sync } from '../sync/sync.ts';
import { formatToken, type SyncToken } from '../sync/token.ts';
import { RequiredState } from './required-state.ts';
import type { Candidate } from './room-list.ts';
import type { SentRoom } from './store.ts';
import type { RoomConfig } from './types.ts';

/** What one room contributes to an answer: its fields (none when nothing changed) and what the connection then has of it. */
export interface BuiltRoom {
  data: Record<string, unknown> | undefined;
  sent: SentRoom;
  /** Whether the room was new to the connection (all its state, its timeline from the start). */
  initial: boolean;
}

/**
 * Builds one room of a sliding sync answer: all of it for a room new to the connection (or whose
 * membership the connection has not seen), only what changed since it was last sent otherwise.
 */
export class RoomDataBuilder {
  constructor(
    private readonly rooms: Rooms,
    private readonly sync: Sync,
    private readonly userId: string,
    private readonly deviceId: string,
    /** Read once, when a room is first built. */
    private readonly pushRules: () => Promise<UserPushRules | undefined>,
    private readonly dmRooms: () => Promise<Set<string>>,
  ) {}

  async build(c: Candidate, config: RoomConfig, sent: SentRoom | undefined, upTo: SyncToken, ephemeralNews: boolean): Promise<BuiltRoom> {
    const { roomId, membership: m } = c;
    const requiredKey = RequiredState.key(config);
    const initial = !sent || sent.membership !== m.membership && (sent.membership === 'invite' || sent.membership === 'knock' || m.membership === 'invite' || m.membership === 'knock');
    const base: Record<string, unknown> = { bump_stamp: c.bumpStamp };
    if ((await this.dmRooms()).has(roomId)) base['is_dm'] = true;

    if (m.membership === 'invite' || m.membership === 'knock') {
      const next: SentRoom = { sentStream: upTo.stream, membership: m.membership, requiredState: requiredKey, lazyMembers: [] };
      if (!initial) return { data: undefined, sent: sent!, initial };
      const stripped = await this.sync.strippedState(roomId, m.eventId);
      const name = stripped.find((e) => e['type'] === 'm.room.name')?.['content'] as Record<string, unknown> | undefined;
      const member = stripped.find((e) => e['type'] === 'm.room.member' && e['state_key'] === this.userId)?.['content'] as Record<string, unknown> | undefined;
      if (member?.['is_direct'] === true) base['is_dm'] = true;
      return {
        data: { ...base, initial: true, ...(typeof name?.['name'] === 'string' ? { name: name['name'] } : {}), [m.membership === 'invite' ? 'invite_state' : 'knock_state']: stripped },
        sent: next,
        initial,
      };
    }

    // Joined, or left/banned: the room up to now, or up to the leave.
    const end = m.membership === 'join' ? upTo.stream : m.streamOrdering;
    const from = initial ? 0 : Math.min(sent!.sentStream, end);
    const wanted = new RequiredState(config.required_state, this.userId);
    const { stateChanged: configChanged, timelineGrew } = initial ? { stateChanged: false, timelineGrew: false } : RequiredState.compare(sent!.requiredState, requiredKey);
    // A larger timeline_limit (a room opened, its subscription asking more than its list) gets the whole window
    // again, as Synapse's expanded timeline: the client keeps what it knew and takes the older events as scrollback.
    const window = await this.sync.timelineWindow(roomId, this.userId, timelineGrew ? 0 : from, end, config.timeline_limit);
    const membershipChanged = !initial && sent!.membership !== m.membership;
    if (!initial && !configChanged && !timelineGrew && !membershipChanged && window.events.length === 0 && !window.limited && !ephemeralNews) {
      return { data: undefined, sent: sent!, initial };
    }

    const stateAtEnd = await this.rooms.timeline.stateAtStream(roomId, end);
    const stateAtFrom = initial || configChanged ? undefined : await this.rooms.timeline.stateAtStream(roomId, from);
    const lazySent = new Set(initial || configChanged ? [] : sent!.lazyMembers);
    const picked = new Map<StateKey, number>();
    for (const [key, nid] of stateAtEnd) {
      // State events in the timeline count too: matrix-js-sdk takes room state from required_state alone.
      if (stateAtFrom?.get(key) === nid) continue;
      if (wanted.wants(key)) picked.set(key, nid);
    }
    if (wanted.lazyMembers) {
      for (const sender of new Set(window.events.map((e) => e.event.sender))) {
        const key = stateKey('m.room.member', sender);
        const nid = stateAtEnd.get(key);
        if (nid === undefined) continue;
        if (!lazySent.has(sender) || (stateAtFrom !== undefined && stateAtFrom.get(key) !== nid)) picked.set(key, nid);
        lazySent.add(sender);
      }
    }
    const viewer = { userId: this.userId, deviceId: this.deviceId };
    const format = async (stored: StoredEvent) => {
      const { room_id: _room, ...event } = await this.sync.formatter.format(stored, viewer);
      return event;
    };
    const stateEvents: StoredEvent[] = [];
    for (const nid of picked.values()) {
      const stored = await this.rooms.getEventByNid(nid);
      if (stored) stateEvents.push(stored);
    }

    const data: Record<string, unknown> = { ...base };
    if (initial) data['initial'] = true;
    if (stateEvents.length > 0 || initial || configChanged) data['required_state'] = await Promise.all(stateEvents.map(format));
    if (window.events.length > 0 || window.limited || initial || timelineGrew) {
      data['timeline'] = await Promise.all(window.events.map(format));
      // js-sdk keeps known events out of a grown timeline only when it is marked limited.
      data['limited'] = window.limited || timelineGrew;
      data['prev_batch'] = formatToken({ stream: window.events.length > 0 ? window.events[0]!.streamOrdering! - 1 : end, ephemeral: upTo.ephemeral });
      data['num_live'] = initial ? 0 : window.events.filter((e) => e.streamOrdering! > from).length;
      if (timelineGrew) data['unstable_expanded_timeline'] = true;
    }
    // Name, avatar, heroes and counts: on a new room, or when the events carried change them.
    const changed = new Set([...stateEvents, ...window.events].filter((e) => e.event.state_key !== undefined).map((e) => e.event.type));
    if (initial || changed.has('m.room.name') || changed.has('m.room.avatar') || changed.has('m.room.member')) {
      const nameNid = stateAtEnd.get(stateKey('m.room.name', ''));
      const name = nameNid === undefined ? undefined : (await this.rooms.getEventByNid(nameNid))?.event.content['name'];
      if (typeof name === 'string' && name !== '') data['name'] = name;
      const avatarNid = stateAtEnd.get(stateKey('m.room.avatar', ''));
      const avatar = avatarNid === undefined ? undefined : (await this.rooms.getEventByNid(avatarNid))?.event.content['url'];
      if (typeof avatar === 'string' && avatar !== '') data['avatar'] = avatar;
      // An avatar taken away: null, as Synapse says it (undefined would mean unchanged).
      else if (!initial && changed.has('m.room.avatar')) data['avatar'] = null;
      const joined = await this.rooms.members(roomId, 'join');
      const invited = await this.rooms.members(roomId, 'invite');
      data['joined_count'] = joined.length;
      data['invited_count'] = invited.length;
      if (data['name'] === undefined) data['heroes'] = await this.heroes(stateAtEnd, [...joined, ...invited]);
    }
    if (m.membership === 'join') {
      const { notification_count, highlight_count } = await this.sync.push.unread(roomId, this.userId, upTo.stream, await this.pushRules());
      Object.assign(data, { notification_count, highlight_count });
    }
    return { data, sent: { sentStream: end, membership: m.membership, requiredState: requiredKey, lazyMembers: [...lazySent] }, initial };
  }

  /** Up to five members other than the user, with their display names and avatars, as Synapse picks them. */
  private async heroes(state: ReadonlyMap<StateKey, number>, members: string[]): Promise<Record<string, unknown>[]> {
    const out: Record<string, unknown>[] = [];
    for (const userId of members.filter((u) => u !== this.userId).sort().slice(0, 5)) {
      const nid = state.get(stateKey('m.room.member', userId));
      const content = nid === undefined ? {} : ((await this.rooms.getEventByNid(nid))?.event.content ?? {});
      out.push({
        user_id: userId,
        ...(typeof content['displayname'] === 'string' ? { displayname: content['displayname'] } : {}),
        ...(typeof content['avatar_url'] === 'string' ? { avatar_url: content['avatar_url'] } : {}),
      });
    }
    return out;
  }
}
