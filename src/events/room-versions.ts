import { CodedError } from '../util/coded-error.ts';

/**
 * Room versions 1–12 and every rule that differs between them
 * (spec: content/rooms/v1.md … v12.md). Code asks a RoomVersion what to do
 * instead of comparing version strings.
 */
export interface RoomVersion {
  readonly id: string;
  /** v1–v2 `$local:server`; v3 standard base64 of the reference hash; v4+ URL-safe. */
  readonly eventIdFormat: 'local' | 'base64' | 'urlsafe';
  /** v1–v2 PDUs carry prev_events/auth_events as [id, {sha256}] pairs; v3+ as plain IDs. */
  readonly eventReferences: 'pairs' | 'ids';
  /** v1 for room version 1; v2 for 2–11; v2.1 from v12 (MSC4297: the conflicted state subgraph, and step 2 from an empty state). */
  readonly stateResolution: 'v1' | 'v2' | 'v2.1';
  readonly redaction: 'v1' | 'v6' | 'v8' | 'v9' | 'v11';
  /** v5+: a signing key must be valid at the event's origin_server_ts. */
  readonly enforceKeyValidity: boolean;
  /** v1–v5: m.room.aliases has its own auth rule; v6+ treats it as an ordinary state event. */
  readonly specialCaseAliasesAuth: boolean;
  /** v6+: events must be strict canonical JSON (integers only, ±(2^53−1), no -0). */
  readonly strictCanonicalJson: boolean;
  /** v6+: changes to power_levels.notifications need the sender to hold the old and new levels. */
  readonly limitNotificationsPowerLevels: boolean;
  /** v7+: the `knock` membership and join rule. */
  readonly knocking: boolean;
  /** v8+: the `restricted` join rule with `allow` and join_authorised_via_users_server. */
  readonly restrictedJoins: boolean;
  /** v10+: the `knock_restricted` join rule. */
  readonly knockRestricted: boolean;
  /** v10+: power level values must be integers, not strings holding integers. */
  readonly integerPowerLevels: boolean;
  /** v1–v10 name the room creator in content.creator; v11 uses the create event's sender. */
  readonly creatorInContent: boolean;
  /** v11: m.room.redaction carries `redacts` in content (and keeps it top-level for compatibility). */
  readonly redactsInContent: boolean;
  /** v1–v2: m.room.redaction has its own auth rule (redact level or same event ID domain); v3+ checks on apply. */
  readonly specialCaseRedactionAuth: boolean;
  /**
   * v12 (MSC4291): the room ID is the create event's ID with the `!` sigil. The create event
   * carries no room_id, and no other event lists it in auth_events: its room_id implies it.
   */
  readonly roomIdFromCreateEvent: boolean;
  /**
   * v12 (MSC4289): the create event's sender and content.additional_creators are the room's
   * creators, whose power level is infinite and who may not appear in power_levels.users.
   */
  readonly privilegedCreators: boolean;
}

const v1: RoomVersion = {
  id: '1',
  eventIdFormat: 'local',
  eventReferences: 'pairs',
  stateResolution: 'v1',
  redaction: 'v1',
  enforceKeyValidity: false,
  specialCaseAliasesAuth: true,
  strictCanonicalJson: false,
  limitNotificationsPowerLevels: false,
  knocking: false,
  restrictedJoins: false,
  knockRestricted: false,
  integerPowerLevels: false,
  creatorInContent: true,
  redactsInContent: false,
  specialCaseRedactionAuth: true,
  roomIdFromCreateEvent: false,
  privilegedCreators: false,
};
const v2: RoomVersion = { ...v1, id: '2', stateResolution: 'v2' };
const v3: RoomVersion = {
  ...v2,
  id: '3',
  eventIdFormat: 'base64',
  eventReferences: 'ids',
  specialCaseRedactionAuth: false,
};
const v4: RoomVersion = { ...v3, id: '4', eventIdFormat: 'urlsafe' };
const v5: RoomVersion = { ...v4, id: '5', enforceKeyValidity: true };
const v6: RoomVersion = {
  ...v5,
  id: '6',
  redaction: 'v6',
  specialCaseAliasesAuth: false,
  strictCanonicalJson: true,
  limitNotificationsPowerLevels: true,
};
const v7: RoomVersion = { ...v6, id: '7', knocking: true };
const v8: RoomVersion = { ...v7, id: '8', redaction: 'v8', restrictedJoins: true };
const v9: RoomVersion = { ...v8, id: '9', redaction: 'v9' };
const v10: RoomVersion = { ...v9, id: '10', knockRestricted: true, integerPowerLevels: true };
const v11: RoomVersion = { ...v10, id: '11', redaction: 'v11', creatorInContent: false, redactsInContent: true };
const v12: RoomVersion = { ...v11, id: '12', stateResolution: 'v2.1', roomIdFromCreateEvent: true, privilegedCreators: true };

export const ROOM_VERSIONS: ReadonlyMap<string, RoomVersion> = new Map(
  [v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12].map((v) => [v.id, v]),
);

/**
 * New rooms are created in room version 10 unless the client asks for another. The spec now
 * recommends 12 (rooms/_index.md, a SHOULD), and says servers may keep an older default for
 * a while (MSC4304); the project keeps 10 until its owners choose to move.
 */
export const DEFAULT_ROOM_VERSION = '10';

export function getRoomVersion(id: string): RoomVersion | undefined {
  return ROOM_VERSIONS.get(id);
}

/** A room version we do not implement: an API answers 400 `M_UNSUPPORTED_ROOM_VERSION`. */
export class UnsupportedRoomVersionError extends CodedError {
  override name = 'UnsupportedRoomVersionError';
  constructor(readonly roomVersion: string) {
    super(400, 'M_UNSUPPORTED_ROOM_VERSION', `room version ${JSON.stringify(roomVersion)} is not supported`);
  }
}

export function requireRoomVersion(id: string): RoomVersion {
  const version = ROOM_VERSIONS.get(id);
  if (!version) throw new UnsupportedRoomVersionError(id);
  return version;
}
