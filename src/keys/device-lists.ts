import { canonicalJson } from '../crypto/canonical-json.ts';
import { serverNameOf } from '../events/identifiers.ts';
import type { Database, WriteTransaction } from '../storage/database.ts';
import { backoffDelay, isRefusal, type BackoffPolicy } from '../util/backoff.ts';
import { KeyedLock } from '../util/keyed-lock.ts';
import type { CrossSigningKey, DeviceKeys } from './types.ts';

/** A remote user's device list as we hold it: what their server last told us. */
export interface RemoteDeviceList {
  streamId: number;
  /** We may have missed updates: resync before trusting it. */
  stale: boolean;
  devices: Record<string, { keys?: DeviceKeys; device_display_name?: string }>;
  master_key?: CrossSigningKey;
  self_signing_key?: CrossSigningKey;
}

/** Asks a remote server for a user's whole device list (federation's client provides it). */
export interface DeviceListSource {
  /** `signal` aborts the request when the list's caller stops waiting for it. */
  userDevices(server: string, userId: string, signal?: AbortSignal): Promise<Record<string, unknown>>;
}

/**
 * Short: a peer that failed is tried again after 2 s, doubling up to a minute, and at once when
 * it reconnects. A refusal waits no longer than a failure: what a server refuses about one user
 * fails that user alone (below), and a server that refuses us outright is as likely to be back.
 */
export const DEFAULT_DEVICE_LIST_BACKOFF: BackoffPolicy = { initialMs: 2_000, refusedMs: 2_000, maxMs: 60_000 };

export interface RemoteDeviceListsOptions {
  db: Database;
  isLocal(userId: string): boolean;
  /** Remote users who share a room with a local user (whose lists we keep). */
  remoteUsersSharingRooms(server?: string): Promise<string[]>;
  /** Whether a remote user shares a room with a local user. */
  sharesRoom(userId: string): Promise<boolean>;
  /** Records a key change for a user inside the write; returns its stream position. */
  recordChange(tx: WriteTransaction, userId: string): number;
  /** Wakes those who should hear of a user's key change, once it is durable. */
  announce(position: number, userId: string): Promise<void>;
  now: () => number;
  log: (message: string, error?: unknown) => void;
  /** Where other servers' device lists are asked for (federation's client); none: a homeserver that does not federate. */
  source?: DeviceListSource;
  /** How long one /user/devices request may take. */
  requestTimeoutMs?: number;
  backoff?: BackoffPolicy;
}

/** An m.device_list_update EDU's content. */
export interface DeviceListUpdateEdu {
  user_id: string;
  device_id: string;
  stream_id: number;
  prev_id?: number[];
  deleted?: boolean;
  device_display_name?: string;
  keys?: DeviceKeys;
}

interface ServerQueue {
  /** Users waiting for a resync, in order. */
  waiting: Set<string>;
  /** Callers waiting on a user's resync. */
  waiters: Map<string, { resolve: () => void; reject: (error: unknown) => void }[]>;
  running: boolean;
  failures: number;
  retryAt: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** A server refused or failed: the user's cached list stays, marked stale. */
export class DeviceListResyncError extends Error {
  override name = 'DeviceListResyncError';
  /** The server answered for this user alone (it knows no such user, or refused the request as bad): the rest of its users go on. */
  userOnly = false;
  constructor(readonly server: string, message: string, readonly errcode = 'M_UNKNOWN') {
    super(message);
  }
}

/** Answers about one user rather than the server: it does not know them (404), or the request for them is bad (400). */
const USER_ONLY_STATUSES = new Set([400, 404]);

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The device lists of users on other servers, and the updater that keeps them
 * current (server-server §Device Management). An m.device_list_update whose prev_id
 * we hold is applied; any other marks the list stale and resyncs it through
 * /user/devices, which replaces it whole. Per server at most one request is in
 * flight, servers proceed in parallel, a server that failed backs off (briefly; at
 * once cleared when it reconnects), and a resync or an update that changes nothing
 * emits nothing. Stale marks are stored, so they survive a restart.
 *
 * Every read-modify-write of one user's list runs under that user's lock, so an
 * EDU and a resync for the same user never race.
 */
export class RemoteDeviceLists {
  private readonly servers = new Map<string, ServerQueue>();
  /** Every read-modify-write of one user's list runs under that user's lock. */
  private readonly userLock = new KeyedLock();
  private stopped = false;

  constructor(private readonly options: RemoteDeviceListsOptions) {}

  private get backoff(): BackoffPolicy {
    return this.options.backoff ?? DEFAULT_DEVICE_LIST_BACKOFF;
  }

  async get(userId: string): Promise<RemoteDeviceList | undefined> {
    const row = await this.options.db.get<{ stream_id: number; stale: number; list_json: string }>(
      'SELECT stream_id, stale, list_json FROM remote_device_lists WHERE user_id = ?', [userId],
    );
    if (!row) return undefined;
    return { ...(JSON.parse(row.list_json) as Omit<RemoteDeviceList, 'streamId' | 'stale'>), streamId: row.stream_id, stale: row.stale === 1 };
  }

  /** Resyncs the lists left stale before a restart, of users who share a room with ours (the rest wait to be asked for). */
  async start(): Promise<void> {
    const rows = await this.options.db.all<{ user_id: string }>('SELECT user_id FROM remote_device_lists WHERE stale = 1');
    const sharing = new Set(await this.options.remoteUsersSharingRooms());
    for (const row of rows) if (sharing.has(row.user_id)) this.schedule(row.user_id).catch(() => undefined);
  }

  stop(): void {
    this.stopped = true;
    for (const queue of this.servers.values()) if (queue.timer) clearTimeout(queue.timer);
  }

  /**
   * A peer connected or came back: clear its backoff and resync the device lists of
   * all its users who share a room with ours, so encryption works at once.
   */
  async peerConnected(server: string): Promise<void> {
    const queue = this.queue(server);
    queue.failures = 0;
    queue.retryAt = 0;
    if (queue.timer) clearTimeout(queue.timer);
    queue.timer = undefined;
    for (const userId of await this.options.remoteUsersSharingRooms(server)) this.schedule(userId).catch(() => undefined);
    this.run(server);
  }

  /**
   * Makes sure the user's list is current: resyncs it when stale or never synced,
   * waiting at most `timeoutMs`. Rejects (with the cached list left as it was) when
   * the server fails or is too slow.
   */
  async ensureFresh(userId: string, timeoutMs: number): Promise<void> {
    const list = await this.get(userId);
    if (list && !list.stale) return;
    await withTimeout(this.schedule(userId), timeoutMs, serverTimedOut(serverNameOf(userId), timeoutMs));
  }

  /**
   * Applies an m.device_list_update from `origin`. Dropped when the user is not of that server,
   * or shares no room with ours (as Synapse drops it): their list is stale already (unshared),
   * and is resynced when someone asks, so an update must not make us fetch lists for strangers.
   */
  async receiveUpdate(origin: string, update: DeviceListUpdateEdu): Promise<void> {
    const userId = update.user_id;
    if (serverNameOf(userId) !== origin || this.options.isLocal(userId) || !(await this.options.sharesRoom(userId))) return;
    const resync = await this.userLock.run(userId, async () => {
      const list = await this.get(userId);
      if (list && update.stream_id <= list.streamId) {
        // Seen already, by the spec's numbering; but a deletion of a device we still serve is
        // worth a resync whatever its number: Dendrite 0.13.8 numbers a deletion after the
        // highest number left once the device's own rows are gone, which may be one we have seen.
        const deletesServed = update.deleted === true && list.devices[update.device_id] !== undefined && isServedDevice(list.devices[update.device_id]!);
        if (!deletesServed) return false;
        await this.markStale(userId, list);
        return true;
      }
      const prev = update.prev_id ?? [];
      // We can apply it only on top of the list it follows; otherwise we missed something.
      const follows = list !== undefined && !list.stale && prev.length > 0 && prev.every((id) => id <= list.streamId) && prev.includes(list.streamId);
      if (!follows) {
        await this.markStale(userId, list);
        return true;
      }
      const devices = { ...list.devices };
      if (update.deleted) delete devices[update.device_id];
      else {
        const keys = deviceKeysOf(userId, update.device_id, update.keys) ?? devices[update.device_id]?.keys;
        devices[update.device_id] = {
          ...(keys ? { keys } : {}),
          ...(typeof update.device_display_name === 'string' ? { device_display_name: update.device_display_name } : {}),
        };
      }
      await this.store(userId, { ...list, devices, streamId: update.stream_id, stale: false }, list);
      return false;
    });
    if (resync) this.schedule(userId).catch(() => undefined);
  }

  /** Applies an m.signing_key_update from `origin`: the user's new master and self-signing keys. */
  async receiveSigningKeyUpdate(origin: string, content: Record<string, unknown>): Promise<void> {
    const userId = content['user_id'];
    if (typeof userId !== 'string' || serverNameOf(userId) !== origin || this.options.isLocal(userId)) return;
    const resync = await this.userLock.run(userId, async () => {
      const list = await this.get(userId);
      if (!list) return true; // we never synced them: take the whole list
      const next = { ...list };
      for (const type of ['master_key', 'self_signing_key'] as const) {
        const key = content[type];
        if (isObject(key) && key['user_id'] === userId) next[type] = key as CrossSigningKey;
      }
      await this.store(userId, next, list);
      return false;
    });
    if (resync) this.schedule(userId).catch(() => undefined);
  }

  private async markStale(userId: string, list: RemoteDeviceList | undefined): Promise<void> {
    if (list?.stale) return;
    await this.options.db.transaction((tx) => {
      if (list) tx.run('UPDATE remote_device_lists SET stale = 1 WHERE user_id = ?', [userId]);
      else tx.run("INSERT INTO remote_device_lists (user_id, stream_id, stale, list_json) VALUES (?, 0, 1, '{\"devices\":{}}')", [userId]);
    });
  }

  /** Stores a user's list; a key change is recorded only when what /keys/query serves of it differs. */
  private async store(userId: string, next: RemoteDeviceList, previous: RemoteDeviceList | undefined): Promise<void> {
    const { streamId, stale, ...content } = next;
    const json = canonicalJson(content as never);
    const changed = previous === undefined || canonicalJson(served(previous) as never) !== canonicalJson(served(next) as never);
    const position = await this.options.db.transaction((tx) => {
      tx.run(
        `INSERT INTO remote_device_lists (user_id, stream_id, stale, list_json) VALUES (?, ?, ?, ?)
         ON CONFLICT (user_id) DO UPDATE SET stream_id = excluded.stream_id, stale = excluded.stale, list_json = excluded.list_json`,
        [userId, streamId, stale ? 1 : 0, json],
      );
      return changed ? this.options.recordChange(tx, userId) : undefined;
    });
    if (position !== undefined) await this.options.announce(position, userId);
  }

  /** Queues a resync of the user on their server's queue; resolves once it is done. */
  private schedule(userId: string): Promise<void> {
    const server = serverNameOf(userId);
    const queue = this.queue(server);
    const done = new Promise<void>((resolve, reject) => {
      const list = queue.waiters.get(userId) ?? [];
      list.push({ resolve, reject });
      queue.waiters.set(userId, list);
    });
    queue.waiting.add(userId);
    if (queue.retryAt > this.options.now()) this.settle(queue, userId, new DeviceListResyncError(server, `${server} failed recently; retrying later`));
    this.run(server);
    return done;
  }

  private queue(server: string): ServerQueue {
    let queue = this.servers.get(server);
    if (!queue) {
      queue = { waiting: new Set(), waiters: new Map(), running: false, failures: 0, retryAt: 0, timer: undefined };
      this.servers.set(server, queue);
    }
    return queue;
  }

  private settle(queue: ServerQueue, userId: string, error?: unknown): void {
    const waiters = queue.waiters.get(userId) ?? [];
    queue.waiters.delete(userId);
    for (const w of waiters) error === undefined ? w.resolve() : w.reject(error);
  }

  /** One request in flight per server, users one after another. */
  private run(server: string): void {
    const queue = this.queue(server);
    if (queue.running || this.stopped || queue.retryAt > this.options.now() || queue.waiting.size === 0) return;
    queue.running = true;
    void (async () => {
      while (queue.waiting.size > 0 && !this.stopped) {
        const userId = queue.waiting.values().next().value as string;
        queue.waiting.delete(userId);
        // This request answers those waiting now. Who asks while it is in flight may need a
        // change it was sent too early to see, and waits for the next (schedule queued it).
        const waiters = queue.waiters.get(userId) ?? [];
        queue.waiters.delete(userId);
        try {
          await this.resyncNow(server, userId);
          queue.failures = 0;
          for (const w of waiters) w.resolve();
        } catch (error) {
          for (const w of waiters) w.reject(error);
          if (error instanceof DeviceListResyncError && error.userOnly) continue;
          // The server failed: back off, keep this user and the rest waiting (they stay stale)
          // for the retry when the backoff ends.
          queue.waiting.add(userId);
          this.backOff(server, queue, error);
          for (const waiting of queue.waiting) this.settle(queue, waiting, error);
          break;
        }
      }
      queue.running = false;
    })();
  }

  private backOff(server: string, queue: ServerQueue, error: unknown): void {
    queue.failures++;
    const status = (error as { status?: unknown }).status;
    const retryAfter = (error as { retryAfterMs?: unknown }).retryAfterMs;
    const wait = backoffDelay(this.backoff, queue.failures, isRefusal(typeof status === 'number' ? status : undefined), typeof retryAfter === 'number' ? retryAfter : undefined);
    queue.retryAt = this.options.now() + wait;
    if (queue.timer) clearTimeout(queue.timer);
    queue.timer = setTimeout(() => {
      queue.timer = undefined;
      queue.retryAt = 0;
      this.run(server);
    }, wait);
  }

  /** Fetches the whole list from the user's server and stores it in place of ours. */
  private async resyncNow(server: string, userId: string): Promise<void> {
    if (!this.options.source) throw new DeviceListResyncError(server, 'this homeserver does not federate');
    const askedAt = (await this.get(userId))?.streamId;
    let answer: Record<string, unknown>;
    try {
      const ms = this.options.requestTimeoutMs ?? 10_000;
      // Giving up also ends the request, so one per server is ever in flight.
      const abort = new AbortController();
      answer = await withTimeout(this.options.source.userDevices(server, userId, abort.signal), ms, () => (abort.abort(), serverTimedOut(server, ms)()));
    } catch (error) {
      await this.userLock.run(userId, async () => this.markStale(userId, await this.get(userId)));
      const status = (error as { status?: unknown }).status;
      const errcode = (error as { errcode?: unknown }).errcode;
      const failure = status === 404 || errcode === 'M_NOT_FOUND'
        ? new DeviceListResyncError(server, `${server} knows no ${userId}`, 'M_NOT_FOUND')
        : Object.assign(new DeviceListResyncError(server, error instanceof Error ? error.message : String(error), typeof errcode === 'string' ? errcode : 'M_UNKNOWN'), {
          status, retryAfterMs: (error as { retryAfterMs?: unknown }).retryAfterMs,
        });
      failure.userOnly = typeof status === 'number' && USER_ONLY_STATUSES.has(status);
      throw failure;
    }
    const next = parseUserDevices(userId, answer);
    // Of a user who shares no room with ours, no updates will come: the list is good for this answer only.
    // (A list at stream position 0 could not be told from "never synced", so it stays fresh.)
    next.stale = next.streamId > 0 && !(await this.options.sharesRoom(userId));
    await this.userLock.run(userId, async () => {
      const current = await this.get(userId);
      // Updates applied while the request was in flight are newer than its answer: keep them. With
      // none, the answer is the newest word even when its stream ID is below ours (Dendrite's
      // go back when the device numbered last is deleted).
      if (current && current.streamId !== askedAt && current.streamId > next.streamId) return;
      await this.store(userId, next, current);
    });
  }
}

/**
 * A device's keys as its server gave them, kept whatever their shape: keys that are empty,
 * partial or oddly nested are still the server's word, and the clients that fetch them check
 * them (as they do Synapse's, which keeps them the same way). Only keys that name another user
 * or device, or are not an object at all, are no keys of this device's.
 */
function deviceKeysOf(userId: string, deviceId: string, keys: unknown): DeviceKeys | undefined {
  if (!isObject(keys)) return undefined;
  if (('user_id' in keys && keys['user_id'] !== userId) || ('device_id' in keys && keys['device_id'] !== deviceId)) return undefined;
  return keys as DeviceKeys;
}

/** Whether /keys/query lists a device: it has keys, as Synapse decides (an empty object is none to encrypt to). */
export const isServedDevice = (device: RemoteDeviceList['devices'][string]): device is { keys: DeviceKeys; device_display_name?: string } =>
  device.keys !== undefined && Object.keys(device.keys).length > 0;

/** What clients are given of a list: the devices it serves (isServedDevice), and the cross-signing keys. */
function served(list: RemoteDeviceList): Omit<RemoteDeviceList, 'streamId' | 'stale'> {
  const { streamId: _s, stale: _t, devices, ...keys } = list;
  return { ...keys, devices: Object.fromEntries(Object.entries(devices).filter(([, device]) => isServedDevice(device))) };
}

/** What a server may tell us of its user: their devices, each itself, and their own cross-signing keys. */
function parseUserDevices(userId: string, answer: Record<string, unknown>): RemoteDeviceList {
  const devices: RemoteDeviceList['devices'] = {};
  for (const device of Array.isArray(answer['devices']) ? answer['devices'] : []) {
    if (!isObject(device) || typeof device['device_id'] !== 'string') continue;
    const deviceId = device['device_id'];
    const keys = deviceKeysOf(userId, deviceId, device['keys']);
    const entry: RemoteDeviceList['devices'][string] = {};
    if (keys) entry.keys = keys;
    if (typeof device['device_display_name'] === 'string') entry.device_display_name = device['device_display_name'];
    devices[deviceId] = entry;
  }
  const list: RemoteDeviceList = { streamId: typeof answer['stream_id'] === 'number' ? answer['stream_id'] : 0, stale: false, devices };
  for (const type of ['master_key', 'self_signing_key'] as const) {
    const key = answer[type];
    if (isObject(key) && key['user_id'] === userId) list[type] = key as CrossSigningKey;
  }
  return list;
}

/** Settles as `promise` does, or rejects with `timedOut()` after `ms`, whichever comes first. */
export function withTimeout<T>(promise: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const serverTimedOut = (server: string, ms: number) => () => new DeviceListResyncError(server, `${server} did not answer within ${ms} ms`);

/**
 * Users of other servers who share no room with ours any more, inside the write that made it so: their
 * server stops telling us of their devices, so their lists are stale from now on, and whoever asks while
 * they are away, or once they share a room again, gets a resync first. A function of the write alone, so
 * that the room engine, made before the keys component (which reads rooms), is given it at construction.
 */
export function markRemoteListsStale(tx: WriteTransaction, userIds: string[]): void {
  for (const userId of userIds) tx.run('UPDATE remote_device_lists SET stale = 1 WHERE user_id = ?', [userId]);
}
