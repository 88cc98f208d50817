/** The request and response shapes of simplified sliding sync (MSC4186), as Synapse and matrix-js-sdk 37 speak them. */

/** What a list or a subscription asks of each of its rooms. */
export interface RoomConfig {
  /** [type, state_key] pairs; `*` for any, `$LAZY` (members) for the timeline's senders, `$ME` for the user. */
  required_state: string[][];
  timeline_limit: number;
}

export interface ListFilters {
  is_dm?: boolean;
  is_encrypted?: boolean;
  is_invite?: boolean;
  /** Create event `type`s to keep; null stands for a room without one. */
  room_types?: (string | null)[];
  not_room_types?: (string | null)[];
  /** Rooms that are children (m.space.child) of one of these spaces. */
  spaces?: string[];
}

export interface ListRequest extends RoomConfig {
  ranges: [number, number][];
  filters?: ListFilters;
}

/** Extensions that name the lists and rooms they cover (`*`: all); default all. */
export interface ScopedExtension {
  enabled?: boolean;
  lists?: string[];
  rooms?: string[];
}

export interface ExtensionsRequest {
  to_device?: { enabled?: boolean; since?: string; limit?: number };
  e2ee?: { enabled?: boolean };
  account_data?: ScopedExtension;
  receipts?: ScopedExtension;
  typing?: ScopedExtension;
}

export interface SlidingSyncRequest {
  userId: string;
  deviceId: string;
  connId: string;
  pos?: string;
  timeoutMs: number;
  lists: Record<string, ListRequest>;
  roomSubscriptions: Record<string, RoomConfig>;
  unsubscribeRooms: string[];
  extensions: ExtensionsRequest;
  txnId?: string;
}

export interface SlidingSyncResponse {
  pos: string;
  txn_id?: string;
  lists: Record<string, { count: number }>;
  rooms: Record<string, Record<string, unknown>>;
  extensions: Record<string, Record<string, unknown>>;
}

/** The event types that move a room up the list (Synapse's SLIDING_SYNC_DEFAULT_BUMP_EVENT_TYPES); the user's own membership in a room they are not joined to also does. */
export const BUMP_EVENT_TYPES = ['m.room.create', 'm.room.message', 'm.room.encrypted', 'm.sticker', 'm.call.invite', 'm.poll.start', 'm.beacon_info'] as const;
