import type { Database, WriteTransaction } from '../storage/database.ts';
import { nextStreamId, type StreamNotify } from '../storage/stream.ts';
import type { DeviceKeys, KeysDirectory, KeysMembership } from './types.ts';

/** One `key_changes` row: whose keys changed, how, and who hears of it (null: everyone sharing a room with them). */
export interface KeyChange {
  userId: string;
  kind: string;
  audience: string | null;
}

/** A local user's device list changed at stream positions first..last (for m.device_list_update). */
export type DeviceChangeListener = (userId: string, first: number, last: number) => void;

/** One m.device_list_update EDU's content, for federation to send to peers. */
export interface DeviceListUpdate {
  user_id: string;
  device_id: string;
  stream_id: number;
  prev_id: number[];
  deleted?: true;
  device_display_name?: string;
  keys?: DeviceKeys;
}

export interface KeyChangeLogOptions {
  db: Database;
  notify: StreamNotify;
  membership: KeysMembership;
  users: KeysDirectory;
  log: (message: string, error?: unknown) => void;
  /** A local device's keys as /keys/query serves them (for the outbound stream). */
  deviceKeys(userId: string, deviceId: string): Promise<DeviceKeys | undefined>;
}

/** Users joined to any room the user is joined to (the user included), and those rooms. */
export async function sharedRooms(membership: KeysMembership, userId: string): Promise<{ rooms: Set<string>; users: Set<string> }> {
  const rooms = new Set(await membership.roomsOf(userId, ['join']));
  const users = new Set<string>([userId]);
  for (const roomId of rooms) {
    for (const member of await membership.members(roomId, 'join')) users.add(member);
  }
  return { rooms, users };
}

/**
 * The device-list change log. Every key change is written here in the transaction
 * that makes it, at a position of the global stream: `key_changes` (what /sync and
 * /keys/changes read) and, for a local device, `device_list_stream` (what federation
 * sends as m.device_list_update). Once durable, a change is announced: /sync
 * long-polls wake and listeners hear of local device changes. The users component's
 * device hooks (devices added, renamed, removed) land here too.
 */
export class KeyChangeLog {
  /** Device list changes recorded inside a users transaction, announced once it commits. */
  private readonly pendingDeviceChanges = new Map<string, { first: number; last: number }>();
  private readonly deviceChangeListeners = new Set<DeviceChangeListener>();

  constructor(private readonly options: KeyChangeLogOptions) {}

  /** Listens to local users' device list changes (federation sends them as m.device_list_update). */
  onLocalDeviceChange(listener: DeviceChangeListener): void {
    this.deviceChangeListeners.add(listener);
  }

  /** Records changes at one new stream position inside the write; returns the position. */
  record(tx: WriteTransaction, changes: KeyChange[]): number {
    const position = nextStreamId(tx);
    for (const change of changes) this.insertKeyChange(tx, position, change);
    return position;
  }

  private insertKeyChange(tx: WriteTransaction, position: number, change: KeyChange): void {
    tx.run('INSERT INTO key_changes (stream_id, user_id, kind, audience) VALUES (?, ?, ?, ?)', [position, change.userId, change.kind, change.audience]);
  }

  /** Records a change of a local device: for /sync, and on the outbound stream federation reads. */
  recordDeviceChange(tx: WriteTransaction, userId: string, deviceId: string, deleted: boolean): number {
    const position = nextStreamId(tx);
    const prev = tx.get<{ id: number | null }>('SELECT MAX(stream_id) AS id FROM device_list_stream WHERE user_id = ?', [userId]);
    tx.run('INSERT INTO device_list_stream (stream_id, user_id, device_id, prev_id, deleted) VALUES (?, ?, ?, ?, ?)', [
      position, userId, deviceId, prev?.id ?? null, deleted ? 1 : 0,
    ]);
    this.insertKeyChange(tx, position, { userId, kind: 'device', audience: null });
    return position;
  }

  /** Wakes the /sync long-polls of everyone who should hear of these changes. */
  async announce(position: number, changes: KeyChange[], first = position): Promise<void> {
    for (const change of changes) {
      if (change.kind !== 'device' || change.audience !== null || !this.options.users.isLocal(change.userId)) continue;
      for (const listener of this.deviceChangeListeners) listener(change.userId, first, position);
    }
    const userIds = new Set<string>();
    for (const change of changes) {
      if (change.audience !== null) {
        userIds.add(change.audience);
        continue;
      }
      userIds.add(change.userId);
      for (const user of (await sharedRooms(this.options.membership, change.userId)).users) userIds.add(user);
    }
    this.options.notify({ position, userIds: [...userIds] });
  }

  /**
   * The outbound device list stream of a local user after `afterStreamId`: the
   * m.device_list_update EDUs federation sends to peers, oldest first, each with the
   * device's current keys and name (or `deleted`).
   */
  async deviceListUpdates(userId: string, afterStreamId = 0, limit = 100): Promise<DeviceListUpdate[]> {
    const rows = await this.options.db.all<{ stream_id: number; device_id: string; prev_id: number | null; deleted: number }>(
      'SELECT stream_id, device_id, prev_id, deleted FROM device_list_stream WHERE user_id = ? AND stream_id > ? ORDER BY stream_id LIMIT ?',
      [userId, afterStreamId, limit],
    );
    const names = new Map((await this.options.users.listDevices(userId)).map((d) => [d.device_id, d.display_name]));
    const updates: DeviceListUpdate[] = [];
    for (const row of rows) {
      const update: DeviceListUpdate = { user_id: userId, device_id: row.device_id, stream_id: row.stream_id, prev_id: row.prev_id === null ? [] : [row.prev_id] };
      const keys = row.deleted ? undefined : await this.options.deviceKeys(userId, row.device_id);
      if (row.deleted || !names.has(row.device_id)) update.deleted = true;
      else {
        const name = names.get(row.device_id);
        if (name) update.device_display_name = name;
        if (keys) {
          const { unsigned: _u, ...signed } = keys;
          update.keys = signed as DeviceKeys;
        }
      }
      updates.push(update);
    }
    return updates;
  }

  // ----------------------------------------------- users DeviceListener

  /** A device was created (login): a device list change, announced once the transaction commits. */
  devicesAdded(tx: WriteTransaction, userId: string, deviceIds: string[]): void {
    for (const deviceId of deviceIds) this.pendingChange(userId, this.recordDeviceChange(tx, userId, deviceId, false));
  }

  /** A device was renamed: its name is part of the device list other servers hold. */
  devicesChanged(tx: WriteTransaction, userId: string, deviceIds: string[]): void {
    for (const deviceId of deviceIds) this.pendingChange(userId, this.recordDeviceChange(tx, userId, deviceId, false));
  }

  private pendingChange(userId: string, position: number): void {
    const pending = this.pendingDeviceChanges.get(userId);
    this.pendingDeviceChanges.set(userId, { first: pending?.first ?? position, last: position });
  }

  /** Devices were deleted: their keys and pending messages go with them, and it is a device list change. */
  devicesRemoved(tx: WriteTransaction, userId: string, deviceIds: string[]): void {
    for (const deviceId of deviceIds) {
      for (const table of ['device_keys', 'one_time_keys', 'fallback_keys', 'to_device_messages', 'to_device_txns']) {
        tx.run(`DELETE FROM ${table} WHERE user_id = ? AND device_id = ?`, [userId, deviceId]);
      }
      tx.run('DELETE FROM key_signatures WHERE target_user_id = ? AND target_key_id = ?', [userId, deviceId]);
      this.pendingChange(userId, this.recordDeviceChange(tx, userId, deviceId, true));
    }
  }

  /** The users transaction that added or removed devices committed: wake those who should know. */
  devicesCommitted(userId: string): void {
    const pending = this.pendingDeviceChanges.get(userId);
    if (pending === undefined) return;
    this.pendingDeviceChanges.delete(userId);
    this.announce(pending.last, [{ userId, kind: 'device', audience: null }], pending.first).catch((error) => this.options.log('announcing a device change failed', error));
  }
}
