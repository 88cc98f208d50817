import type { Filter } from './filter.ts';
import type { UnreadCounts } from './push.ts';

// The shapes of /sync (client-server §Syncing) as this component answers it, and the seam through which other
// components add their parts.

export const DEFAULT_TIMELINE_LIMIT = 10;

/** Parts of /sync other components fill in (to-device, device lists, key counts). */
export interface SyncExtension {
  /** Adds this component's fields to a sync response for (since, upTo]. */
  contribute(request: { userId: string; deviceId: string; since: number; upTo: number; initial: boolean }, response: SyncResponse): Promise<void>;
  /** Called after a sync response was computed from `since`, so acknowledged data can be dropped. */
  acknowledge?(userId: string, deviceId: string, since: number): Promise<void>;
}

export interface SyncRequest {
  userId: string;
  deviceId: string;
  since?: string;
  filter: Filter;
  fullState: boolean;
  timeoutMs: number;
  setPresence?: 'online' | 'offline' | 'unavailable';
}

export interface SyncResponse {
  next_batch: string;
  rooms: {
    join: Record<string, JoinedRoom>;
    invite: Record<string, { invite_state: { events: Record<string, unknown>[] } }>;
    leave: Record<string, LeftRoom>;
    knock: Record<string, { knock_state: { events: Record<string, unknown>[] } }>;
    /** The world_readable rooms this device peeks into (MSC2753), present when there are any. */
    peek?: Record<string, JoinedRoom>;
  };
  presence: { events: Record<string, unknown>[] };
  account_data: { events: Record<string, unknown>[] };
  to_device?: { events: Record<string, unknown>[] };
  device_lists?: { changed: string[]; left: string[] };
  device_one_time_keys_count?: Record<string, number>;
  device_unused_fallback_key_types?: string[];
  [key: string]: unknown;
}

interface Timeline {
  events: Record<string, unknown>[];
  limited: boolean;
  prev_batch: string;
}

export interface JoinedRoom {
  timeline: Timeline;
  state: { events: Record<string, unknown>[] };
  ephemeral: { events: Record<string, unknown>[] };
  account_data: { events: Record<string, unknown>[] };
  summary: Record<string, unknown>;
  unread_notifications: UnreadCounts;
  /** With a timeline filter's `unread_thread_notifications`: counts of threads with notifications, by root. */
  unread_thread_notifications?: Record<string, UnreadCounts>;
}

export interface LeftRoom {
  timeline: Timeline;
  state: { events: Record<string, unknown>[] };
  account_data: { events: Record<string, unknown>[] };
}
