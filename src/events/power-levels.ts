import type { JsonObject, JsonValue } from '../crypto/canonical-json.ts';
import type { RoomEvent } from './event.ts';
import type { RoomVersion } from './room-versions.ts';

// Power levels as the auth rules read them (server-server §Definitions, the
// m.room.power_levels schema, rooms/fragments/v1-stringy- and v1-floaty-power-levels).

/** Thrown when an event is not allowed by the authorization rules. */
export class AuthError extends Error {
  override name = 'AuthError';
  constructor(readonly reason: string) {
    super(reason);
  }
}

const STRINGY_INTEGER = /^\s*[+-]?[0-9]+\s*$/;

/**
 * Reads one power level value the way the room version allows, or undefined when
 * the value is not a power level at all.
 * - v10+: integers only.
 * - v1–v9: integers, or strings holding a base-10 integer with optional sign,
 *   leading zeros and surrounding whitespace ("stringy" power levels).
 * - v1–v5 (no strict canonical JSON): floats too, truncated toward zero.
 */
export function parsePowerLevel(value: unknown, version: RoomVersion): number | undefined {
  if (typeof value === 'number') {
    if (Number.isInteger(value)) return value;
    if (!version.strictCanonicalJson && Number.isFinite(value)) return Math.trunc(value);
    return undefined;
  }
  if (typeof value === 'string' && !version.integerPowerLevels && STRINGY_INTEGER.test(value)) {
    return Number.parseInt(value.trim(), 10);
  }
  return undefined;
}

export const isJsonObject = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The server name part of a user, room or (v1–v2) event ID: everything after the first colon. */
export function domainOf(id: string): string {
  const i = id.indexOf(':');
  return i < 0 ? '' : id.slice(i + 1);
}

/** The room creator: content.creator in v1–v10, the create event's sender from v11. */
export function roomCreator(version: RoomVersion, create: RoomEvent | undefined): string | undefined {
  if (!create) return undefined;
  if (!version.creatorInContent) return create.sender;
  const creator = create.content['creator'];
  return typeof creator === 'string' ? creator : undefined;
}

/**
 * The room's creators: from v12 the create event's sender and each user ID of
 * content.additional_creators (rooms/v12); before, the one creator.
 */
export function roomCreators(version: RoomVersion, create: RoomEvent | undefined): string[] {
  const creator = roomCreator(version, create);
  if (creator === undefined) return [];
  if (!version.privilegedCreators) return [creator];
  const additional = create?.content['additional_creators'];
  const others = Array.isArray(additional) ? additional.filter((u): u is string => typeof u === 'string') : [];
  return [creator, ...others];
}

/** The level of a v12+ room creator: infinitely high, above any level an event can hold (rooms/v12). */
export const CREATOR_POWER_LEVEL = Number.POSITIVE_INFINITY;

export type NamedLevel = 'ban' | 'kick' | 'invite' | 'redact';
const NAMED_DEFAULTS: Record<NamedLevel, number> = { ban: 50, kick: 50, invite: 0, redact: 50 };

/**
 * The power levels in force, read lazily: a value is parsed only when a rule asks
 * for it, so a malformed value that no rule reads does not reject an event
 * (as Synapse, which parses on access). A malformed value that is read throws
 * AuthError. JSON null counts as absent.
 */
export class RoomPowerLevels {
  constructor(
    readonly version: RoomVersion,
    /** content of the current m.room.power_levels event, if there is one */
    readonly content: JsonObject | undefined,
    /**
     * the room's creators (roomCreators): the one creator has level 100 while there is no
     * power levels event (v1–v11); from v12 every creator's level is infinite
     */
    readonly creators: readonly string[],
  ) {}

  private read(where: string, value: JsonValue | undefined, fallback: number): number {
    if (value === undefined || value === null) return fallback;
    const level = parsePowerLevel(value, this.version);
    if (level === undefined) throw new AuthError(`power levels: ${where} is not a valid power level`);
    return level;
  }

  private entry(map: string, key: string): JsonValue | undefined {
    const m = this.content?.[map];
    return isJsonObject(m) && Object.hasOwn(m, key) ? m[key] : undefined;
  }

  /**
   * A user's level: from v12 infinite for a creator; else users[user], else users_default, else 0;
   * with no power levels event, 100 for the creator.
   */
  user(userId: string): number {
    const creator = this.creators.includes(userId);
    if (creator && this.version.privilegedCreators) return CREATOR_POWER_LEVEL;
    if (!this.content) return creator ? 100 : 0;
    const explicit = this.entry('users', userId);
    if (explicit !== undefined && explicit !== null) return this.read(`users[${userId}]`, explicit, 0);
    return this.read('users_default', this.content['users_default'], 0);
  }

  /** The invite level (default 0) or the kick, ban and redact levels (default 50). */
  named(name: NamedLevel): number {
    return this.read(name, this.content?.[name], NAMED_DEFAULTS[name]);
  }

  /** The level required to send an event: events[type], else state_default (50) or events_default (0). */
  required(type: string, isState: boolean): number {
    const explicit = this.entry('events', type);
    if (explicit !== undefined && explicit !== null) return this.read(`events[${type}]`, explicit, 0);
    return isState
      ? this.read('state_default', this.content?.['state_default'], 50)
      : this.read('events_default', this.content?.['events_default'], 0);
  }

  /** The level for state events that `events` does not name: state_default, else 50. */
  stateDefault(): number {
    return this.read('state_default', this.content?.['state_default'], 50);
  }

  /** A notification level (notifications[key]); `room` (for @room mentions) defaults to 50, others have no default. */
  notification(key: string): number | undefined {
    const value = this.entry('notifications', key);
    if (value === undefined || value === null) return key === 'room' ? 50 : undefined;
    return this.read(`notifications[${key}]`, value, 0);
  }
}

/** The power levels in a room state, given a way to look up its state events. */
export function powerLevelsOf(
  version: RoomVersion,
  lookup: (type: string, stateKey: string) => RoomEvent | undefined,
): RoomPowerLevels {
  const powerLevels = lookup('m.room.power_levels', '');
  return new RoomPowerLevels(version, powerLevels?.content, roomCreators(version, lookup('m.room.create', '')));
}

/** A user's power level in a room state. */
export function userPowerLevel(
  version: RoomVersion,
  lookup: (type: string, stateKey: string) => RoomEvent | undefined,
  userId: string,
): number {
  return powerLevelsOf(version, lookup).user(userId);
}
