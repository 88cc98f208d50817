import { stateKey, type StateKey } from '../events/event.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import { positionBefore } from '../rooms/timeline.ts';
import type { Users } from '../users/users.ts';
import { LruCache } from '../rooms/lru.ts';
import type { EphemeralStream, Presence, Typing } from './ephemeral.ts';
import { eventMatches, pickEventFields, roomMatches, type Filter, type RoomEventFilter } from './filter.ts';
import { withoutRoomId, type ClientEvent, type EventFormatter, type Viewer } from './format.ts';
import type { PushNotifications, RoomUnreadCounts, UnreadCounts, UserPushRules } from './push.ts';
import { receiptContent, type Receipts } from './receipts.ts';
import { formatToken, type SyncToken } from './token.ts';
import type { Visibility } from './visibility.ts';
import type { Peeks } from './peeks.ts';
import { DEFAULT_TIMELINE_LIMIT, type JoinedRoom, type LeftRoom, type SyncExtension, type SyncRequest, type SyncResponse } from './sync-shapes.ts';

/** The most timeline events one room gets in one /sync, whatever the filter asks. */
const MAX_TIMELINE_LIMIT = 1000;

/** What a /sync answer is made from: the room engine, the accounts, and sync's own streams and readers. */
export interface SyncResponseParts {
  rooms: Rooms;
  users: Users;
  now: () => number;
  streamPosition: () => Promise<number>;
  ephemeral: EphemeralStream;
  typing: Typing;
  presence: Presence;
  receipts: Receipts;
  formatter: EventFormatter;
  visibility: Visibility;
  push: PushNotifications;
  peeks: Peeks;
  /** The parts of /sync other components fill in, as they are added. */
  extensions: readonly SyncExtension[];
}

/**
 * One /sync answer, from a token to now (client-server §Syncing): rooms joined, invited, knocked, left and
 * peeked, with their timelines, state, ephemeral events, account data and counts, and the extensions' parts.
 * The long-poll around it is {@link Sync.sync}'s.
 */
export class SyncResponses {
  /** Member events each device was sent, per room, for lazy loading (see withoutRedundantMembers). */
  private readonly sentMembers = new LruCache<string, Map<string, number>>(10_000);
  constructor(private readonly parts: SyncResponseParts) {}

  async build(request: SyncRequest, since: SyncToken | undefined): Promise<SyncResponse> {
    const upTo: SyncToken = { stream: await this.parts.streamPosition(), ephemeral: this.parts.ephemeral.current };
    const { userId, deviceId, filter } = request;
    const viewer: Viewer = { userId, deviceId };
    const sinceStream = since?.stream ?? 0;
    const response: SyncResponse = {
      next_batch: formatToken(upTo),
      rooms: { join: {}, invite: {}, leave: {}, knock: {} },
      presence: { events: [] },
      account_data: { events: [] },
    };

    const memberships = await this.parts.rooms.timeline.membershipsOf(userId, upTo.stream);
    const pushRules = await this.parts.push.rulesOf(userId);
    const roomAccountData = new Map<string, Record<string, unknown>[]>();
    for (const item of await this.parts.users.accountData.since(userId, sinceStream, upTo.stream)) {
      const event = { type: item.type, content: item.content };
      if (item.roomId === '') {
        if (eventMatches(filter.account_data, event)) response.account_data.events.push(event);
      } else if (eventMatches(filter.room?.account_data, event)) {
        const list = roomAccountData.get(item.roomId) ?? [];
        list.push(event);
        roomAccountData.set(item.roomId, list);
      }
    }

    // An incremental sync looks only at rooms where something happened since `since`.
    const active = since && !request.fullState ? await this.roomsWithNews(since, upTo, roomAccountData) : undefined;
    const joinedRooms = new Set<string>();
    // Members the client meets in this response (the members of a room new to it, a new member of a room it
    // knows): their presence is sent whether or not it changed since `since`, as Synapse does.
    const newlySeen = new Set<string>();
    for (const m of memberships) {
      if (!roomMatches(filter, m.roomId)) continue;
      const changedSince = m.streamOrdering > sinceStream;
      if (m.membership === 'join') {
        joinedRooms.add(m.roomId);
        // A room joined since `since` is new to the client: all of it. A join → join change (a new
        // display name) is not. full_state sends all state but keeps the timeline incremental.
        const fresh = !since || (changedSince && !(await this.wasJoinedAt(m.roomId, userId, sinceStream)));
        if (active && !fresh && !active.has(m.roomId)) continue;
        const joined = await this.joinedRoom(m.roomId, viewer, filter, fresh ? undefined : since, upTo, fresh || request.fullState, roomAccountData.get(m.roomId) ?? [], pushRules, since ? newlySeen : undefined);
        // A join → join change the filter hides (a new display name) brings nothing: the room is left out.
        if (!since || request.fullState || fresh || !isEmptyJoined(joined)) response.rooms.join[m.roomId] = joined;
      } else if (m.membership === 'invite' && (changedSince || !since)) {
        if (await this.fromIgnoredUser(userId, m.eventId)) continue;
        response.rooms.invite[m.roomId] = { invite_state: { events: await this.strippedState(m.roomId, m.eventId) } };
      } else if (m.membership === 'knock' && (changedSince || !since)) {
        response.rooms.knock[m.roomId] = { knock_state: { events: await this.strippedState(m.roomId, m.eventId) } };
      } else if ((m.membership === 'leave' || m.membership === 'ban') && !m.forgotten) {
        const include = since ? changedSince : filter.room?.include_leave === true;
        if (include) response.rooms.leave[m.roomId] = await this.leftRoom(m.roomId, m.eventId, m.streamOrdering, viewer, filter, since, roomAccountData.get(m.roomId) ?? []);
      }
    }

    // Rooms this device peeks into and is not joined to, as joined rooms come: afresh since the peek, then what is new.
    const peeked: Record<string, JoinedRoom> = {};
    for (const peek of await this.parts.peeks.of(userId, deviceId)) {
      if (joinedRooms.has(peek.roomId) || !roomMatches(filter, peek.roomId)) continue;
      const fresh = !since || peek.since > sinceStream;
      if (!fresh && (!active || !active.has(peek.roomId)) && !request.fullState) continue;
      const room = await this.joinedRoom(peek.roomId, viewer, filter, fresh ? undefined : since, upTo, fresh || request.fullState, [], pushRules);
      if (fresh || request.fullState || !isEmptyJoined(room)) peeked[peek.roomId] = room;
    }
    if (Object.keys(peeked).length > 0) response.rooms.peek = peeked;

    // Presence of the user and of those sharing a room with them: what changed, and what the client has not seen.
    const presence = new Map(this.parts.presence.changedSince(since?.ephemeral ?? 0));
    for (const user of newlySeen) {
      const status = this.parts.presence.get(user);
      if (user !== userId && status.changed > 0 && !presence.has(user)) presence.set(user, status);
    }
    for (const [user, status] of presence) {
      if (user !== userId && !newlySeen.has(user) && !(await this.parts.rooms.roomsOf(user)).some((r) => joinedRooms.has(r))) continue;
      const event = {
        type: 'm.presence',
        sender: user,
        content: {
          presence: status.presence,
          last_active_ago: Math.max(0, this.parts.now() - status.last_active_ts),
          currently_active: status.presence === 'online',
          ...(status.status_msg !== undefined ? { status_msg: status.status_msg } : {}),
        },
      };
      if (eventMatches(filter.presence, event)) response.presence.events.push(event);
    }

    for (const extension of this.parts.extensions) {
      await extension.contribute({ userId, deviceId, since: sinceStream, upTo: upTo.stream, initial: !since }, response);
    }
    return response;
  }

  /** Whether an event (an invite) was sent by someone the user ignores: such invites are not shown. */
  private async fromIgnoredUser(userId: string, eventId: string): Promise<boolean> {
    const sender = (await this.parts.rooms.getEvent(eventId))?.event.sender;
    return sender !== undefined && (await this.parts.users.accountData.ignoredUsers(userId)).has(sender);
  }

  /** Rooms with new events, receipts, room account data or typing in (since, upTo]. */
  private async roomsWithNews(since: SyncToken, upTo: SyncToken, roomAccountData: Map<string, unknown>): Promise<Set<string>> {
    const rooms = new Set<string>([...roomAccountData.keys(), ...(await this.parts.rooms.timeline.roomsWithEvents(since.stream, upTo.stream))]);
    for (const roomId of await this.parts.receipts.roomsChanged(since.stream, upTo.stream)) rooms.add(roomId);
    for (const roomId of this.parts.typing.changedSince(since.ephemeral)) rooms.add(roomId);
    return rooms;
  }

  /** Whether the user was joined to the room at a stream position (a sync token's). */
  private async wasJoinedAt(roomId: string, userId: string, stream: number): Promise<boolean> {
    const nid = (await this.parts.rooms.timeline.stateAtStream(roomId, stream)).get(stateKey('m.room.member', userId));
    const member = nid === undefined ? undefined : await this.parts.rooms.getEventByNid(nid);
    return member?.event.content['membership'] === 'join';
  }

  private async joinedRoom(
    roomId: string,
    viewer: Viewer,
    filter: Filter,
    since: SyncToken | undefined,
    upTo: SyncToken,
    fullState: boolean,
    accountData: Record<string, unknown>[],
    pushRules: UserPushRules | undefined,
    newlySeen?: Set<string>,
  ): Promise<JoinedRoom> {
    const timelineFilter = filter.room?.timeline;
    const limit = Math.min(timelineFilter?.limit ?? DEFAULT_TIMELINE_LIMIT, MAX_TIMELINE_LIMIT);
    const sinceStream = since?.stream ?? 0;
    const timeline = await this.timeline(roomId, viewer.userId, sinceStream, upTo.stream, limit, timelineFilter);
    const { events } = timeline;
    // Joined since the token (an incremental sync, which alone counts who is newly seen): the client has
    // nothing of the room, so its timeline is limited unless it starts at the creation, as Synapse marks it.
    const newlyJoined = !since && newlySeen !== undefined;
    const limited = (newlyJoined && events[0]?.event.type !== 'm.room.create') || (await this.isLimited(roomId, viewer.userId, timeline, timelineFilter, !since));
    const prevBatch = formatToken({ stream: events.length > 0 ? events[0]!.streamOrdering! - 1 : upTo.stream, ephemeral: upTo.ephemeral });

    const stateAtSince = fullState ? undefined : await this.parts.rooms.timeline.stateAtStream(roomId, sinceStream);
    let stateEvents = await this.stateSection(roomId, events, await this.parts.rooms.timeline.stateAtStream(roomId, upTo.stream), stateAtSince, upTo.stream, viewer.userId, filter, limited);
    if (filter.room?.state?.lazy_load_members) stateEvents = this.withoutRedundantMembers(roomId, viewer, stateEvents, events, !stateAtSince || filter.room.state.include_redundant_members === true);
    if (newlySeen) {
      for (const stored of [...stateEvents, ...events]) {
        if (stored.event.type === 'm.room.member' && stored.event.content['membership'] === 'join') newlySeen.add(stored.event.state_key!);
      }
    }

    const ephemeral: Record<string, unknown>[] = [];
    const ephemeralFilter = filter.room?.ephemeral;
    const typing = this.parts.typing.get(roomId);
    // Whenever typing changed in the room since `since` (an initial sync: ever), even to no one: a client starting
    // afresh learns that no one types, as Synapse tells it.
    if (typing.changed > (since?.ephemeral ?? 0)) {
      const event = { type: 'm.typing', content: { user_ids: typing.userIds } };
      if (eventMatches(ephemeralFilter, event)) ephemeral.push(event);
    }
    const receipts = await this.parts.receipts.since(roomId, viewer.userId, sinceStream, upTo.stream);
    if (receipts.length > 0) {
      const event = { type: 'm.receipt', content: receiptContent(receipts) };
      if (eventMatches(ephemeralFilter, event)) ephemeral.push(event);
    }

    const format = (e: StoredEvent) => this.parts.formatter.format(e, viewer).then((c) => this.shape(c, e, filter));
    return {
      timeline: { events: await Promise.all(events.map(format)), limited, prev_batch: prevBatch },
      state: { events: (await this.parts.formatter.formatAll(stateEvents, viewer)).map((c, i) => this.shape(c, stateEvents[i]!, filter)) },
      ephemeral: { events: ephemeral },
      account_data: { events: accountData },
      // Incremental syncs carry the summary when membership changed in them: the counts and heroes may have.
      summary: since && !fullState && ![...stateEvents, ...events].some((e) => e.event.type === 'm.room.member') ? {} : await this.summary(roomId, viewer.userId),
      ...(await this.unreadCounts(roomId, viewer.userId, upTo.stream, pushRules, filter.room?.timeline?.unread_thread_notifications === true)),
    };
  }

  /**
   * A room's newest events the user may see in (from, upTo], oldest first, at most `limit`, and whether
   * visible events were left out before them: /sync's timeline rule, for sliding sync's rooms.
   */
  async timelineWindow(roomId: string, userId: string, from: number, upTo: number, limit: number): Promise<{ events: StoredEvent[]; limited: boolean }> {
    const timeline = await this.timeline(roomId, userId, from, upTo, Math.min(limit, MAX_TIMELINE_LIMIT), undefined);
    return { events: timeline.events, limited: await this.isLimited(roomId, userId, timeline, undefined, from === 0) };
  }

  /** A joined room's unread counts: the room's, or the main timeline's and each thread's when the filter asks. */
  private async unreadCounts(roomId: string, userId: string, upTo: number, rules: UserPushRules | undefined, byThread: boolean): Promise<Pick<JoinedRoom, 'unread_notifications' | 'unread_thread_notifications'>> {
    if (!byThread) return { unread_notifications: unreadNotifications(await this.parts.push.unread(roomId, userId, upTo, rules)) };
    const { main, threads } = await this.parts.push.threadedUnread(roomId, userId, upTo, rules);
    const unread_notifications = unreadNotifications(main);
    if (Object.keys(threads).length === 0) return { unread_notifications };
    return { unread_notifications, unread_thread_notifications: Object.fromEntries(Object.entries(threads).map(([root, counts]) => [root, unreadNotifications(counts)])) };
  }

  private async leftRoom(
    roomId: string,
    leaveEventId: string,
    position: number,
    viewer: Viewer,
    filter: Filter,
    since: SyncToken | undefined,
    accountData: Record<string, unknown>[],
  ): Promise<LeftRoom> {
    const leave = await this.parts.rooms.getEvent(leaveEventId);
    if (leave && (leave.outlier || leave.streamOrdering === null)) return this.outOfBandLeave(leave, position, viewer, filter, accountData);
    const end = leave?.streamOrdering ?? 0;
    const limit = Math.min(filter.room?.timeline?.limit ?? DEFAULT_TIMELINE_LIMIT, MAX_TIMELINE_LIMIT);
    const timeline = await this.timeline(roomId, viewer.userId, since?.stream ?? 0, end, limit, filter.room?.timeline);
    const { events } = timeline;
    const limited = await this.isLimited(roomId, viewer.userId, timeline, filter.room?.timeline, !since);
    const format = (e: StoredEvent) => this.parts.formatter.format(e, viewer).then((c) => this.shape(c, e, filter));
    const start = events.length > 0 ? events[0]!.streamOrdering! - 1 : end;
    // The room as it was when the user left; what changed since `since` if they were in it then, all of it if
    // they joined (and left) since.
    const stateAtLeave = leave ? ((await this.parts.rooms.stateAtEvent(leave.event.event_id, 'after')) ?? new Map()) : new Map<StateKey, number>();
    const stateAtSince = since && (await this.wasJoinedAt(roomId, viewer.userId, since.stream)) ? await this.parts.rooms.timeline.stateAtStream(roomId, since.stream) : undefined;
    const state = await this.stateSection(roomId, events, stateAtLeave, stateAtSince, start, viewer.userId, filter, limited);
    return {
      timeline: { events: await Promise.all(events.map(format)), limited, prev_batch: formatToken({ stream: start, ephemeral: 0 }) },
      state: { events: await Promise.all(state.map(format)) },
      account_data: { events: accountData },
    };
  }

  /**
   * A leave made out of band (an invite rejected or withdrawn, a knock withdrawn, in a room we do not
   * follow) has no place in our copy of the room: it is the room's timeline, as Synapse sends it, and
   * its state when a filter keeps it from the timeline. `position` is when the membership changed here.
   */
  private async outOfBandLeave(leave: StoredEvent, position: number, viewer: Viewer, filter: Filter, accountData: Record<string, unknown>[]): Promise<LeftRoom> {
    const formatted = await this.parts.formatter.format(leave, viewer).then((c) => this.shape(c, leave, filter));
    const inTimeline = eventMatches(filter.room?.timeline, leave.event);
    const inState = !inTimeline && eventMatches(filter.room?.state, leave.event);
    return {
      timeline: { events: inTimeline ? [formatted] : [], limited: false, prev_batch: formatToken({ stream: Math.max(0, position - 1), ephemeral: 0 }) },
      state: { events: inState ? [formatted] : [] },
      account_data: { events: accountData },
    };
  }

  /**
   * Whether events were left out before a timeline's first event: matching, visible ones
   * past the limit, or history we lack before it (a room joined over federation, a
   * gap), which /messages can fetch. Events a filter or history visibility keeps from
   * the client do not count.
   */
  private async isLimited(
    roomId: string,
    userId: string,
    timeline: { events: StoredEvent[]; limited: boolean },
    filter: RoomEventFilter | undefined,
    fromStart: boolean,
  ): Promise<boolean> {
    if (timeline.limited) return true;
    const first = timeline.events[0];
    if (!first) return false;
    if (!fromStart) return (await this.parts.rooms.timeline.missingPrevEvents(first)).length > 0;
    // Every live event before the first was looked at already; backfilled history was not.
    let oldest = first;
    for await (const stored of this.parts.rooms.timeline.backfilledBefore(roomId, positionBefore(first), 50)) {
      if (eventMatches(filter, stored.event) && (await this.parts.visibility.canSee(userId, stored))) return true;
      oldest = stored;
    }
    return (await this.parts.rooms.timeline.missingPrevEvents(oldest)).length > 0;
  }

  /**
   * A room's state section for a timeline, as Synapse computes it: the state at the
   * timeline's start and at its end, less what the client had at `since` (when given)
   * and what the timeline itself carries. The end's state is what the client must end
   * up with, so state it cannot see in the timeline (changed before its join under
   * `joined` visibility, or past the limit) still reaches it.
   *
   * Lazily loaded members (as Synapse, whom clients follow): the members of the timeline's
   * senders whose membership the timeline has not shown before their first event, and the
   * user's own on a full sync only. A gapped incremental sync also has every member change
   * of its gap (joins, leaves), as if not lazily loaded: the client cannot page to them.
   */
  private async stateSection(
    roomId: string,
    events: StoredEvent[],
    stateAtEnd: ReadonlyMap<StateKey, number>,
    stateAtSince: ReadonlyMap<StateKey, number> | undefined,
    stream: number,
    userId: string,
    filter: Filter,
    gapped: boolean,
  ): Promise<StoredEvent[]> {
    const stateFilter = filter.room?.state;
    const stateAtStart = await this.stateBefore(roomId, events, stream);
    const inTimeline = new Set(events.map((e) => e.nid));
    const nids = new Map<StateKey, number>();
    const lazy = stateFilter?.lazy_load_members === true;
    const prefix = stateKey('m.room.member', '');
    const neededKeys = new Set<StateKey>();
    if (lazy) {
      const shown = new Set<string>();
      for (const stored of events) {
        if (!shown.has(stored.event.sender)) neededKeys.add(prefix + stored.event.sender);
        if (stored.event.type === 'm.room.member') shown.add(stored.event.state_key!);
      }
      if (!stateAtSince) neededKeys.add(prefix + userId);
    }
    const everyMemberAtEnd = !lazy || (stateAtSince !== undefined && gapped);
    // One pass when the timeline changes no state (its start and end are one map): a big room's state is 20,000 keys.
    const states = stateAtEnd === stateAtStart ? [stateAtEnd] : [stateAtEnd, stateAtStart];
    for (const state of states) {
      const everyMember = state === stateAtEnd ? everyMemberAtEnd : !lazy;
      for (const [key, nid] of state) {
        // Lazily loaded: the room's thousands of other members are passed over here, not read.
        if (!everyMember && key.startsWith(prefix) && !neededKeys.has(key)) continue;
        if (!nids.has(key) && !inTimeline.has(nid) && stateAtSince?.get(key) !== nid) nids.set(key, nid);
      }
    }
    // The senders' members go out even when unchanged since `since`: the client may never have had them (lazy
    // loading drops those it was sent already, see withoutRedundantMembers).
    for (const key of neededKeys) {
      const nid = stateAtStart.get(key) ?? stateAtEnd.get(key);
      if (nid !== undefined && !inTimeline.has(nid)) nids.set(key, nid);
    }
    return (await this.parts.rooms.getEventsByNid([...nids.values()])).filter((stored): stored is StoredEvent => !!stored && eventMatches(stateFilter, stored.event));
  }

  /**
   * The state a timeline starts from: before its first event (a room joined over
   * federation has its state only there, before the join), or at `stream` when empty.
   */
  private async stateBefore(roomId: string, events: StoredEvent[], stream: number): Promise<ReadonlyMap<StateKey, number>> {
    const first = events[0];
    return (first && (await this.parts.rooms.stateAtEvent(first.event.event_id, 'before'))) ?? this.parts.rooms.timeline.stateAtStream(roomId, stream);
  }

  /**
   * An event as the filter asks: the client format without `room_id` (the room is the key it
   * sits under), or with `event_format: federation` the event as servers exchange it (hashes,
   * signatures, auth and prev events, depth) with the client's unsigned data; then `event_fields`.
   */
  private shape(event: ClientEvent, stored: StoredEvent, filter: Filter): Record<string, unknown> {
    if (filter.event_format === 'federation') {
      const { unsigned: _stored, ...pdu } = stored.event as typeof stored.event & { unsigned?: unknown };
      return pickEventFields({ ...pdu, ...(event.unsigned ? { unsigned: event.unsigned } : {}) } as Record<string, unknown>, filter.event_fields);
    }
    return pickEventFields(withoutRoomId(event) as Record<string, unknown>, filter.event_fields);
  }

  /**
   * A room's timeline in (from, to]: the newest events the user may see, and, as Synapse includes them, those
   * that are the room's state at `to` (a new member under `joined` visibility gets the topic set before
   * their join in the timeline, not only in the state section); oldest first, and whether more were left out.
   */
  private async timeline(roomId: string, userId: string, from: number, to: number, limit: number, filter: RoomEventFilter | undefined) {
    const picked: StoredEvent[] = [];
    let limited = false;
    let stateAtEnd: Set<number> | undefined;
    const isStateAtEnd = async (stored: StoredEvent) =>
      stored.event.state_key !== undefined && (stateAtEnd ??= new Set((await this.parts.rooms.timeline.stateAtStream(roomId, to)).values())).has(stored.nid);
    for await (const stored of this.parts.rooms.timeline.streamRange(roomId, from, to, limit * 2)) {
      if (!eventMatches(filter, stored.event) || !((await this.parts.visibility.canSee(userId, stored)) || (await isStateAtEnd(stored)))) continue;
      // One more event the client would see: some were left out.
      if (picked.length === limit) {
        limited = true;
        break;
      }
      picked.push(stored);
    }
    return { events: picked.reverse(), limited };
  }

  /** An invite's or knock's room as the user sees it: the stripped state it came with, or the room's own, and the membership. */
  async strippedState(roomId: string, memberEventId: string): Promise<Record<string, unknown>[]> {
    const member = await this.parts.rooms.getEvent(memberEventId);
    // What the room's server handed over with an invite (invite_room_state) or a knock (knock_room_state).
    const carried = member?.event.unsigned?.['invite_room_state'] ?? member?.event.unsigned?.['knock_room_state'];
    const out: Record<string, unknown>[] = Array.isArray(carried)
      ? [...(carried as Record<string, unknown>[])]
      : (await this.parts.rooms.exists(roomId)) ? await this.parts.rooms.strippedState(roomId, member?.event.sender) : [];
    if (member) out.push(await this.parts.formatter.format(member) as unknown as Record<string, unknown>);
    return out;
  }

  /**
   * Lazy-loaded members (client-server §Lazy-loading room members): a member event this
   * device was sent before, unchanged, is not sent again unless `include_redundant_members`
   * (or the sync starts afresh). Remembered in memory per device and room, as Synapse does:
   * after a restart some are sent again, which is harmless.
   */
  private withoutRedundantMembers(roomId: string, viewer: Viewer, state: StoredEvent[], timeline: StoredEvent[], sendAll: boolean): StoredEvent[] {
    const key = `${viewer.userId}\u0000${viewer.deviceId ?? ''}\u0000${roomId}`;
    const sent = (sendAll ? undefined : this.sentMembers.get(key)) ?? new Map<string, number>();
    const kept = state.filter((stored) => stored.event.type !== 'm.room.member' || sent.get(stored.event.state_key!) !== stored.nid);
    for (const stored of [...kept, ...timeline]) if (stored.event.type === 'm.room.member') sent.set(stored.event.state_key!, stored.nid);
    this.sentMembers.set(key, sent);
    return kept;
  }

  private async summary(roomId: string, userId: string): Promise<Record<string, unknown>> {
    // Counted, not listed: a big room has 10,000 members, and only an unnamed room needs their names (its heroes).
    const summary: Record<string, unknown> = { 'm.joined_member_count': await this.parts.rooms.memberCount(roomId, 'join'), 'm.invited_member_count': await this.parts.rooms.memberCount(roomId, 'invite') };
    const named = (await this.parts.rooms.currentStateEvent(roomId, 'm.room.name', '')) || (await this.parts.rooms.currentStateEvent(roomId, 'm.room.canonical_alias', ''));
    if (!named) summary['m.heroes'] = [...(await this.parts.rooms.members(roomId, 'join')), ...(await this.parts.rooms.members(roomId, 'invite'))].filter((u) => u !== userId).sort().slice(0, 5);
    return summary;
  }
}

/** Counts as /sync gives them: MSC2625's unread count under its unstable name, which the suites read (see README Decisions). */
function unreadNotifications(counts: RoomUnreadCounts): UnreadCounts {
  return { notification_count: counts.notification_count, highlight_count: counts.highlight_count, 'org.matrix.msc2625.unread_count': counts.unread_count };
}

function isEmptyJoined(room: JoinedRoom): boolean {
  return room.timeline.events.length === 0 && room.state.events.length === 0 && room.ephemeral.events.length === 0 && room.account_data.events.length === 0;
}

