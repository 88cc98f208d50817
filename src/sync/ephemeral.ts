import type { StreamNotify } from '../storage/stream.ts';

/**
 * In-memory streams that need no durability: typing and presence. Their
 * position starts at the boot time in ms and counts up, so tokens issued before a
 * restart stay ordered before those issued after it.
 */
export class EphemeralStream {
  private position: number;
  constructor(now: () => number) {
    this.position = now();
  }
  get current(): number {
    return this.position;
  }
  advance(): number {
    return ++this.position;
  }
}

const MAX_TYPING_TIMEOUT_MS = 120_000;

export class Typing {
  private readonly rooms = new Map<string, { users: Map<string, number>; changed: number }>();
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly stream: EphemeralStream,
    private readonly notify: StreamNotify,
    private readonly now: () => number,
  ) {}

  set(roomId: string, userId: string, typing: boolean, timeoutMs = 30_000): void {
    const room = this.rooms.get(roomId) ?? { users: new Map<string, number>(), changed: 0 };
    this.rooms.set(roomId, room);
    const was = room.users.has(userId);
    if (typing) room.users.set(userId, this.now() + Math.min(timeoutMs, MAX_TYPING_TIMEOUT_MS));
    else room.users.delete(userId);
    if (was !== typing) this.changed(roomId, room);
    this.schedule();
  }

  /** Typing users in a room, and the ephemeral position it last changed at. */
  get(roomId: string): { userIds: string[]; changed: number } {
    this.expire();
    const room = this.rooms.get(roomId);
    return { userIds: room ? [...room.users.keys()] : [], changed: room?.changed ?? 0 };
  }

  /** Rooms whose typing changed after `since`. */
  changedSince(since: number): string[] {
    this.expire();
    return [...this.rooms].filter(([, room]) => room.changed > since).map(([roomId]) => roomId);
  }

  private changed(roomId: string, room: { changed: number }): void {
    room.changed = this.stream.advance();
    this.notify({ position: 0, roomIds: [roomId] });
  }

  private expire(): void {
    const now = this.now();
    for (const [roomId, room] of this.rooms) {
      let removed = false;
      for (const [userId, until] of room.users) {
        if (until <= now) {
          room.users.delete(userId);
          removed = true;
        }
      }
      if (removed) this.changed(roomId, room);
    }
  }

  /** Expiry must wake long-polls, so it runs on a timer, not only when read. */
  private schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    let next = Infinity;
    for (const room of this.rooms.values()) for (const until of room.users.values()) next = Math.min(next, until);
    if (next === Infinity) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.expire();
      this.schedule();
    }, Math.max(0, next - this.now()) + 5);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
  }
}

export type PresenceState = 'online' | 'offline' | 'unavailable';

export interface PresenceStatus {
  presence: PresenceState;
  status_msg?: string;
  last_active_ts: number;
  changed: number;
}

/** Basic presence, kept in memory: everyone starts offline after a restart. */
export class Presence {
  private readonly users = new Map<string, PresenceStatus>();

  constructor(
    private readonly stream: EphemeralStream,
    private readonly notify: StreamNotify,
    private readonly now: () => number,
  ) {}

  set(userId: string, presence: PresenceState, statusMsg?: string | null): void {
    const previous = this.users.get(userId);
    const status: PresenceStatus = { presence, last_active_ts: this.now(), changed: previous?.changed ?? 0 };
    const msg = statusMsg === undefined ? previous?.status_msg : statusMsg ?? undefined;
    if (msg !== undefined) status.status_msg = msg;
    if (!previous || previous.presence !== presence || previous.status_msg !== status.status_msg) {
      status.changed = this.stream.advance();
      this.users.set(userId, status);
      this.notify({ position: 0, userIds: [userId] });
    } else {
      this.users.set(userId, status);
    }
  }

  /** Marks a user active (a /sync or a send) without waking anyone unless they were offline. */
  touch(userId: string, presence: PresenceState = 'online'): void {
    const previous = this.users.get(userId);
    if (!previous || previous.presence !== presence) this.set(userId, presence);
    else previous.last_active_ts = this.now();
  }

  get(userId: string): PresenceStatus {
    return this.users.get(userId) ?? { presence: 'offline', last_active_ts: 0, changed: 0 };
  }

  /** Users whose presence changed after `since`. */
  changedSince(since: number): [string, PresenceStatus][] {
    return [...this.users].filter(([, status]) => status.changed > since);
  }
}
