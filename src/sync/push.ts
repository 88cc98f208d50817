import { stateKey } from '../events/event.ts';
import { powerLevelsOf } from '../events/power-levels.ts';
import { LruCache } from '../rooms/lru.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import { evaluatePushRules, type PushContext, type PushEvent, type PushOutcome, type PushRuleset } from '../users/push-rules.ts';
import type { Users } from '../users/users.ts';
import type { ClientEvent, EventFormatter, Viewer } from './format.ts';
import type { Receipts } from './receipts.ts';
import { TokenError } from './token.ts';

// What a user's push rules say of the events in their rooms: /sync's unread
// notification and highlight counts, and GET /notifications. Rules are evaluated
// when these are first read after an event arrives, not when it is sent, so the
// send path pays nothing. The counts are kept per user and room, and each event's
// outcome per user is remembered, so (as in Synapse, which evaluates on arrival)
// a rule changed later applies to the events that come after it.

export interface UnreadCounts {
  notification_count: number;
  highlight_count: number;
  /** MSC2625's count, as /sync gives it (unstable name). */
  'org.matrix.msc2625.unread_count'?: number;
}

/** With MSC2625's count of events that are unread (`notify` or `mark_unread`), which /sync gives under its unstable name. */
export interface RoomUnreadCounts extends UnreadCounts {
  unread_count: number;
}

const NO_COUNTS: RoomUnreadCounts = { notification_count: 0, highlight_count: 0, unread_count: 0 };

/** A user's push rules, as their m.push_rules account data holds them. */
export interface UserPushRules {
  rules: PushRuleset;
}

export interface Notification {
  actions: unknown[];
  event: Omit<ClientEvent, 'room_id'>;
  /** The profile tag of the pusher the asking access token set, when it gave one. */
  profile_tag?: string;
  read: boolean;
  room_id: string;
  ts: number;
}

interface CountEntry {
  /** The stream position of the read receipt the counts start after. */
  after: number;
  /** Events up to this stream position are counted. */
  upTo: number;
  notify: number;
  highlight: number;
  unread: number;
}

/** How many events of one room /notifications looks through for one page. */
const MAX_NOTIFICATION_SCAN = 5000;

export class PushNotifications {
  private readonly counts = new LruCache<string, CountEntry>(10_000);
  /** What the rules said of an event for a user when it was first looked at, by user and event nid. */
  private readonly outcomes = new LruCache<string, PushOutcome | null>(100_000);
  /** Counts by thread ('main' for the main timeline) from the receipts `signature` names, up to a stream position. */
  private readonly threadedCounts = new LruCache<string, { signature: string; upTo: number; counts: Map<string, RoomUnreadCounts> }>(10_000);

  constructor(
    private readonly rooms: Rooms,
    private readonly users: Users,
    private readonly receipts: Receipts,
    private readonly formatter: EventFormatter,
  ) {}

  async rulesOf(userId: string): Promise<UserPushRules | undefined> {
    const global = (await this.users.accountData.get(userId, '', 'm.push_rules'))?.['global'];
    if (typeof global !== 'object' || global === null) return undefined;
    return { rules: global as PushRuleset };
  }

  /** Events after the user's read receipt, up to a stream position, that their rules say notify (and highlight), or mark unread. */
  async unread(roomId: string, userId: string, upTo: number, rules: UserPushRules | undefined): Promise<RoomUnreadCounts> {
    if (!rules) return { ...NO_COUNTS };
    const after = await this.receiptPosition(roomId, userId);
    const key = `${userId}\u0000${roomId}`;
    let entry = this.counts.get(key);
    if (!entry || entry.after !== after || entry.upTo > upTo) entry = { after, upTo: after, notify: 0, highlight: 0, unread: 0 };
    if (entry.upTo < upTo) {
      const next = { ...entry, upTo };
      const context = await this.contextFor(roomId, userId);
      for await (const stored of this.rooms.timeline.streamRange(roomId, entry.upTo, upTo, 100)) {
        const outcome = await this.outcome(stored, userId, rules.rules, context);
        if (outcome?.markUnread) next.unread++;
        if (!outcome?.notify) continue;
        next.notify++;
        if (outcome.highlight) next.highlight++;
      }
      entry = next;
    }
    this.counts.set(key, entry);
    return { notification_count: entry.notify, highlight_count: entry.highlight, unread_count: entry.unread };
  }

  /**
   * Unread counts split by thread (a /sync filter with `unread_thread_notifications`): the main
   * timeline's, and each thread's with notifications, keyed by its root. A thread's count starts
   * after the later of the unthreaded receipt and the one for that thread; the main timeline's
   * after the later of the unthreaded receipt and the `main` one (client-server §Threaded read receipts).
   */
  async threadedUnread(roomId: string, userId: string, upTo: number, rules: UserPushRules | undefined): Promise<{ main: RoomUnreadCounts; threads: Record<string, RoomUnreadCounts> }> {
    if (!rules) return { main: { ...NO_COUNTS }, threads: {} };
    const positions = new Map<string, number>();
    for (const { threadId, eventId } of await this.receipts.readReceiptsByThread(roomId, userId)) {
      const position = (await this.rooms.getEvent(eventId))?.streamOrdering ?? 0;
      positions.set(threadId, Math.max(positions.get(threadId) ?? 0, position));
    }
    const unthreaded = positions.get('') ?? 0;
    const after = (thread: string) => Math.max(unthreaded, positions.get(thread) ?? 0);
    const signature = JSON.stringify([...positions].sort());
    const key = `${userId}\u0000${roomId}`;
    let entry = this.threadedCounts.get(key);
    if (!entry || entry.signature !== signature || entry.upTo > upTo) entry = { signature, upTo: unthreaded, counts: new Map() };
    if (entry.upTo < upTo) {
      const counts = new Map([...entry.counts].map(([k, v]) => [k, { ...v }]));
      const context = await this.contextFor(roomId, userId);
      let batch: StoredEvent[] = [];
      const flush = async () => {
        const threadOf = await this.rooms.relations.threadsOf(batch.map((e) => e.nid));
        for (const stored of batch) {
          const thread = threadOf.get(stored.nid) ?? 'main';
          if (stored.streamOrdering! <= after(thread)) continue;
          const outcome = await this.outcome(stored, userId, rules.rules, context);
          if (!outcome?.markUnread) continue;
          const count = counts.get(thread) ?? { ...NO_COUNTS };
          count.unread_count++;
          if (outcome.notify) count.notification_count++;
          if (outcome.notify && outcome.highlight) count.highlight_count++;
          counts.set(thread, count);
        }
        batch = [];
      };
      for await (const stored of this.rooms.timeline.streamRange(roomId, entry.upTo, upTo, 100)) {
        batch.push(stored);
        if (batch.length === 100) await flush();
      }
      await flush();
      entry = { signature, upTo, counts };
    }
    this.threadedCounts.set(key, entry);
    const threads: Record<string, RoomUnreadCounts> = {};
    // Threads with notifications, as the spec lists them.
    for (const [thread, count] of entry.counts) if (thread !== 'main' && count.notification_count > 0) threads[thread] = { ...count };
    return { main: { ...(entry.counts.get('main') ?? NO_COUNTS) }, threads };
  }

  /**
   * The events the user was notified about in the rooms they are joined to, newest
   * first (client-server GET /notifications). `from` is a `next_token`: a stream position.
   */
  async notifications(viewer: Viewer & { tokenId?: string }, options: { from?: string; limit: number; only?: string }): Promise<{ notifications: Notification[]; next_token?: string }> {
    const { userId } = viewer;
    if (options.from !== undefined && !/^\d{1,15}$/.test(options.from)) throw new TokenError(`invalid token ${JSON.stringify(options.from)}`);
    const before = options.from === undefined ? Number.MAX_SAFE_INTEGER : Number(options.from);
    const rules = await this.rulesOf(userId);
    if (!rules || options.limit === 0) return { notifications: [] };
    const found: { stored: StoredEvent; outcome: PushOutcome }[] = [];
    for (const roomId of await this.rooms.roomsOf(userId, ['join'])) {
      const context = await this.contextFor(roomId, userId);
      let scanned = 0;
      let inRoom = 0;
      for await (const stored of this.rooms.timeline.streamRange(roomId, 0, before - 1, 100)) {
        if (++scanned > MAX_NOTIFICATION_SCAN) break;
        const outcome = await this.outcome(stored, userId, rules.rules, context);
        if (!outcome?.notify || (options.only === 'highlight' && !outcome.highlight)) continue;
        found.push({ stored, outcome });
        if (++inRoom === options.limit) break;
      }
    }
    found.sort((a, b) => b.stored.streamOrdering! - a.stored.streamOrdering!);
    const page = found.slice(0, options.limit);
    const receipts = new Map<string, number>();
    const notifications: Notification[] = [];
    // The rules are the user's, whatever the device; the tag says which device's pusher asks, as the spec's field does.
    const profileTag = await this.users.pushers.profileTagOf(userId, viewer.tokenId);
    for (const { stored, outcome } of page) {
      const roomId = stored.event.room_id;
      if (!receipts.has(roomId)) receipts.set(roomId, await this.receiptPosition(roomId, userId));
      const { room_id: _room, ...event } = await this.formatter.format(stored, viewer);
      notifications.push({
        actions: outcome.actions, event, ...(profileTag !== undefined ? { profile_tag: profileTag } : {}),
        read: stored.streamOrdering! <= receipts.get(roomId)!, room_id: roomId, ts: stored.event.origin_server_ts,
      });
    }
    const result: { notifications: Notification[]; next_token?: string } = { notifications };
    if (page.length === options.limit) result.next_token = String(page.at(-1)!.stored.streamOrdering);
    return result;
  }

  /** What the user's rules say of a room's events (for delivery to push gateways), the room read once for all of them. */
  async evaluatorFor(roomId: string, userId: string, rules: UserPushRules): Promise<(stored: StoredEvent) => Promise<PushOutcome | undefined>> {
    const context = await this.contextFor(roomId, userId);
    return async (stored) => {
      // The user's own invite, which came before they joined: pushed, as Synapse does (the default rule
      // `.m.rule.invite_for_me`), though it counts in no room's unread counts.
      const event = stored.event;
      if (event.type === 'm.room.member' && event.state_key === userId && event.content['membership'] === 'invite' && event.sender !== userId && !stored.redactedBy && !stored.rejected && !stored.softFailed) {
        return evaluatePushRules(rules.rules, event as unknown as PushEvent, context);
      }
      return this.outcome(stored, userId, rules.rules, context);
    };
  }

  private async receiptPosition(roomId: string, userId: string): Promise<number> {
    const receipt = await this.receipts.latestFor(roomId, userId);
    return receipt ? ((await this.rooms.getEvent(receipt))?.streamOrdering ?? 0) : 0;
  }

  /**
   * What the rules say of one event for the user, as they said when it was first looked
   * at: nothing for their own events, redacted ones, or ones from before they joined.
   */
  private async outcome(stored: StoredEvent, userId: string, rules: PushRuleset, context: PushContext): Promise<PushOutcome | undefined> {
    const event = stored.event;
    if (event.sender === userId || stored.redactedBy !== null || stored.rejected || stored.softFailed || stored.stateSnapshot === null) return undefined;
    const key = `${userId}\u0000${stored.nid}`;
    const known = this.outcomes.get(key);
    if (known !== undefined) return known ?? undefined;
    const memberNid = (await this.rooms.stateBefore(stored))?.get(stateKey('m.room.member', userId));
    const member = memberNid === undefined ? undefined : await this.rooms.getEventByNid(memberNid);
    const outcome = member?.event.content['membership'] === 'join' ? await evaluatePushRules(rules, event as unknown as PushEvent, context) : undefined;
    this.outcomes.set(key, outcome ?? null);
    return outcome;
  }

  /** The room as the conditions see it: the user's display name, the member count and power levels, as they are now. */
  private async contextFor(roomId: string, userId: string): Promise<PushContext> {
    const version = await this.rooms.roomVersion(roomId);
    const member = await this.rooms.currentStateEvent(roomId, 'm.room.member', userId);
    const create = await this.rooms.currentStateEvent(roomId, 'm.room.create', '');
    const powerLevels = await this.rooms.currentStateEvent(roomId, 'm.room.power_levels', '');
    const levels = version
      ? powerLevelsOf(version, (type, key) => (key !== '' ? undefined : type === 'm.room.create' ? create?.event : type === 'm.room.power_levels' ? powerLevels?.event : undefined))
      : undefined;
    const displayName = member?.event.content['displayname'];
    let memberCount: number | undefined;
    return {
      userId,
      displayName: typeof displayName === 'string' ? displayName : undefined,
      memberCount: async () => (memberCount ??= await this.rooms.memberCount(roomId, 'join')),
      // A malformed level grants nothing.
      powerLevel: (user) => {
        try {
          return levels?.user(user) ?? 0;
        } catch {
          return 0;
        }
      },
      notificationLevel: (key) => {
        try {
          return levels?.notification(key) ?? Number.POSITIVE_INFINITY;
        } catch {
          return Number.POSITIVE_INFINITY;
        }
      },
    };
  }
}
