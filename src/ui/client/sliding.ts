/**
 * Simplified sliding sync (MSC4186) for the page, as Element Web runs it: matrix-js-sdk's `SlidingSync`
 * (the requests) under `SlidingSyncSdk` (rooms, timelines, extensions), started by `startClient({ slidingSync })`.
 * Lists for what the sidebar shows (rooms, direct messages, invites; the homeserver sorts each by recency),
 * grown until they hold every room; one room subscription, the open room's, with all its state and a longer
 * timeline; the extensions (e2ee, to_device, account_data, receipts, typing) are the SDK's.
 */
import type { MatrixClient, Room } from 'matrix-js-sdk';
import { SlidingSync, SlidingSyncEvent, SlidingSyncState, type MSC3575List, type MSC3575RoomData } from 'matrix-js-sdk/lib/sliding-sync.js';

export const SLIDING_SYNC_FEATURE = 'org.matrix.simplified_msc3575';
/** `localStorage[SYNC_KEY] = 'sync'` keeps the page on /sync (what bench/page-client.bench.ts compares against). */
export const SYNC_KEY = 'hearth-sync';

/** The first answer holds this many rooms of each list; later ones grow the lists by `GROW` until all are in. */
const FIRST = 20;
const GROW = 100;
/** The long poll's wait, as Element's. */
const TIMEOUT_MS = 30_000;

/** What the sidebar shows of a room it does not open: its name, avatar, encryption, join rule and this user's membership. */
const LIST_STATE = [
  ['m.room.create', ''], ['m.room.name', ''], ['m.room.avatar', ''], ['m.room.topic', ''], ['m.room.canonical_alias', ''],
  ['m.room.encryption', ''], ['m.room.join_rules', ''], ['m.room.member', '$ME'],
];
const list = (filters: MSC3575List['filters'], extraState: string[][] = []): MSC3575List => ({
  ranges: [[0, FIRST - 1]],
  timeline_limit: 1,
  required_state: [...LIST_STATE, ...extraState],
  filters,
});

/** The lists, by the name the homeserver answers with. A DM is named after its members: all of them come (two, or a few). */
const LISTS: Record<string, MSC3575List> = {
  rooms: list({ is_invite: false, is_dm: false }),
  dms: list({ is_invite: false, is_dm: true }, [['m.room.member', '*']]),
  invites: list({ is_invite: true }),
};
/** The open room: all of its state (the members pane, settings, and every member's devices for encryption) and 50 events. */
const OPEN_ROOM = { required_state: [['*', '*']], timeline_limit: 50 };

/** Whether this page runs sliding sync: the homeserver serves it, and the person (or a bench) did not ask for /sync. */
export async function wantsSlidingSync(client: MatrixClient): Promise<boolean> {
  if (globalThis.localStorage?.getItem(SYNC_KEY) === 'sync') return false;
  return client.doesServerSupportUnstableFeature(SLIDING_SYNC_FEATURE).catch(() => false);
}

export class PageSlidingSync {
  readonly slidingSync: SlidingSync;
  private open: string | undefined;
  /** The open room's subscription has been asked for, and its answer not processed yet (answers since, and whether the room was in one). */
  private awaiting: { answers: number; seen: boolean } | undefined;

  /** `onOpened(roomId)`: the open room's subscription has come, with its longer timeline. Before `startClient`. */
  constructor(private readonly client: MatrixClient, onOpened: (roomId: string) => void) {
    this.slidingSync = new SlidingSync(client.baseUrl, new Map(Object.entries(LISTS)), OPEN_ROOM, client, TIMEOUT_MS);
    // Registered before SlidingSyncSdk's own listener (made by startClient), so it runs first.
    this.slidingSync.on(SlidingSyncEvent.RoomData, (roomId, data) => {
      this.closeGap(roomId, data);
      this.keepOwnCount(roomId, data);
      if (this.awaiting && roomId === this.open) this.awaiting.seen = true;
    });
    this.slidingSync.on(SlidingSyncEvent.Lifecycle, (state) => {
      if (state !== SlidingSyncState.Complete) return;
      this.grow();
      const awaiting = this.awaiting;
      // The room's data, or (should the homeserver have had nothing to resend) the second answer since.
      if (!awaiting || !this.open || !(awaiting.seen || ++awaiting.answers >= 2)) return;
      this.awaiting = undefined;
      onOpened(this.open);
    });
  }

  /** Subscribes to `roomId` (and no other room). True once its subscription's answer is in. */
  subscribe(roomId: string): boolean {
    if (this.open === roomId) return !this.awaiting;
    this.open = roomId;
    this.awaiting = { answers: 0, seen: false };
    this.slidingSync.modifyRoomSubscriptions(new Set([roomId]));
    return false;
  }

  /** Each list grows until it covers every room the homeserver counts in it: the sidebar lists them all. */
  private grow(): void {
    for (const key of Object.keys(LISTS)) {
      const count = this.slidingSync.getListData(key)?.joinedCount ?? 0;
      const end = this.slidingSync.getListParams(key)?.ranges?.[0]?.[1] ?? 0;
      if (count > end + 1) this.slidingSync.setListRanges(key, [[0, Math.min(count - 1, end + GROW)]]);
    }
  }

  /**
   * In an encrypted room the SDK counts unread messages itself, as it decrypts them (`fixNotificationCountOnDecryption`);
   * /sync's SyncApi then takes the homeserver's count only when it is 0, but SlidingSyncSdk 37 takes it always,
   * and each decrypted message is counted twice (3 messages: 4 unread, measured). The homeserver is right to
   * count them (`.m.rule.encrypted`): its count is left out here as SyncApi leaves it, for the SDK to keep its own.
   */
  private keepOwnCount(roomId: string, data: MSC3575RoomData): void {
    if (!data.notification_count) return;
    const encrypted = this.client.getRoom(roomId)?.hasEncryptionStateEvent() || data.required_state?.some((e) => e.type === 'm.room.encryption');
    if (encrypted) delete data.notification_count;
  }

  /**
   * matrix-js-sdk 37's SlidingSyncSdk takes a `limited` timeline that does not join the one it holds as if it did:
   * the newest events after the old ones, and the missing ones (when a subscription's longer window brings them)
   * put before the oldest. A room that got more messages than a list's `timeline_limit` while it was not open
   * would show them out of order. And the events it puts before the oldest (a room opened: its subscription's
   * window is longer than its list's) go through `addEventsToTimeline`, which sorts nothing into threads: a thread
   * reply is dropped ("Ignoring event … belongs to thread"), its root shows no summary, and an edit's bundled
   * replacement is never aggregated (issue 38). As /sync's SyncApi does for a limited timeline, the live timeline
   * starts afresh here from the answer's `prev_batch` (its state kept) unless the answer only adds newer events,
   * so that the SDK takes them all as live events (`addLiveEvents`, which puts thread replies in their threads).
   */
  private closeGap(roomId: string, data: MSC3575RoomData): void {
    if (!data.limited || data.initial || !data.timeline?.length) return;
    const room: Room | null = this.client.getRoom(roomId);
    const held = room?.getLiveTimeline().getEvents().map((e) => e.getId());
    if (!room || !held?.length) return;
    if (onlyNewer(held, data.timeline.map((e) => e.event_id))) return;
    room.resetLiveTimeline(data.prev_batch ?? null, null);
  }
}

/** Whether `received` is events the room holds followed by newer ones only: SlidingSyncSdk appends those as live events. */
export function onlyNewer(held: readonly (string | undefined)[], received: readonly string[]): boolean {
  return held.includes(received[0]) && joins(held, received);
}

/**
 * Whether SlidingSyncSdk puts `received` in order around `held`: the events it already holds are one run in
 * `received`, those before that run are older than all it holds, and those after it newer.
 */
export function joins(held: readonly (string | undefined)[], received: readonly string[]): boolean {
  const known = received.map((id) => held.includes(id));
  const first = known.indexOf(true);
  if (first === -1) return false;
  const last = known.lastIndexOf(true);
  if (known.slice(first, last + 1).includes(false)) return false;
  if (first > 0 && received[first] !== held[0]) return false;
  if (last < received.length - 1 && received[last] !== held.at(-1)) return false;
  return true;
}
