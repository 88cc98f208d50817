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
/** How long a typing notice from another server lasts: the EDU carries no timeout, and its server renews it. */
export const REMOTE_TYPING_TIMEOUT_MS = 60_000;
/** How often a local user's ongoing typing is announced again to other servers, well inside their timeout. */
export const TYPING_RENEW_MS = 30_000;

/** A local user started or stopped typing (expiry included): what other servers in the room must hear. */
export type TypingListener = (roomId: string, userId: string, typing: boolean) => void;

interface TypingEntry {
  until: number;
  /** A user of this server: their changes are announced to other servers. */
  local: boolean;
  /** When other servers last heard this user is typing. */
  announcedAt: number;
}

export class Typing {
  private readonly rooms = new Map<string, { users: Map<string, TypingEntry>; changed: number }>();
  private readonly listeners = new Set<TypingListener>();
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly stream: EphemeralStream,
    private readonly notify: StreamNotify,
    private readonly now: () => number,
  ) {}

  /** Listens to local users' typing changes; returns the unsubscribe. */
  onLocalChange(listener: TypingListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A local user types or stops (client-server PUT /typing). */
  set(roomId: string, userId: string, typing: boolean, timeoutMs = 30_000): void {
    const now = this.now();
    const previous = this.rooms.get(roomId)?.users.get(userId);
    // A client renews typing every few seconds; other servers need to hear it only now and then.
    const announce = typing ? !previous || now - previous.announcedAt >= TYPING_RENEW_MS : previous !== undefined;
    const until = now + Math.min(timeoutMs, MAX_TYPING_TIMEOUT_MS);
    this.put(roomId, userId, typing ? { until, local: true, announcedAt: announce ? now : previous!.announcedAt } : undefined);
    if (announce) this.announce(roomId, userId, typing);
  }

  /** Typing of another server's user (an m.typing EDU). */
  setRemote(roomId: string, userId: string, typing: boolean): void {
    this.put(roomId, userId, typing ? { until: this.now() + REMOTE_TYPING_TIMEOUT_MS, local: false, announcedAt: 0 } : undefined);
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

  private put(roomId: string, userId: string, entry: TypingEntry | undefined): void {
    const room = this.rooms.get(roomId) ?? { users: new Map<string, TypingEntry>(), changed: 0 };
    this.rooms.set(roomId, room);
    const was = room.users.has(userId);
    if (entry) room.users.set(userId, entry);
    else room.users.delete(userId);
    if (was !== (entry !== undefined)) this.changed(roomId, room);
    this.schedule();
  }

  private changed(roomId: string, room: { changed: number }): void {
    room.changed = this.stream.advance();
    this.notify({ position: 0, roomIds: [roomId] });
  }

  private announce(roomId: string, userId: string, typing: boolean): void {
    for (const listener of this.listeners) listener(roomId, userId, typing);
  }

  private expire(): void {
    const now = this.now();
    for (const [roomId, room] of this.rooms) {
      let removed = false;
      for (const [userId, entry] of room.users) {
        if (entry.until > now) continue;
        room.users.delete(userId);
        removed = true;
        if (entry.local) this.announce(roomId, userId, false);
      }
      if (removed) this.changed(roomId, room);
    }
  }

  /** Expiry must wake long-polls, so it runs on a timer, not only when read. */
  private schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    let next = Infinity;
    for (const room of this.rooms.values()) for (const entry of room.users.values()) next = Math.min(next, entry.until);
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

/** A local user's presence changed: what other servers sharing a room must hear. */
export type PresenceListener = (userId: string, status: PresenceStatus) => void;

/** Basic presence, kept in memory: everyone starts offline after a restart. */
export class Presence {
  private readonly users = new Map<string, PresenceStatus>();
  private readonly listeners = new Set<PresenceListener>();

  constructor(
    private readonly stream: EphemeralStream,
    private readonly notify: StreamNotify,
    private readonly now: () => number,
  ) {}

  /** Listens to local users' presence changes (not mere activity); returns the unsubscribe. */
  onLocalChange(listener: PresenceListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A local user's presence (client-server PUT /presence, or /sync's set_presence). */
  set(userId: string, presence: PresenceState, statusMsg?: string | null): void {
    const status = this.update(userId, presence, statusMsg, this.now());
    if (status) for (const listener of this.listeners) listener(userId, status);
  }

  /** Presence of another server's user (an m.presence EDU); absent status_msg clears it. */
  setRemote(userId: string, presence: PresenceState, statusMsg: string | undefined, lastActiveAgo: number): void {
    this.update(userId, presence, statusMsg ?? null, this.now() - Math.max(0, lastActiveAgo));
  }

  /** Stores a status; returns it when it changed (then long-polls wake). */
  private update(userId: string, presence: PresenceState, statusMsg: string | null | undefined, lastActiveTs: number): PresenceStatus | undefined {
    const previous = this.users.get(userId);
    const status: PresenceStatus = { presence, last_active_ts: lastActiveTs, changed: previous?.changed ?? 0 };
    const msg = statusMsg === undefined ? previous?.status_msg : statusMsg ?? undefined;
    if (msg !== undefined) status.status_msg = msg;
    const changed = !previous || previous.presence !== presence || previous.status_msg !== status.status_msg;
    if (changed) status.changed = this.stream.advance();
    this.users.set(userId, status);
    if (!changed) return undefined;
    this.notify({ position: 0, userIds: [userId] });
    return status;
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
