import type { Database } from '../storage/database.ts';
import { sharedRooms } from './change-log.ts';
import type { ToDevice } from './to-device.ts';
import type { KeysMembership } from './types.ts';
import type { KeyUpload } from './upload.ts';

/** Memberships of another user in a room we are in that make their devices ours to know. */
const SHARES_DEVICES = new Set(['join', 'invite', 'knock']);

/** The /sync request and response parts the keys component fills in (structurally Sync's SyncExtension). */
export interface KeysSyncRequest {
  userId: string;
  deviceId: string;
  since: number;
  upTo: number;
  initial: boolean;
}
export interface KeysSyncResponse {
  to_device?: { events: object[] };
  device_lists?: { changed: string[]; left: string[] };
  device_one_time_keys_count?: Record<string, number>;
  device_unused_fallback_key_types?: string[];
}

/**
 * What /sync hears from the keys component (Sync's SyncExtension): to-device
 * messages, which users' device lists changed or left (also /keys/changes), and the
 * device's one-time key counts and unused fallback key types.
 */
export class KeysSyncExtension {
  constructor(
    private readonly db: Database,
    private readonly membership: KeysMembership,
    private readonly toDevice: ToDevice,
    private readonly uploads: KeyUpload,
  ) {}

  /** Fills the /sync parts this component owns (Sync's SyncExtension). */
  async contribute(request: KeysSyncRequest, response: KeysSyncResponse): Promise<void> {
    const { userId, deviceId, since, upTo } = request;
    const messages = await this.toDevice.deliver(userId, deviceId, since, upTo);
    if (messages.length > 0 || !request.initial) response.to_device = { events: messages };
    // Device lists are only for incremental syncs; after an initial one clients use /keys/query.
    if (!request.initial) response.device_lists = await this.deviceListChanges(userId, since, upTo);
    const { counts, unusedFallback } = await this.uploads.keyCounts(userId, deviceId);
    response.device_one_time_keys_count = counts;
    response.device_unused_fallback_key_types = unusedFallback;
  }

  /** The client synced from `since`: to-device messages delivered up to there are done with. */
  async acknowledge(userId: string, deviceId: string, since: number): Promise<void> {
    await this.toDevice.acknowledge(userId, deviceId, since);
  }

  /**
   * Users whose device lists `userId` should refresh or drop for (since, upTo]:
   * `changed` holds users sharing a room whose devices or cross-signing keys changed,
   * users who joined, were invited to or knocked on a room the user is in (clients encrypt
   * to invited members too, as Synapse reports them), and every member of a room the user joined;
   * `left` holds users the user no longer shares any room with.
   */
  async deviceListChanges(userId: string, since: number, upTo: number): Promise<{ changed: string[]; left: string[] }> {
    const keyRows = await this.db.all<{ user_id: string; audience: string | null }>(
      'SELECT DISTINCT user_id, audience FROM key_changes WHERE stream_id > ? AND stream_id <= ?', [since, upTo],
    );
    const memberEvents = await this.membership.memberChanges(userId, since, upTo);
    if (keyRows.length === 0 && memberEvents.length === 0) return { changed: [], left: [] };

    const shared = await sharedRooms(this.membership, userId);
    const changed = new Set<string>();
    for (const row of keyRows) {
      if (row.audience === null ? shared.users.has(row.user_id) : row.audience === userId) changed.add(row.user_id);
    }
    const maybeLeft = new Set<string>();
    for (const event of memberEvents) {
      const { roomId, membership } = event;
      const gone = membership === 'leave' || membership === 'ban';
      if (event.userId === userId) {
        // The user joined a room: its members' devices matter now. Left it: perhaps no longer.
        if (membership !== 'join' && !gone) continue;
        for (const member of await this.membership.members(roomId, 'join')) {
          if (member !== userId) (membership === 'join' ? changed : maybeLeft).add(member);
        }
      } else if (SHARES_DEVICES.has(membership) && shared.rooms.has(roomId)) {
        changed.add(event.userId);
      } else if (gone) {
        maybeLeft.add(event.userId);
      }
    }
    const left = [...maybeLeft].filter((u) => !shared.users.has(u));
    for (const user of left) changed.delete(user);
    return { changed: [...changed].sort(), left: left.sort() };
  }
}
