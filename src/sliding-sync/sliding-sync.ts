import type { Keys } from '../keys/keys.ts';
import { LruCache } from '../rooms/lru.ts';
import type { Rooms } from '../rooms/rooms.ts';
import type { Database, WriteTransaction } from '../storage/database.ts';
import type { Sync } from '../sync/sync.ts';
import type { DeviceListener, Users } from '../users/users.ts';
import { KeyedLock } from '../util/keyed-lock.ts';
import { extensionsOf, type AnswerRooms } from './extensions.ts';
import { mergeConfigs, RequiredState } from './required-state.ts';
import { RoomDataBuilder } from './room-data.ts';
import { BumpStamps, RoomLists, type Candidate } from './room-list.ts';
import { ConnectionStore, dropDeviceConnections, type ConnectionState, type SentRoom, type Sticky } from './store.ts';
import type { ExtensionsRequest, RoomConfig, SlidingSyncRequest, SlidingSyncResponse } from './types.ts';

export { UnknownPosError } from './store.ts';
export type { SlidingSyncRequest, SlidingSyncResponse } from './types.ts';

export interface SlidingSyncOptions {
  db: Database;
  rooms: Rooms;
  users: Users;
  keys: Keys;
  sync: Sync;
  now: () => number;
}

/**
 * Simplified sliding sync (MSC4186): lists of the user's rooms sorted by recency, of which only
 * the rooms in range are built; room subscriptions; extensions. What a connection was sent is kept
 * in the database (store.ts), so later answers carry only what changed, across restarts too.
 */
export class SlidingSync implements DeviceListener {
  private readonly store: ConnectionStore;
  private readonly lock = new KeyedLock();
  /** The latest request of each connection: an older one (a client that resent gave it up) answers nothing more. */
  private readonly latest = new Map<string, number>();
  /** How to end the wait of each connection's latest request. */
  private readonly waits = new Map<string, () => void>();
  private tickets = 0;
  private readonly bumpStamps: BumpStamps;
  /**
   * The rooms each user's long polls watch (joined, invited, knocked), as the last answer read them: a change of
   * the user's own membership wakes them by user, so the set is right until the answer that refreshes it.
   */
  private readonly watched = new LruCache<string, Set<string>>(10_000);

  constructor(private readonly options: SlidingSyncOptions) {
    this.store = new ConnectionStore(options.db, options.now);
    this.bumpStamps = new BumpStamps(options.rooms);
  }

  devicesAdded(): void {}

  /** A device signed out or deleted: its connections are dropped in the same write. */
  devicesRemoved(tx: WriteTransaction, userId: string, deviceIds: string[]): void {
    dropDeviceConnections(tx, userId, deviceIds);
  }

  async sync(request: SlidingSyncRequest): Promise<SlidingSyncResponse> {
    const { sync, now } = this.options;
    const name = `${request.userId}\u0000${request.deviceId}\u0000${request.connId}`;
    const ticket = ++this.tickets;
    this.latest.set(name, ticket);
    this.waits.get(name)?.();
    const deadline = now() + request.timeoutMs;
    const superseded = { pos: request.pos ?? '', lists: {}, rooms: {}, extensions: {} };
    try {
      for (;;) {
        if (this.latest.get(name) !== ticket) return superseded;
        let watched = this.watched.get(request.userId);
        if (!watched) {
          watched = new Set(await this.options.rooms.roomsOf(request.userId, ['join', 'invite', 'knock']));
          this.watched.set(request.userId, watched);
        }
        const listener = sync.notifier.listen(request.userId, watched, Math.max(0, deadline - now()));
        this.waits.set(name, listener.cancel);
        try {
          const answer = await this.lock.run(name, async () => (this.latest.get(name) === ticket ? this.answer(request, deadline - now() <= 0) : superseded));
          if (answer) return answer;
          if (!(await listener.changed) && this.latest.get(name) === ticket) {
            return (await this.lock.run(name, () => this.answer(request, true)))!;
          }
        } finally {
          listener.cancel();
          if (this.waits.get(name) === listener.cancel) this.waits.delete(name);
        }
      }
    } finally {
      if (this.latest.get(name) === ticket) this.latest.delete(name);
    }
  }

  /** An answer from the request's position, or undefined when it would be empty and `force` is false (the long poll waits on). */
  private async answer(request: SlidingSyncRequest, force: boolean): Promise<SlidingSyncResponse | undefined> {
    const { rooms, users, sync, keys } = this.options;
    const { userId, deviceId } = request;
    const from = await this.store.open(userId, deviceId, request.connId, request.pos);
    const upTo = await sync.currentToken();
    const sticky = stickyAfter(from.sticky, request);

    const lists = new RoomLists(rooms, users, sync, userId, this.bumpStamps);
    const candidates = await lists.candidates(from, upTo.stream);
    const watched = this.watched.get(userId);
    if (watched) {
      watched.clear();
      for (const c of candidates) if (c.membership.membership !== 'leave' && c.membership.membership !== 'ban') watched.add(c.roomId);
    }
    const byId = new Map(candidates.map((c) => [c.roomId, c]));
    const configs = new Map<string, RoomConfig[]>();
    // Rooms with receipts since the position, for the rooms built and the receipts extension alike.
    const receiptNews = from.pos !== undefined ? new Set(await sync.receipts.roomsChanged(from.stream, upTo.stream)) : undefined;
    const answerRooms: AnswerRooms = { byList: new Map(), subscribed: [], initial: new Set(), timelineEvents: new Map(), receiptNews };
    const response: SlidingSyncResponse = { pos: '', lists: {}, rooms: {}, extensions: {} };
    for (const [listName, list] of Object.entries(request.lists)) {
      const kept = await lists.filter(candidates, list.filters);
      response.lists[listName] = { count: kept.length };
      const inRange = new Set<string>();
      for (const [start, end] of list.ranges) for (const c of kept.slice(start, end + 1)) inRange.add(c.roomId);
      answerRooms.byList.set(listName, [...inRange]);
      for (const roomId of inRange) (configs.get(roomId) ?? configs.set(roomId, []).get(roomId)!).push(list);
    }
    for (const [roomId, config] of Object.entries(sticky.subscriptions)) {
      // A subscription to a room the user has no place in shows nothing.
      if (!byId.has(roomId)) continue;
      answerRooms.subscribed.push(roomId);
      (configs.get(roomId) ?? configs.set(roomId, []).get(roomId)!).push(config);
    }

    let rules: ReturnType<Sync['push']['rulesOf']> | undefined;
    const builder = new RoomDataBuilder(rooms, sync, userId, deviceId, () => (rules ??= sync.push.rulesOf(userId)), () => lists.directRooms());
    // Rooms with events since the position: a room the connection has up to there, and nothing else new, is skipped unread.
    const eventNews = from.pos !== undefined ? new Set(await rooms.timeline.roomsWithEvents(from.stream, upTo.stream)) : undefined;
    const sent = new Map<string, SentRoom>();
    for (const [roomId, roomConfigs] of configs) {
      const candidate: Candidate = byId.get(roomId)!;
      const had = from.rooms.get(roomId);
      const config = mergeConfigs(roomConfigs);
      const receipts = receiptNews?.has(roomId) ?? false;
      const quiet = eventNews && had && had.sentStream >= from.stream && had.membership === candidate.membership.membership && !eventNews.has(roomId) && !receipts;
      if (quiet && had.requiredState === RequiredState.key(config)) continue;
      const built = await builder.build(candidate, config, had, upTo, receipts);
      if (!built.data) continue;
      response.rooms[roomId] = built.data;
      sent.set(roomId, built.sent);
      if (built.initial) answerRooms.initial.add(roomId);
      const timeline = built.data['timeline'] as { event_id: string }[] | undefined;
      if (timeline) answerRooms.timelineEvents.set(roomId, new Set(timeline.map((e) => e.event_id)));
    }

    // `since` is this request's alone: the rest of the extension settings stay in force.
    const ext = { ...sticky.extensions } as ExtensionsRequest;
    if (ext.to_device) ext.to_device = { ...ext.to_device, since: request.extensions.to_device?.since };
    const { extensions, news } = await extensionsOf({ keys, users, sync }, request, ext, from, upTo, answerRooms);
    response.extensions = extensions;
    if (request.txnId !== undefined) response.txn_id = request.txnId;
    const stickyChanged = JSON.stringify(sticky) !== JSON.stringify(from.sticky);
    const empty = from.pos !== undefined && sent.size === 0 && !news && !stickyChanged;
    if (empty) {
      if (!force) return undefined;
      response.pos = String(from.pos);
      return response;
    }
    response.pos = await this.store.save(from, upTo, sticky, sent);
    return response;
  }
}

/** The sticky parameters after a request: subscriptions added and removed, extension settings merged into the old. */
function stickyAfter(before: Sticky, request: SlidingSyncRequest): Sticky {
  const subscriptions = { ...before.subscriptions };
  for (const roomId of request.unsubscribeRooms) delete subscriptions[roomId];
  for (const [roomId, config] of Object.entries(request.roomSubscriptions)) subscriptions[roomId] = config;
  const extensions = { ...before.extensions };
  for (const [name, settings] of Object.entries(request.extensions)) {
    if (!settings) continue;
    // `since` belongs to this request only; the rest stays in force.
    const { since: _since, ...rest } = settings as Record<string, unknown>;
    extensions[name] = { ...(extensions[name] ?? {}), ...rest };
  }
  return { subscriptions, extensions };
}

export type { ConnectionState };
