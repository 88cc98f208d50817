import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import type { Database } from '../storage/database.ts';
import { readStreamPosition, type StreamChange } from '../storage/stream.ts';
import type { Users } from '../users/users.ts';
import { EphemeralStream, Presence, Typing } from './ephemeral.ts';
import { EventFormatter } from './format.ts';
import { Notifier } from './notifier.ts';
import { PushNotifications } from './push.ts';
import { Receipts } from './receipts.ts';
import { parseToken, type SyncToken } from './token.ts';
import { PushDelivery, type PushGateway } from './push-delivery.ts';
import { Visibility } from './visibility.ts';
import { RelationsReader } from './relations.ts';
import { EventStream } from './event-stream.ts';
import { Peeks } from './peeks.ts';
import { SyncResponses } from './sync-response.ts';
import type { SyncExtension, SyncRequest, SyncResponse } from './sync-shapes.ts';

export { DEFAULT_TIMELINE_LIMIT, type JoinedRoom, type LeftRoom, type SyncExtension, type SyncRequest, type SyncResponse } from './sync-shapes.ts';

/** /sync, with the notifier that wakes long-polls; /messages and /context are `RoomHistory`'s (history.ts), a component of its own. */
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
  /** The deprecated GET /events. */
  readonly eventStream: EventStream;
  /** The rooms each device peeks into (MSC2753). */
  readonly peeks: Peeks;
  private readonly extensions: SyncExtension[] = [];
  private readonly responses: SyncResponses;
  /** Set on hosts that deliver to push gateways. */
  pushDelivery: PushDelivery | undefined;

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
    this.peeks = new Peeks(db, rooms, notify);
    this.visibility = new Visibility(rooms, (userId) => users.accountData.ignoredUsers(userId), (userId) => users.erasedAt(userId));
    this.formatter = new EventFormatter(rooms, now, this.visibility);
    this.push = new PushNotifications(rooms, users, this.receipts, this.formatter);
    this.relations = new RelationsReader(rooms, this.visibility, this.formatter);
    this.eventStream = new EventStream(rooms, this.visibility, this.formatter, this.notifier, () => this.currentToken(), now);
    this.responses = new SyncResponses({
      rooms, users, now, streamPosition: () => this.streamPosition(), ephemeral: this.ephemeral, typing: this.typing, presence: this.presence,
      receipts: this.receipts, formatter: this.formatter, visibility: this.visibility, push: this.push, peeks: this.peeks, extensions: this.extensions,
    });
  }

  /** Stops what runs on its own: typing timeouts and push delivery. */
  stop(): void {
    this.typing.stop();
    this.pushDelivery?.stop();
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
        const response = await this.responses.build(request, since);
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

  /** The room's timeline between two stream positions, for sliding sync: see {@link SyncResponses.timelineWindow}. */
  timelineWindow(roomId: string, userId: string, from: number, upTo: number, limit: number): Promise<{ events: StoredEvent[]; limited: boolean }> {
    return this.responses.timelineWindow(roomId, userId, from, upTo, limit);
  }

  /** An invite's or a knock's stripped state: see {@link SyncResponses.strippedState}. */
  strippedState(roomId: string, memberEventId: string): Promise<Record<string, unknown>[]> {
    return this.responses.strippedState(roomId, memberEventId);
  }
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
