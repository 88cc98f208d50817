import { stateKey, type StateKey } from '../events/event.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import type { Database } from '../storage/database.ts';
import type { StreamChange } from '../storage/stream.ts';
import type { Users } from '../users/users.ts';
import { EphemeralStream, Presence, Typing } from './ephemeral.ts';
import { eventMatches, pickEventFields, roomMatches, type Filter, type RoomEventFilter } from './filter.ts';
import { EventFormatter, type ClientEvent, type Viewer } from './format.ts';
import { Notifier } from './notifier.ts';
import { receiptContent, Receipts } from './receipts.ts';
import { parseToken, formatToken, type SyncToken } from './token.ts';
import { Visibility } from './visibility.ts';

export const DEFAULT_TIMELINE_LIMIT = 10;
const MAX_TIMELINE_LIMIT = 100;

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
  unread_notifications: { notification_count: number; highlight_count: number };
}

export interface LeftRoom {
  timeline: Timeline;
  state: { events: Record<string, unknown>[] };
  account_data: { events: Record<string, unknown>[] };
}

type EventRowIds = { event_nid: number; stream_ordering: number };

/** /sync, /messages and /context, with the notifier that wakes long-polls. */
export class Sync {
  readonly notifier = new Notifier();
  readonly ephemeral: EphemeralStream;
  readonly typing: Typing;
  readonly presence: Presence;
  readonly receipts: Receipts;
  readonly formatter: EventFormatter;
  readonly visibility: Visibility;
  private readonly extensions: SyncExtension[] = [];

  constructor(
    private readonly db: Database,
    private readonly rooms: Rooms,
    private readonly users: Users,
    private readonly now: () => number,
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
    this.formatter = new EventFormatter(rooms, now);
    this.visibility = new Visibility(rooms);
  }

  addExtension(extension: SyncExtension): void {
    this.extensions.push(extension);
  }

  /** Forwarded from the storage layer's stream notifications. */
  notify(change: StreamChange): void {
    this.notifier.notify(change);
  }

  async currentToken(): Promise<SyncToken> {
    return { stream: await this.streamPosition(), ephemeral: this.ephemeral.current };
  }

  private async streamPosition(): Promise<number> {
    return (await this.db.get<{ id: number }>('SELECT id FROM stream_position'))!.id;
  }

  /** Answers /sync: at once when there is news, otherwise when news arrives or the timeout passes. */
  async sync(request: SyncRequest): Promise<SyncResponse> {
    const since = request.since === undefined ? undefined : parseToken(request.since);
    if (request.setPresence) this.presence.touch(request.userId, request.setPresence);
    const deadline = this.now() + request.timeoutMs;
    for (;;) {
      const rooms = new Set(await this.rooms.roomsOf(request.userId, ['join', 'invite', 'knock']));
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

    const memberships = await this.db.all<{ room_id: string; membership: string; event_id: string; stream_ordering: number; forgotten: number }>(
      'SELECT room_id, membership, event_id, stream_ordering, forgotten FROM local_memberships WHERE user_id = ? AND stream_ordering <= ?',
      [userId, upTo.stream],
    );
    const roomAccountData = new Map<string, Record<string, unknown>[]>();
    for (const item of await this.users.accountDataSince(userId, sinceStream, upTo.stream)) {
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
    for (const m of memberships) {
      if (!roomMatches(filter, m.room_id)) continue;
      const changedSince = m.stream_ordering > sinceStream;
      if (m.membership === 'join') {
        joinedRooms.add(m.room_id);
        // A room joined since `since` is new to the client: all of it. full_state sends all state but keeps the timeline incremental.
        const fresh = !since || changedSince;
        if (active && !fresh && !active.has(m.room_id)) continue;
        const joined = await this.joinedRoom(m.room_id, viewer, filter, fresh ? undefined : since, upTo, fresh || request.fullState, roomAccountData.get(m.room_id) ?? []);
        if (!since || request.fullState || changedSince || !isEmptyJoined(joined)) response.rooms.join[m.room_id] = joined;
      } else if (m.membership === 'invite' && (changedSince || !since)) {
        response.rooms.invite[m.room_id] = { invite_state: { events: await this.strippedState(m.room_id, m.event_id) } };
      } else if (m.membership === 'knock' && (changedSince || !since)) {
        response.rooms.knock[m.room_id] = { knock_state: { events: await this.strippedState(m.room_id, m.event_id) } };
      } else if ((m.membership === 'leave' || m.membership === 'ban') && !m.forgotten) {
        const include = since ? changedSince : filter.room?.include_leave === true;
        if (include) response.rooms.leave[m.room_id] = await this.leftRoom(m.room_id, m.event_id, viewer, filter, since, roomAccountData.get(m.room_id) ?? []);
      }
    }

    // Presence of the user and of those sharing a room with them.
    for (const [user, status] of this.presence.changedSince(since?.ephemeral ?? 0)) {
      if (user !== userId && !(await this.rooms.roomsOf(user)).some((r) => joinedRooms.has(r))) continue;
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

  /** Rooms with new events, receipts, room account data or typing in (since, upTo]. */
  private async roomsWithNews(since: SyncToken, upTo: SyncToken, roomAccountData: Map<string, unknown>): Promise<Set<string>> {
    const rooms = new Set<string>(roomAccountData.keys());
    const range = [since.stream, upTo.stream];
    for (const row of await this.db.all<{ room_id: string }>('SELECT DISTINCT room_id FROM events WHERE stream_ordering > ? AND stream_ordering <= ?', range)) rooms.add(row.room_id);
    for (const row of await this.db.all<{ room_id: string }>('SELECT DISTINCT room_id FROM receipts WHERE stream_id > ? AND stream_id <= ?', range)) rooms.add(row.room_id);
    for (const roomId of this.typing.changedSince(since.ephemeral)) rooms.add(roomId);
    return rooms;
  }

  private async joinedRoom(
    roomId: string,
    viewer: Viewer,
    filter: Filter,
    since: SyncToken | undefined,
    upTo: SyncToken,
    fullState: boolean,
    accountData: Record<string, unknown>[],
  ): Promise<JoinedRoom> {
    const timelineFilter = filter.room?.timeline;
    const limit = Math.min(timelineFilter?.limit ?? DEFAULT_TIMELINE_LIMIT, MAX_TIMELINE_LIMIT);
    const sinceStream = since?.stream ?? 0;
    const { events, limited } = await this.timeline(roomId, viewer.userId, sinceStream, upTo.stream, limit, timelineFilter);
    const prevBatch = formatToken({ stream: events.length > 0 ? events[0]!.streamOrdering! - 1 : upTo.stream, ephemeral: upTo.ephemeral });

    // State: everything at the start of the timeline (full) or what changed between `since` and it.
    const stateFilter = filter.room?.state;
    const stateAtStart = await this.stateAtStream(roomId, events.length > 0 ? events[0]!.streamOrdering! - 1 : upTo.stream);
    let stateNids: Map<StateKey, number>;
    if (fullState) {
      stateNids = new Map(stateAtStart);
    } else {
      const stateAtSince = await this.stateAtStream(roomId, sinceStream);
      stateNids = new Map([...stateAtStart].filter(([key, nid]) => stateAtSince.get(key) !== nid));
    }
    const timelineIds = new Set(events.map((e) => e.event.event_id));
    if (stateFilter?.lazy_load_members) {
      const needed = new Set(events.map((e) => e.event.sender));
      needed.add(viewer.userId);
      for (const key of [...stateNids.keys()]) {
        if (key.startsWith('m.room.member\u0000') && !needed.has(key.slice('m.room.member\u0000'.length))) stateNids.delete(key);
      }
      if (fullState || events.length > 0) {
        for (const sender of needed) {
          const key = stateKey('m.room.member', sender);
          const nid = stateAtStart.get(key);
          if (nid !== undefined) stateNids.set(key, nid);
        }
      }
    }
    const stateEvents: StoredEvent[] = [];
    for (const nid of stateNids.values()) {
      const stored = await this.rooms.getEventByNid(nid);
      if (stored && !timelineIds.has(stored.event.event_id) && eventMatches(stateFilter, stored.event)) stateEvents.push(stored);
    }

    const ephemeral: Record<string, unknown>[] = [];
    const ephemeralFilter = filter.room?.ephemeral;
    const typing = this.typing.get(roomId);
    if (!since || typing.changed > since.ephemeral) {
      const event = { type: 'm.typing', content: { user_ids: typing.userIds } };
      if (eventMatches(ephemeralFilter, event) && (since || typing.userIds.length > 0)) ephemeral.push(event);
    }
    const receipts = await this.receipts.since(roomId, viewer.userId, sinceStream, upTo.stream);
    if (receipts.length > 0) {
      const event = { type: 'm.receipt', content: receiptContent(receipts) };
      if (eventMatches(ephemeralFilter, event)) ephemeral.push(event);
    }

    const format = (e: StoredEvent) => this.formatter.format(e, viewer).then((c) => this.shape(c, filter));
    return {
      timeline: { events: await Promise.all(events.map(format)), limited, prev_batch: prevBatch },
      state: { events: await Promise.all(stateEvents.map(format)) },
      ephemeral: { events: ephemeral },
      account_data: { events: accountData },
      summary: since && !fullState ? {} : await this.summary(roomId, viewer.userId),
      unread_notifications: await this.unreadCounts(roomId, viewer.userId),
    };
  }

  private async leftRoom(
    roomId: string,
    leaveEventId: string,
    viewer: Viewer,
    filter: Filter,
    since: SyncToken | undefined,
    accountData: Record<string, unknown>[],
  ): Promise<LeftRoom> {
    const leave = await this.rooms.getEvent(leaveEventId);
    const end = leave?.streamOrdering ?? 0;
    const limit = Math.min(filter.room?.timeline?.limit ?? DEFAULT_TIMELINE_LIMIT, MAX_TIMELINE_LIMIT);
    const { events, limited } = await this.timeline(roomId, viewer.userId, since?.stream ?? 0, end, limit, filter.room?.timeline);
    const format = (e: StoredEvent) => this.formatter.format(e, viewer).then((c) => this.shape(c, filter));
    const start = events.length > 0 ? events[0]!.streamOrdering! - 1 : end;
    const state: StoredEvent[] = [];
    if (!since) {
      for (const nid of (await this.stateAtStream(roomId, start)).values()) {
        const stored = await this.rooms.getEventByNid(nid);
        if (stored) state.push(stored);
      }
    }
    return {
      timeline: { events: await Promise.all(events.map(format)), limited, prev_batch: formatToken({ stream: start, ephemeral: 0 }) },
      state: { events: await Promise.all(state.map(format)) },
      account_data: { events: accountData },
    };
  }

  private shape(event: ClientEvent, filter: Filter): Record<string, unknown> {
    const { room_id: _room, ...rest } = event;
    return pickEventFields(rest as Record<string, unknown>, filter.event_fields);
  }

  /** The newest visible events in (from, to], oldest first, and whether more were left out. */
  private async timeline(roomId: string, userId: string, from: number, to: number, limit: number, filter: RoomEventFilter | undefined) {
    const picked: StoredEvent[] = [];
    let cursor = to;
    let limited = false;
    // Page backwards until `limit` visible, matching events are found.
    while (picked.length < limit) {
      const batch = await this.db.all<EventRowIds>(
        'SELECT event_nid, stream_ordering FROM events WHERE room_id = ? AND stream_ordering > ? AND stream_ordering <= ? ORDER BY stream_ordering DESC LIMIT ?',
        [roomId, from, cursor, limit * 2],
      );
      if (batch.length === 0) break;
      for (const row of batch) {
        cursor = row.stream_ordering - 1;
        const stored = await this.rooms.getEventByNid(row.event_nid);
        if (!stored || !eventMatches(filter, stored.event)) continue;
        if (!(await this.visibility.canSee(userId, stored))) continue;
        if (picked.length === limit) {
          limited = true;
          break;
        }
        picked.push(stored);
      }
      if (limited) break;
    }
    if (!limited && picked.length === limit) {
      limited = !!(await this.db.get('SELECT 1 FROM events WHERE room_id = ? AND stream_ordering > ? AND stream_ordering <= ? LIMIT 1', [roomId, from, cursor]));
    }
    return { events: picked.reverse(), limited };
  }

  /** The room's state after the last event at or before a stream position. */
  async stateAtStream(roomId: string, position: number): Promise<ReadonlyMap<StateKey, number>> {
    const row = await this.db.get<{ event_id: string }>(
      'SELECT event_id FROM events WHERE room_id = ? AND stream_ordering <= ? AND stream_ordering IS NOT NULL ORDER BY stream_ordering DESC LIMIT 1',
      [roomId, position],
    );
    if (!row) return new Map();
    return (await this.rooms.stateAtEvent(row.event_id, 'after')) ?? new Map();
  }

  private async strippedState(roomId: string, memberEventId: string): Promise<Record<string, unknown>[]> {
    const types = ['m.room.create', 'm.room.join_rules', 'm.room.name', 'm.room.avatar', 'm.room.canonical_alias', 'm.room.encryption', 'm.room.topic'];
    const out: Record<string, unknown>[] = [];
    const member = await this.rooms.getEvent(memberEventId);
    const inviteState = member?.event.unsigned?.['invite_room_state'];
    if (Array.isArray(inviteState)) out.push(...(inviteState as Record<string, unknown>[]));
    else if (await this.rooms.exists(roomId)) {
      for (const type of types) {
        const stored = await this.rooms.currentStateEvent(roomId, type, '');
        if (stored) out.push(EventFormatter.stripped(stored, (await this.rooms.roomVersion(roomId))!));
      }
      if (member) {
        const inviter = await this.rooms.currentStateEvent(roomId, 'm.room.member', member.event.sender);
        if (inviter) out.push(EventFormatter.stripped(inviter, (await this.rooms.roomVersion(roomId))!));
      }
    }
    if (member) out.push(await this.formatter.format(member) as unknown as Record<string, unknown>);
    return out;
  }

  private async summary(roomId: string, userId: string): Promise<Record<string, unknown>> {
    const joined = await this.rooms.members(roomId, 'join');
    const invited = await this.rooms.members(roomId, 'invite');
    const summary: Record<string, unknown> = { 'm.joined_member_count': joined.length, 'm.invited_member_count': invited.length };
    const named = (await this.rooms.currentStateEvent(roomId, 'm.room.name', '')) || (await this.rooms.currentStateEvent(roomId, 'm.room.canonical_alias', ''));
    if (!named) summary['m.heroes'] = [...joined, ...invited].filter((u) => u !== userId).sort().slice(0, 5);
    return summary;
  }

  /** Messages from others after the user's read receipt (push rules are not evaluated yet). */
  private async unreadCounts(roomId: string, userId: string): Promise<{ notification_count: number; highlight_count: number }> {
    const receipt = await this.receipts.latestFor(roomId, userId);
    const after = receipt ? ((await this.rooms.getEvent(receipt))?.streamOrdering ?? 0) : 0;
    const row = await this.db.get<{ n: number }>(
      `SELECT COUNT(*) AS n FROM events WHERE room_id = ? AND stream_ordering > ? AND sender != ?
       AND type IN ('m.room.message', 'm.room.encrypted') AND redacted_by IS NULL`,
      [roomId, after, userId],
    );
    return { notification_count: row?.n ?? 0, highlight_count: 0 };
  }

  // ---------------------------------------------------------- /messages

  /** Paginates a room's timeline (client-server GET /rooms/{roomId}/messages). */
  async messages(
    roomId: string,
    viewer: Viewer,
    options: { from?: string; to?: string; dir: 'b' | 'f'; limit: number; filter?: RoomEventFilter },
  ): Promise<{ chunk: Record<string, unknown>[]; start: string; end?: string; state: Record<string, unknown>[] }> {
    const current = await this.currentToken();
    const from = options.from ? parseToken(options.from) : options.dir === 'b' ? current : { stream: 0, ephemeral: 0 };
    const to = options.to ? parseToken(options.to).stream : undefined;
    const membership = await this.rooms.membership(roomId, viewer.userId);
    // A user who left sees history only up to their leave.
    let ceiling = current.stream;
    if (membership !== 'join') {
      const row = await this.db.get<{ event_id: string; stream_ordering: number }>(
        'SELECT event_id, stream_ordering FROM local_memberships WHERE user_id = ? AND room_id = ?', [viewer.userId, roomId],
      );
      ceiling = row?.stream_ordering ?? 0;
    }
    const picked: StoredEvent[] = [];
    let cursor = options.dir === 'b' ? Math.min(from.stream, ceiling) : from.stream;
    let exhausted = false;
    while (picked.length < options.limit) {
      const rows = options.dir === 'b'
        ? await this.db.all<EventRowIds>(
            'SELECT event_nid, stream_ordering FROM events WHERE room_id = ? AND stream_ordering <= ? AND stream_ordering > ? ORDER BY stream_ordering DESC LIMIT ?',
            [roomId, cursor, to ?? 0, options.limit * 2],
          )
        : await this.db.all<EventRowIds>(
            'SELECT event_nid, stream_ordering FROM events WHERE room_id = ? AND stream_ordering > ? AND stream_ordering <= ? ORDER BY stream_ordering ASC LIMIT ?',
            [roomId, cursor, Math.min(to ?? ceiling, ceiling), options.limit * 2],
          );
      if (rows.length === 0) {
        exhausted = true;
        break;
      }
      for (const row of rows) {
        if (picked.length === options.limit) break;
        cursor = options.dir === 'b' ? row.stream_ordering - 1 : row.stream_ordering;
        const stored = await this.rooms.getEventByNid(row.event_nid);
        if (!stored || !eventMatches(options.filter, stored.event)) continue;
        if (await this.visibility.canSee(viewer.userId, stored, membership)) picked.push(stored);
      }
    }
    const chunk = await Promise.all(picked.map((e) => this.formatter.format(e, viewer)));
    const state: Record<string, unknown>[] = [];
    if (options.filter?.lazy_load_members) {
      const senders = new Set(picked.map((e) => e.event.sender));
      for (const sender of senders) {
        const member = await this.rooms.currentStateEvent(roomId, 'm.room.member', sender);
        if (member) state.push((await this.formatter.format(member, viewer)) as unknown as Record<string, unknown>);
      }
    }
    const result: { chunk: Record<string, unknown>[]; start: string; end?: string; state: Record<string, unknown>[] } = {
      chunk: chunk as unknown as Record<string, unknown>[],
      start: formatToken(from),
      state,
    };
    // No `end` once the timeline is exhausted in this direction (the spec's signal to stop).
    if (!exhausted) result.end = formatToken({ stream: cursor, ephemeral: from.ephemeral });
    return result;
  }

  /** Events around one event (client-server GET /rooms/{roomId}/context/{eventId}). */
  async context(roomId: string, eventId: string, viewer: Viewer, limit: number, filter?: RoomEventFilter) {
    const target = await this.rooms.getEvent(eventId);
    if (!target || target.event.room_id !== roomId || target.streamOrdering === null) return undefined;
    if (!(await this.visibility.canSee(viewer.userId, target))) return undefined;
    const half = Math.floor(limit / 2);
    const before = await this.messages(roomId, viewer, { from: formatToken({ stream: target.streamOrdering - 1, ephemeral: 0 }), dir: 'b', limit: half, filter });
    const after = await this.messages(roomId, viewer, { from: formatToken({ stream: target.streamOrdering, ephemeral: 0 }), dir: 'f', limit: limit - half, filter });
    const state: Record<string, unknown>[] = [];
    const stateNids = (await this.rooms.stateAtEvent(eventId, 'after')) ?? new Map();
    for (const nid of stateNids.values()) {
      const stored = await this.rooms.getEventByNid(nid);
      if (!stored) continue;
      if (filter?.lazy_load_members && stored.event.type === 'm.room.member') {
        const senders = new Set([target.event.sender, ...[...before.chunk, ...after.chunk].map((e) => e['sender'])]);
        if (!senders.has(stored.event.state_key)) continue;
      }
      state.push((await this.formatter.format(stored, viewer)) as unknown as Record<string, unknown>);
    }
    return {
      event: await this.formatter.format(target, viewer),
      events_before: before.chunk,
      events_after: after.chunk,
      start: before.end ?? before.start,
      end: after.end ?? after.start,
      state,
    };
  }
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
    response.presence.events.length > 0 ||
    response.account_data.events.length > 0 ||
    (response.to_device?.events.length ?? 0) > 0 ||
    (response.device_lists?.changed.length ?? 0) > 0 ||
    (response.device_lists?.left.length ?? 0) > 0
  );
}
