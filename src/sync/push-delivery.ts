import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import type { Database } from '../storage/database.ts';
import type { PushAction } from '../users/push-rules.ts';
import type { Users } from '../users/users.ts';
import { backoffDelay, isRefusal, type BackoffPolicy } from '../util/backoff.ts';
import type { PushNotifications } from './push.ts';

/** A pusher with what delivery needs (`Pushers.forDelivery`). */
type Pusher = Awaited<ReturnType<Users['pushers']['forDelivery']>>[number];

/** How a host reaches push gateways: a POST of JSON, answered with the gateway's JSON (fetch, under Node). */
export type PushGateway = (url: string, body: unknown) => Promise<{ status: number; body: unknown }>;

/** Retries of a failing gateway: a second, doubling to an hour, as Synapse backs off its pushers. */
export const PUSH_BACKOFF: BackoffPolicy = { initialMs: 1000, maxMs: 60 * 60 * 1000, refusedMs: 1000 };
/** A notification its gateway has failed for this long is given up (Synapse: a day). */
const GIVE_UP_AFTER_MS = 24 * 60 * 60 * 1000;

interface OutboxRow {
  id: number;
  user_id: string;
  app_id: string;
  pushkey: string;
  url: string;
  body: string;
  event_id: string;
  failures: number;
  first_failure_ts: number | null;
}

interface Queued {
  userId: string;
  appId: string;
  pushkey: string;
  url: string;
  body: unknown;
  eventId: string;
}

/**
 * Sends notifications to the push gateways of local users' `http` pushers (push gateway
 * API, `POST /_matrix/push/v1/notify`) for the events their push rules say notify. Runs
 * only on hosts given a gateway client (the Node host): a browser tab is closed more often
 * than not, and a page may not reach a gateway across origins.
 *
 * Durable, in two steps. Each stream change's rooms are evaluated in order; what notifies
 * goes into `push_outbox`, one row per event per pusher, in the same write that moves
 * `push_progress` past that change, so a restart neither loses nor repeats an evaluation
 * (events stored while the host was down are evaluated when it starts). Rows are then posted,
 * each pusher's in order; a failed POST stays and is retried with backoff (PUSH_BACKOFF), across
 * restarts too, until its gateway takes it, refuses it (a 4xx), or has failed for a day.
 */
export class PushDelivery {
  /** Per room, the stream position up to which events were looked at. */
  private readonly seenUpTo = new Map<string, number>();
  private chain: Promise<void> = Promise.resolve();
  private draining: Promise<void> | undefined;
  private drainAgain = false;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;

  private constructor(
    private readonly db: Database,
    private readonly rooms: Rooms,
    private readonly users: Users,
    private readonly push: PushNotifications,
    private readonly gateway: PushGateway,
    /** Where delivery starts: events at or before this stream position are never evaluated. */
    private readonly startPosition: number,
    private readonly log: (message: string, error?: unknown) => void,
    private readonly now: () => number,
  ) {}

  /**
   * Starts delivery: from where it stopped (what came since is evaluated, what was queued is
   * sent), or, the first time, from `position` (history is never pushed).
   */
  static async start(options: {
    db: Database;
    rooms: Rooms;
    users: Users;
    push: PushNotifications;
    gateway: PushGateway;
    position: number;
    log: (message: string, error?: unknown) => void;
    now: () => number;
  }): Promise<PushDelivery> {
    const { db, position } = options;
    const saved = (await db.get<{ stream_position: number }>('SELECT stream_position FROM push_progress WHERE id = 0'))?.stream_position;
    if (saved === undefined) await db.transaction((tx) => void tx.run('INSERT INTO push_progress (id, stream_position) VALUES (0, ?)', [position]));
    const start = saved ?? position;
    const delivery = new PushDelivery(db, options.rooms, options.users, options.push, options.gateway, start, options.log, options.now);
    if (start < position) delivery.roomsChanged(await options.rooms.timeline.roomsWithEvents(start, position), position);
    delivery.kick();
    return delivery;
  }

  /** Rooms with new events up to `position`: their new events are evaluated, in order, one change after another. */
  roomsChanged(roomIds: readonly string[], position: number): void {
    if (this.stopped || position <= this.startPosition) return;
    this.chain = this.chain
      .then(async () => {
        const queued: Queued[] = [];
        for (const roomId of roomIds) await this.evaluateRoom(roomId, position, queued);
        await this.db.transaction((tx) => {
          for (const q of queued) {
            tx.run('INSERT INTO push_outbox (user_id, app_id, pushkey, url, body, event_id) VALUES (?, ?, ?, ?, ?, ?)', [q.userId, q.appId, q.pushkey, q.url, JSON.stringify(q.body), q.eventId]);
          }
          tx.run('UPDATE push_progress SET stream_position = MAX(stream_position, ?) WHERE id = 0', [position]);
        });
        if (queued.length > 0) this.kick();
      })
      .catch((error) => this.log(`push: evaluating ${roomIds.join(', ')} failed`, error));
  }

  /** Resolves once everything handed over so far was evaluated, and every notification due was sent or put off (for tests). */
  async idle(): Promise<void> {
    await this.chain;
    while (this.draining) await this.draining;
  }

  stop(): void {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
  }

  private async evaluateRoom(roomId: string, upTo: number, queued: Queued[]): Promise<void> {
    const from = this.seenUpTo.get(roomId) ?? this.startPosition;
    if (upTo <= from) return;
    this.seenUpTo.set(roomId, upTo);
    const recipients: { userId: string; pushers: Pusher[] }[] = [];
    // The members, and those invited (their invite is pushed, as in Synapse).
    for (const userId of [...(await this.rooms.members(roomId)), ...(await this.rooms.members(roomId, 'invite'))]) {
      if (!this.users.isLocal(userId)) continue;
      const pushers = (await this.users.pushers.forDelivery(userId)).filter((p) => p.kind === 'http');
      if (pushers.length > 0) recipients.push({ userId, pushers });
    }
    // Most rooms have no one to push to: their events are not even read.
    if (recipients.length === 0) return;
    const events: StoredEvent[] = [];
    for await (const stored of this.rooms.timeline.streamRange(roomId, from, upTo, 100)) {
      // Rejected and soft-failed events are no part of the room: never pushed.
      if (!stored.rejected && !stored.softFailed && !stored.outlier) events.push(stored);
    }
    events.reverse();
    for (const { userId, pushers } of recipients) {
      const rules = await this.push.rulesOf(userId);
      if (!rules) continue;
      const evaluate = await this.push.evaluatorFor(roomId, userId, rules);
      for (const stored of events) {
        const outcome = await evaluate(stored);
        if (!outcome?.notify) continue;
        const counted = (await this.push.unread(roomId, userId, stored.streamOrdering ?? upTo, rules)).notification_count;
        // The room's counts begin at membership, so they never hold the user's own invite; Synapse
        // counts it in the invite's push, and apps show that number on their badge.
        const ownInvite = stored.event.type === 'm.room.member' && stored.event.state_key === userId && stored.event.content['membership'] === 'invite';
        const unread = ownInvite ? counted + 1 : counted;
        for (const pusher of pushers) queued.push(await this.notification(userId, pusher, stored, outcome.actions, outcome.highlight, unread));
      }
    }
  }

  /** The notify body for one event and one pusher (push gateway API), as the pusher's `format` asks. */
  private async notification(userId: string, pusher: Pusher, stored: StoredEvent, actions: PushAction[], highlight: boolean, unread: number): Promise<Queued> {
    const { url, format, ...data } = pusher.data as { url: string; format?: string } & Record<string, unknown>;
    const event = stored.event;
    const tweaks: Record<string, unknown> = {};
    for (const action of actions) if (typeof action === 'object' && action !== null && 'set_tweak' in action) tweaks[action.set_tweak as string] = 'value' in action ? action.value : true;
    // Always said, true or false, as Synapse's default rules make it say it: gateways need not know the rules.
    tweaks['highlight'] = highlight;
    const notification: Record<string, unknown> = {
      event_id: event.event_id,
      room_id: event.room_id,
      // As Synapse: what rings (a sound, a highlight) or may (an encrypted event) goes at high priority.
      prio: highlight || tweaks['sound'] !== undefined || event.type === 'm.room.encrypted' ? 'high' : 'low',
      counts: { unread },
      devices: [{ app_id: pusher.app_id, pushkey: pusher.pushkey, pushkey_ts: pusher.pushkey_ts, data: format === undefined ? data : { ...data, format }, tweaks }],
    };
    if (format !== 'event_id_only') {
      const state = (type: string, key = '') => this.rooms.currentStateEvent(event.room_id, type, key);
      const senderName = (await state('m.room.member', event.sender))?.event.content['displayname'];
      const roomName = (await state('m.room.name'))?.event.content['name'];
      const alias = (await state('m.room.canonical_alias'))?.event.content['alias'];
      Object.assign(notification, { type: event.type, sender: event.sender, content: event.content });
      if (typeof senderName === 'string') notification['sender_display_name'] = senderName;
      if (typeof roomName === 'string') notification['room_name'] = roomName;
      if (typeof alias === 'string') notification['room_alias'] = alias;
      if (event.type === 'm.room.member') {
        notification['user_is_target'] = event.state_key === userId;
        // Not in the spec's body, but Synapse sends it and Sygnal's pushkins read it to word invites.
        notification['membership'] = event.content['membership'];
      }
    }
    return { userId, appId: pusher.app_id, pushkey: pusher.pushkey, url, body: { notification }, eventId: event.event_id };
  }

  /** Sends what is due, now or once the drain under way ends. */
  private kick(): void {
    if (this.stopped) return;
    if (this.draining) {
      this.drainAgain = true;
      return;
    }
    this.draining = this.drain()
      .catch((error) => this.log('push: sending notifications failed', error))
      .finally(() => {
        this.draining = undefined;
        if (this.drainAgain) {
          this.drainAgain = false;
          this.kick();
        }
      });
  }

  /** Posts each pusher's oldest notification that is due, until none is; then waits for the next retry. */
  private async drain(): Promise<void> {
    for (;;) {
      if (this.stopped) return;
      const now = this.now();
      // Each pusher's oldest row only: a pusher's notifications go in order, and one failing holds back no other pusher.
      const due = await this.db.all<OutboxRow & Record<string, string | number | null>>(
        `SELECT o.* FROM push_outbox o
         WHERE o.id = (SELECT MIN(id) FROM push_outbox p WHERE p.user_id = o.user_id AND p.app_id = o.app_id AND p.pushkey = o.pushkey)
           AND o.next_attempt_ts <= ? ORDER BY o.id LIMIT 20`,
        [now],
      );
      if (due.length === 0) break;
      await Promise.all(due.map((row) => this.send(row)));
    }
    const next = await this.db.get<{ at: number | null }>('SELECT MIN(next_attempt_ts) AS at FROM push_outbox');
    if (next?.at != null && !this.stopped) {
      if (this.retryTimer) clearTimeout(this.retryTimer);
      this.retryTimer = setTimeout(() => this.kick(), Math.max(0, next.at - this.now()));
    }
  }

  private async send(row: OutboxRow): Promise<void> {
    let status: number | undefined;
    let failure: unknown;
    try {
      const answer = await this.gateway(row.url, JSON.parse(row.body));
      status = answer.status;
      if (status >= 200 && status < 300) {
        const rejected = (answer.body as { rejected?: unknown } | undefined)?.rejected;
        await this.db.transaction((tx) => {
          tx.run('DELETE FROM push_outbox WHERE id = ?', [row.id]);
          // The gateway no longer knows this device: the pusher goes, and what was queued for it, as the spec asks.
          if (Array.isArray(rejected) && rejected.includes(row.pushkey)) {
            tx.run('DELETE FROM push_outbox WHERE user_id = ? AND app_id = ? AND pushkey = ?', [row.user_id, row.app_id, row.pushkey]);
          }
        });
        if (Array.isArray(rejected) && rejected.includes(row.pushkey)) await this.users.pushers.remove(row.user_id, row.app_id, row.pushkey);
        return;
      }
      if (isRefusal(status)) {
        this.log(`push: the gateway ${row.url} refused ${row.event_id} (${status})`);
        await this.db.transaction((tx) => void tx.run('DELETE FROM push_outbox WHERE id = ?', [row.id]));
        return;
      }
    } catch (error) {
      failure = error;
    }
    const now = this.now();
    const firstFailure = row.first_failure_ts ?? now;
    if (now - firstFailure >= GIVE_UP_AFTER_MS) {
      this.log(`push: the gateway ${row.url} has failed for a day; giving up on ${row.event_id}`, failure);
      await this.db.transaction((tx) => void tx.run('DELETE FROM push_outbox WHERE id = ?', [row.id]));
      return;
    }
    const failures = row.failures + 1;
    await this.db.transaction((tx) =>
      void tx.run('UPDATE push_outbox SET failures = ?, first_failure_ts = ?, next_attempt_ts = ? WHERE id = ?', [failures, firstFailure, now + backoffDelay(PUSH_BACKOFF, failures, false), row.id]),
    );
  }
}

/** The push gateway client for hosts with a network: fetch, JSON both ways, bounded in time. */
export const fetchPushGateway: PushGateway = async (url, body) => {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(10_000) });
  let answer: unknown;
  try {
    answer = await response.json();
  } catch {
    answer = undefined;
  }
  return { status: response.status, body: answer };
};
