import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import type { PushAction } from '../users/push-rules.ts';
import type { Users } from '../users/users.ts';
import type { PushNotifications } from './push.ts';

/** A pusher with what delivery needs (`Pushers.forDelivery`). */
type Pusher = Awaited<ReturnType<Users['pushers']['forDelivery']>>[number];

/** How a host reaches push gateways: a POST of JSON, answered with the gateway's JSON (fetch, under Node). */
export type PushGateway = (url: string, body: unknown) => Promise<{ status: number; body: unknown }>;

/** Attempts per notification: the first and two retries, a second and then four apart. */
const ATTEMPTS = 3;
const RETRY_BASE_MS = 1000;

/**
 * Sends notifications to the push gateways of local users' `http` pushers (push gateway
 * API, `POST /_matrix/push/v1/notify`) for the events their push rules say notify. Runs
 * only on hosts given a gateway client (the Node host): a browser tab is closed more often
 * than not, and a page may not reach a gateway across origins. Best effort, as in other
 * servers: events stored while the host was down are not pushed after it restarts, and a
 * gateway that keeps failing is given up on after three tries.
 */
export class PushDelivery {
  /** Per room, the stream position up to which events were looked at. */
  private readonly seenUpTo = new Map<string, number>();
  private chain: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly rooms: Rooms,
    private readonly users: Users,
    private readonly push: PushNotifications,
    private readonly gateway: PushGateway,
    /** Where delivery starts: events at or before this stream position are never pushed. */
    private readonly startPosition: number,
    private readonly log: (message: string, error?: unknown) => void,
    private readonly wait: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  ) {}

  /** Rooms with new events up to `position`: their new events are looked at, in order, one room after another. */
  roomsChanged(roomIds: readonly string[], position: number): void {
    if (this.stopped || position <= this.startPosition) return;
    for (const roomId of roomIds) {
      this.chain = this.chain.then(() => this.deliverRoom(roomId, position)).catch((error) => this.log(`push: delivery for ${roomId} failed`, error));
    }
  }

  /** Resolves once everything handed over so far has been delivered or given up on (for tests). */
  idle(): Promise<void> {
    return this.chain;
  }

  stop(): void {
    this.stopped = true;
  }

  private async deliverRoom(roomId: string, upTo: number): Promise<void> {
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
    for await (const stored of this.rooms.timeline.streamRange(roomId, from, upTo, 100)) events.push(stored);
    events.reverse();
    for (const { userId, pushers } of recipients) {
      const rules = await this.push.rulesOf(userId);
      if (!rules) continue;
      const evaluate = await this.push.evaluatorFor(roomId, userId, rules);
      for (const stored of events) {
        if (this.stopped) return;
        const outcome = await evaluate(stored);
        if (!outcome?.notify) continue;
        const unread = (await this.push.unread(roomId, userId, stored.streamOrdering ?? upTo, rules)).notification_count;
        for (const pusher of pushers) await this.notify(userId, pusher, stored, outcome.actions, outcome.highlight, unread);
      }
    }
  }

  private async notify(
    userId: string,
    pusher: Pusher,
    stored: StoredEvent,
    actions: PushAction[],
    highlight: boolean,
    unread: number,
  ): Promise<void> {
    const { url, format, ...data } = pusher.data as { url: string; format?: string } & Record<string, unknown>;
    const event = stored.event;
    const tweaks: Record<string, unknown> = {};
    for (const action of actions) if (typeof action === 'object' && action !== null && 'set_tweak' in action) tweaks[action.set_tweak as string] = 'value' in action ? action.value : true;
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
      if (event.type === 'm.room.member') notification['user_is_target'] = event.state_key === userId;
    }
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      try {
        const answer = await this.gateway(url, { notification });
        if (answer.status >= 200 && answer.status < 300) {
          const rejected = (answer.body as { rejected?: unknown } | undefined)?.rejected;
          // The gateway no longer knows this device: the pusher goes, as the spec asks.
          if (Array.isArray(rejected) && rejected.includes(pusher.pushkey)) await this.users.pushers.remove(userId, pusher.app_id, pusher.pushkey);
          return;
        }
        if (answer.status >= 400 && answer.status < 500 && answer.status !== 429) {
          this.log(`push: the gateway ${url} refused a notification (${answer.status})`);
          return;
        }
        throw new Error(`HTTP ${answer.status}`);
      } catch (error) {
        if (attempt === ATTEMPTS) return this.log(`push: could not reach the gateway ${url}; giving up on ${event.event_id}`, error);
        await this.wait(RETRY_BASE_MS * 4 ** (attempt - 1));
      }
    }
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
