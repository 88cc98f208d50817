import { stateKey, type StateKey } from '../events/event.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import type { NidState } from '../rooms/state-store.ts';
import { positionBefore } from '../rooms/timeline.ts';
import type { Database } from '../storage/database.ts';
import { readStreamPosition, type StreamChange } from '../storage/stream.ts';
import type { Users } from '../users/users.ts';
import { LruCache } from '../rooms/lru.ts';
import { EphemeralStream, Presence, Typing } from './ephemeral.ts';
import { eventMatches, pickEventFields, roomMatches, type Filter, type RoomEventFilter } from './filter.ts';
import { EventFormatter, withoutRoomId, type ClientEvent, type Viewer } from './format.ts';
import { Notifier } from './notifier.ts';
import { PushNotifications, type RoomUnreadCounts, type UnreadCounts, type UserPushRules } from './push.ts';
import { receiptContent, Receipts } from './receipts.ts';
import { formatToken, parseToken, type SyncToken } from './token.ts';
import { PushDelivery, type PushGateway } from './push-delivery.ts';
import { Visibility } from './visibility.ts';
import { RelationsReader } from './relations.ts';
import { EventStream } from './event-stream.ts';
import { RoomHistory, type Backfiller, type MessagesPage } from './history.ts';
import { Peeks } from './peeks.ts';

export type { Backfiller, MessagesPage } from './history.ts';

export const DEFAULT_TIMELINE_LIMIT = 10;
/** The most timeline events one room gets in one /sync, whatever the filter asks. */
const MAX_TIMELINE_LIMIT = 1000;

/** Parts of /sync other components fill in (to-device, device lists, key counts). */
export interface SyncExtension {
  /** Adds this component's fields to a sync response for (since, upTo]. */
  contribute(request: { userId: string; deviceId: string; since: number; upTo: number; initial: boolean }, response: SyncResponse): Promise<void>;
  /** Called after a sync response was computed from `since`, so acknowledged data can be dropped. */
  acknowledge?(userId: string, deviceId: string, since: number): Promise<void>;
}

export interface SyncRequest {
  userId: string;
  deviceId: string;
  since?: string;
  filter: Filter;
  fullState: boolean;
  timeoutMs: number;
  setPresence?: 'online' | 'offline' | 'unavailable';
}

export interface SyncResponse {
  next_batch: string;
  rooms: {
    join: Record<string, JoinedRoom>;
    invite: Record<string, { invite_state: { events: Record<string, unknown>[] } }>;
    leave: Record<string, LeftRoom>;
    knock: Record<string, { knock_state: { events: Record<string, unknown>[] } }>;
    /** The world_readable rooms this device peeks into (MSC2753), present when there are any. */
    peek?: Record<string, JoinedRoom>;
  };
  presence: { events: Record<string, unknown>[] };
  account_data: { events: Record<string, unknown>[] };
  to_device?: { events: Record<string, unknown>[] };
  device_lists?: { changed: string[]; left: string[] };
  device_one_time_keys_count?: Record<string, number>;
  device_unused_fallback_key_types?: string[];
  [key: string]: unknown;
}

interface Timeline {
  events: Record<string, unknown>[];
  limited: boolean;
  prev_batch: string;
}

export interface JoinedRoom {
  timeline: Timeline;
  state: { events: Record<string, unknown>[] };
  ephemeral: { events: Record<string, unknown>[] };
  account_data: { events: Record<string, unknown>[] };
  summary: Record<string, unknown>;
  unread_notifications: UnreadCounts;
  /** With a timeline filter's `unread_thread_notifications`: counts of threads with notifications, by root. */
  unread_thread_notifications?: Record<string, UnreadCounts>;
}

export interface LeftRoom {
  timeline: Timeline;
  state: { events: Record<string, unknown>[] };
  account_data: { events: Record<string, unknown>[] };
}

/** /sync, with the notifier that wakes long-polls; /messages and /context are {@link RoomHistory}'s (history.ts). */
export class Sync {
  readonly notifier = new Notifier();
  readonly ephemeral: EphemeralStream;
  readonly typing: Typing;
  readonly presence: Presence;
  readonly receipts: Receipts;
  readonly formatter: EventFormatter;
  readonly visibility: Visibility;
  /** GET /relations and /threads. */
  readonly relations: RelationsReader;
  /** Push rule evaluation: unread counts and /notifications. */
  readonly push: PushNotifications;
  /** /messages, /context and the state at a token. */
  readonly history: RoomHistory;
  /** The deprecated GET /events. */
  readonly eventStream: EventStream;
  /** The rooms each device peeks into (MSC2753). */
  readonly peeks: Peeks;
  private readonly extensions: SyncExtension[] = [];
  /** Member events each device was sent, per room, for lazy loading (see withoutRedundantMembers). */
  private readonly sentMembers = new LruCache<string, Map<string, number>>(10_000);
  /** Set on hosts that deliver to push gateways. */
  pushDelivery: PushDelivery | undefined;

  constructor(
    private readonly db: Database,
    private readonly rooms: Rooms,
    private readonly users: Users,
    private readonly now: () => number,
    /** Set by the composition root once federation exists; without one, history ends where local history does. */
    public backfiller?: Backfiller,
  ) {
    const notify = (change: StreamChange) => this.notifier.notify(change);
    this.ephemeral = new EphemeralStream(now);
    this.typing = new Typing(this.ephemeral, notify, now);
    // A presence change wakes the user and everyone sharing a room with them.
    this.presence = new Presence(this.ephemeral, (change) => {
      notify(change);
      for (const userId of change.userIds ?? []) void rooms.roomsOf(userId).then((roomIds) => notify({ position: 0, roomIds }), () => undefined);
    }, now);
    this.receipts = new Receipts(db, notify, now);
    this.peeks = new Peeks(db, rooms, notify);
    this.visibility = new Visibility(rooms, (userId) => users.accountData.ignoredUsers(userId), (userId) => users.erasedAt(userId));
    this.formatter = new EventFormatter(rooms, now, this.visibility);
    this.push = new PushNotifications(rooms, users, this.receipts, this.formatter);
    this.relations = new RelationsReader(rooms, this.visibility, this.formatter);
    this.history = new RoomHistory(rooms, this.visibility, this.formatter, () => this.currentToken(), () => this.backfiller);
    this.eventStream = new EventStream(rooms, this.visibility, this.formatter, this.notifier, () => this.currentToken(), now);
  }

  addExtension(extension: SyncExtension): void {
    this.extensions.push(extension);
  }

  /** Forwarded from the storage layer's stream notifications. */
  notify(change: StreamChange): void {
    this.notifier.notify(change);
    if (change.roomIds) this.pushDelivery?.roomsChanged(change.roomIds, change.position);
  }

  /**
   * Starts sending notifications to local users' push gateways: for what comes after now the first
   * time, and from where it stopped after a restart (hosts that can reach them: see PushDelivery).
   */
  async deliverPushes(gateway: PushGateway, log: (message: string, error?: unknown) => void): Promise<PushDelivery> {
    this.pushDelivery = await PushDelivery.start({ db: this.db, rooms: this.rooms, users: this.users, push: this.push, gateway, position: await this.streamPosition(), log, now: this.now });
    return this.pushDelivery;
  }

  async currentToken(): Promise<SyncToken> {
    return { stream: await this.streamPosition(), ephemeral: this.ephemeral.current };
  }

  /** GET /rooms/{roomId}/messages: see {@link RoomHistory.messages}. */
  messages(roomId: string, viewer: Viewer, options: Parameters<RoomHistory['messages']>[2]): Promise<MessagesPage> {
    return this.history.messages(roomId, viewer, options);
  }

  /** GET /rooms/{roomId}/context/{eventId}: see {@link RoomHistory.context}. */
  context(roomId: string, eventId: string, viewer: Viewer, limit: number, filter?: RoomEventFilter): ReturnType<RoomHistory['context']> {
    return this.history.context(roomId, eventId, viewer, limit, filter);
  }

  /** The room's state at a sync or pagination token (GET /members?at=). */
  stateAtToken(roomId: string, text: string): Promise<NidState> {
    return this.history.stateAtToken(roomId, text);
  }

  private async streamPosition(): Promise<number> {
    return readStreamPosition(this.db);
  }

  /** Answers /sync: at once when there is news, otherwise when news arrives or the timeout passes. */
  async sync(request: SyncRequest): Promise<SyncResponse> {
    const since = request.since === undefined ? undefined : parseToken(request.since);
    // `offline` means "do not mark me online" (the spec's words), not "mark me offline": Synapse leaves presence
    // alone, and clients that sync in the background (and the suites) rely on it.
    if (request.setPresence && request.setPresence !== 'offline') this.presence.touch(request.userId, request.setPresence);
    const deadline = this.now() + request.timeoutMs;
    for (;;) {
      const rooms = new Set(await this.rooms.roomsOf(request.userId, ['join', 'invite', 'knock']));
      for (const peek of await this.peeks.of(request.userId, request.deviceId)) rooms.add(peek.roomId);
      const listener = this.notifier.listen(request.userId, rooms, Math.max(0, deadline - this.now()));
      try {
        const response = await this.compute(request, since);
        const remaining = deadline - this.now();
        if (!since || request.fullState || hasNews(response) || remaining <= 0) {
          if (since) for (const extension of this.extensions) await extension.acknowledge?.(request.userId, request.deviceId, since.stream);
          return response;
        }
        if (!(await listener.changed)) {
          // Timed out with nothing new: answer with the same position.
          for (const extension of this.extensions) await extension.acknowledge?.(request.userId, request.deviceId, since.stream);
          return response;
        }
      } finally {
        listener.cancel();
      }
    }
  }

  private async compute(request: SyncRequest, since: SyncToken | undefined): Promise<SyncResponse> {
    const upTo: SyncToken = { stream: await this.streamPosition(), ephemeral: this.ephemeral.current };
    const { userId, deviceId, filter } = request;
    const viewer: Viewer = { userId, deviceId };
    const sinceStream = since?.stream ?? 0;
    const response: SyncResponse = {
      next_batch: formatToken(upTo),
      rooms: { join: {}, invite: {}, leave: {}, knock: {} },
      presence: { events: [] },
      account_data: { events: [] },
    };

    const memberships = await this.rooms.timeline.membershipsOf(userId, upTo.stream);
    const pushRules = await this.push.rulesOf(userId);
    const roomAccountData = new Map<string, Record<string, unknown>[]>();
    for (const item of await this.users.accountData.since(userId, sinceStream, upTo.stream)) {
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
    for (const peek of await this.peeks.of(userId, deviceId)) {
      if (joinedRooms.has(peek.roomId) || !roomMatches(filter, peek.roomId)) continue;
      const fresh = !since || peek.since > sinceStream;
      if (!fresh && (!active || !active.has(peek.roomId)) && !request.fullState) continue;
      const room = await this.joinedRoom(peek.roomId, viewer, filter, fresh ? undefined : since, upTo, fresh || request.fullState, [], pushRules);
      if (fresh || request.fullState || !isEmptyJoined(room)) peeked[peek.roomId] = room;
    }
    if (Object.keys(peeked).length > 0) response.rooms.peek = peeked;

    // Presence of the user and of those sharing a room with them: what changed, and what the client has not seen.
    const presence = new Map(this.presence.changedSince(since?.ephemeral ?? 0));
    for (const user of newlySeen) {
      const status = this.presence.get(user);
      if (user !== userId && status.changed > 0 && !presence.has(user)) presence.set(user, status);
    }
    for (const [user, status] of presence) {
      if (user !== userId && !newlySeen.has(user) && !(await this.rooms.roomsOf(user)).some((r) => joinedRooms.has(r))) continue;
      const event = {
        type: 'm.presence',
        sender: user,
        content: {
          presence: status.presence,
          last_active_ago: Math.max(0, this.now() - status.last_active_ts),
          currently_active: status.presence === 'online',
          ...(status.status_msg !== undefined ? { status_msg: status.status_msg } : {}),
        },
      };
      if (eventMatches(filter.presence, event)) response.presence.events.push(event);
    }

    for (const extension of this.extensions) {
      await extension.contribute({ userId, deviceId, since: sinceStream, upTo: upTo.stream, initial: !since }, response);
    }
    return response;
  }

  /** Whether an event (an invite) was sent by someone the user ignores: such invites are not shown. */
  private async fromIgnoredUser(userId: string, eventId: string): Promise<boolean> {
    const sender = (await this.rooms.getEvent(eventId))?.event.sender;
    return sender !== undefined && (await this.users.accountData.ignoredUsers(userId)).has(sender);
  }

  /** Rooms with new events, receipts, room account data or typing in (since, upTo]. */
  private async roomsWithNews(since: SyncToken, upTo: SyncToken, roomAccountData: Map<string, unknown>): Promise<Set<string>> {
    const rooms = new Set<string>([...roomAccountData.keys(), ...(await this.rooms.timeline.roomsWithEvents(since.stream, upTo.stream))]);
    for (const roomId of await this.receipts.roomsChanged(since.stream, upTo.stream)) rooms.add(roomId);
    for (const roomId of this.typing.changedSince(since.ephemeral)) rooms.add(roomId);
    return rooms;
  }

  /** Whether the user was joined to the room at a stream position (a sync token's). */
  private async wasJoinedAt(roomId: string, userId: string, stream: number): Promise<boolean> {
    const nid = (await this.rooms.timeline.stateAtStream(roomId, stream)).get(stateKey('m.room.member', userId));
    const member = nid === undefined ? undefined : await this.rooms.getEventByNid(nid);
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

    const stateAtSince = fullState ? undefined : await this.rooms.timeline.stateAtStream(roomId, sinceStream);
    let stateEvents = await this.stateSection(roomId, events, await this.rooms.timeline.stateAtStream(roomId, upTo.stream), stateAtSince, upTo.stream, viewer.userId, filter, limited);
    if (filter.room?.state?.lazy_load_members) stateEvents = this.withoutRedundantMembers(roomId, viewer, stateEvents, events, !stateAtSince || filter.room.state.include_redundant_members === true);
    if (newlySeen) {
      for (const stored of [...stateEvents, ...events]) {
        if (stored.event.type === 'm.room.member' && stored.event.content['membership'] === 'join') newlySeen.add(stored.event.state_key!);
      }
    }

    const ephemeral: Record<string, unknown>[] = [];
    const ephemeralFilter = filter.room?.ephemeral;
    const typing = this.typing.get(roomId);
    // Whenever typing changed in the room since `since` (an initial sync: ever), even to no one: a client starting
    // afresh learns that no one types, as Synapse tells it.
    if (typing.changed > (since?.ephemeral ?? 0)) {
      const event = { type: 'm.typing', content: { user_ids: typing.userIds } };
      if (eventMatches(ephemeralFilter, event)) ephemeral.push(event);
    }
    const receipts = await this.receipts.since(roomId, viewer.userId, sinceStream, upTo.stream);
    if (receipts.length > 0) {
      const event = { type: 'm.receipt', content: receiptContent(receipts) };
      if (eventMatches(ephemeralFilter, event)) ephemeral.push(event);
    }

    const format = (e: StoredEvent) => this.formatter.format(e, viewer).then((c) => this.shape(c, e, filter));
    return {
      timeline: { events: await Promise.all(events.map(format)), limited, prev_batch: prevBatch },
      state: { events: (await this.formatter.formatAll(stateEvents, viewer)).map((c, i) => this.shape(c, stateEvents[i]!, filter)) },
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
    if (!byThread) return { unread_notifications: unreadNotifications(await this.push.unread(roomId, userId, upTo, rules)) };
    const { main, threads } = await this.push.threadedUnread(roomId, userId, upTo, rules);
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
    const leave = await this.rooms.getEvent(leaveEventId);
    if (leave && (leave.outlier || leave.streamOrdering === null)) return this.outOfBandLeave(leave, position, viewer, filter, accountData);
    const end = leave?.streamOrdering ?? 0;
    const limit = Math.min(filter.room?.timeline?.limit ?? DEFAULT_TIMELINE_LIMIT, MAX_TIMELINE_LIMIT);
    const timeline = await this.timeline(roomId, viewer.userId, since?.stream ?? 0, end, limit, filter.room?.timeline);
    const { events } = timeline;
    const limited = await this.isLimited(roomId, viewer.userId, timeline, filter.room?.timeline, !since);
    const format = (e: StoredEvent) => this.formatter.format(e, viewer).then((c) => this.shape(c, e, filter));
    const start = events.length > 0 ? events[0]!.streamOrdering! - 1 : end;
    // The room as it was when the user left; what changed since `since` if they were in it then, all of it if
    // they joined (and left) since.
    const stateAtLeave = leave ? ((await this.rooms.stateAtEvent(leave.event.event_id, 'after')) ?? new Map()) : new Map<StateKey, number>();
    const stateAtSince = since && (await this.wasJoinedAt(roomId, viewer.userId, since.stream)) ? await this.rooms.timeline.stateAtStream(roomId, since.stream) : undefined;
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
    const formatted = await this.formatter.format(leave, viewer).then((c) => this.shape(c, leave, filter));
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
    if (!fromStart) return (await this.rooms.timeline.missingPrevEvents(first)).length > 0;
    // Every live event before the first was looked at already; backfilled history was not.
    let oldest = first;
    for await (const stored of this.rooms.timeline.backfilledBefore(roomId, positionBefore(first), 50)) {
      if (eventMatches(filter, stored.event) && (await this.visibility.canSee(userId, stored))) return true;
      oldest = stored;
    }
    return (await this.rooms.timeline.missingPrevEvents(oldest)).length > 0;
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
    return (await this.rooms.getEventsByNid([...nids.values()])).filter((stored): stored is StoredEvent => !!stored && eventMatches(stateFilter, stored.event));
  }

  /**
   * The state a timeline starts from: before its first event (a room joined over
   * federation has its state only there, before the join), or at `stream` when empty.
   */
  private async stateBefore(roomId: string, events: StoredEvent[], stream: number): Promise<ReadonlyMap<StateKey, number>> {
    const first = events[0];
    return (first && (await this.rooms.stateAtEvent(first.event.event_id, 'before'))) ?? this.rooms.timeline.stateAtStream(roomId, stream);
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
      stored.event.state_key !== undefined && (stateAtEnd ??= new Set((await this.rooms.timeline.stateAtStream(roomId, to)).values())).has(stored.nid);
    for await (const stored of this.rooms.timeline.streamRange(roomId, from, to, limit * 2)) {
      if (!eventMatches(filter, stored.event) || !((await this.visibility.canSee(userId, stored)) || (await isStateAtEnd(stored)))) continue;
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
    const member = await this.rooms.getEvent(memberEventId);
    // What the room's server handed over with an invite (invite_room_state) or a knock (knock_room_state).
    const carried = member?.event.unsigned?.['invite_room_state'] ?? member?.event.unsigned?.['knock_room_state'];
    const out: Record<string, unknown>[] = Array.isArray(carried)
      ? [...(carried as Record<string, unknown>[])]
      : (await this.rooms.exists(roomId)) ? await this.rooms.strippedState(roomId, member?.event.sender) : [];
    if (member) out.push(await this.formatter.format(member) as unknown as Record<string, unknown>);
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
    const summary: Record<string, unknown> = { 'm.joined_member_count': await this.rooms.memberCount(roomId, 'join'), 'm.invited_member_count': await this.rooms.memberCount(roomId, 'invite') };
    const named = (await this.rooms.currentStateEvent(roomId, 'm.room.name', '')) || (await this.rooms.currentStateEvent(roomId, 'm.room.canonical_alias', ''));
    if (!named) summary['m.heroes'] = [...(await this.rooms.members(roomId, 'join')), ...(await this.rooms.members(roomId, 'invite'))].filter((u) => u !== userId).sort().slice(0, 5);
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

function hasNews(response: SyncResponse): boolean {
  const r = response.rooms;
  return (
    Object.keys(r.join).length > 0 ||
    Object.keys(r.invite).length > 0 ||
    Object.keys(r.leave).length > 0 ||
    Object.keys(r.knock).length > 0 ||
    Object.keys(r.peek ?? {}).length > 0 ||
    response.presence.events.length > 0 ||
    response.account_data.events.length > 0 ||
    (response.to_device?.events.length ?? 0) > 0 ||
    (response.device_lists?.changed.length ?? 0) > 0 ||
    (response.device_lists?.left.length ?? 0) > 0
  );
}
