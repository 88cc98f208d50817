import type { Signatures } from '../crypto/signing.ts';

// The shapes the whole keys component shares: keys as clients upload them, and what
// the component asks of rooms, users and other servers.

/** A device's identity keys, as uploaded to /keys/upload and returned by /keys/query. */
export interface DeviceKeys {
  user_id: string;
  device_id: string;
  algorithms: string[];
  keys: Record<string, string>;
  signatures: Signatures;
  [key: string]: unknown;
}

/** A cross-signing key (master, self-signing or user-signing). */
export interface CrossSigningKey {
  user_id: string;
  usage: string[];
  keys: Record<string, string>;
  signatures?: Signatures;
  [key: string]: unknown;
}

export type CrossSigningKeyType = 'master' | 'self_signing' | 'user_signing';

/** A one-time or fallback key: a bare string (curve25519) or a signed object (signed_curve25519). */
export type OneTimeKey = string | Record<string, unknown>;

/** A membership event in a room, as the device-list computation needs it. */
export interface MemberChange {
  roomId: string;
  userId: string;
  membership: string;
}

/** What the keys component needs to know about rooms (the room engine provides it). */
export interface KeysMembership {
  roomsOf(userId: string, memberships?: string[]): Promise<string[]>;
  members(roomId: string, membership?: string): Promise<string[]>;
  /**
   * Membership events in (from, to], oldest first, in the rooms where `userId` is joined
   * now or whose own membership changed in that range.
   */
  memberChanges(userId: string, from: number, to: number): Promise<MemberChange[]>;
  /** Users of other servers (of `server`, if given) joined to a room a local user is joined to. */
  remoteMembersSharingRooms(server?: string): Promise<string[]>;
  /** Whether a user (of another server) is joined to a room a local user is joined to. */
  sharesRoom(userId: string): Promise<boolean>;
}

/** What the keys component needs to know about accounts and devices (the users component provides it). */
export interface KeysDirectory {
  isLocal(userId: string): boolean;
  listDevices(userId: string): Promise<{ device_id: string; display_name: string | null }[]>;
}

/** Other servers' keys, asked of those servers (federation's client provides it). */
export interface RemoteKeyServers {
  /** `signal` aborts the claim when we stop waiting, so no one-time keys are taken for an answer nobody reads. */
  userKeysClaim(server: string, oneTimeKeys: Record<string, Record<string, string>>, signal?: AbortSignal): Promise<Record<string, unknown>>;
}

export interface RemoteKeysOptions {
  /** Without it, users of other servers are reported under `failures`. */
  remote?: RemoteKeyServers;
  /** How long to wait for each server (the client's `timeout`). */
  timeoutMs?: number;
}

/** The client-server default for /keys/query and /keys/claim's `timeout`. */
export const DEFAULT_REMOTE_KEYS_TIMEOUT_MS = 10_000;
