import type { JsonObject } from '../crypto/canonical-json.ts';
import type { Ed25519Backend } from '../crypto/ed25519.ts';
import { stateKey, type RoomEvent, type StateKey } from './event.ts';
import { authEventIds, createEventIdOfRoom, isCreateEvent, referenceIds, roomIdOfCreateEvent, type PDU } from './pdu.ts';
import { isValidUserId } from './identifiers.ts';
import {
  AuthError,
  domainOf,
  isJsonObject,
  parsePowerLevel,
  powerLevelsOf,
  type RoomPowerLevels,
} from './power-levels.ts';
import { ROOM_VERSIONS, type RoomVersion } from './room-versions.ts';
import { authoriserOf, checkMember, membershipOf, thirdPartyInviteToken, type AuthStateLookup } from './auth-membership.ts';

// The authorization rules for room versions 1–12 (rooms/fragments/v1-auth-rules,
// v3-auth-rules, rooms/v6, v7, v8-auth-rules, rooms/v10, v11, v12) and the auth events
// selection (server-server §Auth events selection). Rule numbers in comments are
// those of room version 1; later versions renumber after dropping the aliases rule,
// and v12 numbers its new room ID rule 2 (so its rule 3 is v1's rule 2).

export { AuthError } from './power-levels.ts';
export { membershipOf } from './auth-membership.ts';

export type { AuthStateLookup } from './auth-membership.ts';

/** An event as far as the auth events selection needs it. */
export type SelectableEvent = Pick<PDU, 'type' | 'sender' | 'state_key' | 'content'>;

const CREATE = 'm.room.create';
const MEMBER = 'm.room.member';
const POWER_LEVELS = 'm.room.power_levels';
const JOIN_RULES = 'm.room.join_rules';
const THIRD_PARTY_INVITE = 'm.room.third_party_invite';

/**
 * The (type, state_key) pairs of the state the auth rules read for an event, which its
 * auth_events are chosen from (server-server §Auth events selection). Empty for
 * m.room.create. The create event is always among them: from v12 the auth rules still
 * read it, but it is implied by room_id and must not be listed (see checkAuthEvents).
 */
export function authEventSelection(version: RoomVersion, event: SelectableEvent): [type: string, stateKey: string][] {
  if (event.type === CREATE) return [];
  const keys = new Map<StateKey, [string, string]>();
  const add = (type: string, key: string): void => void keys.set(stateKey(type, key), [type, key]);
  add(CREATE, '');
  add(POWER_LEVELS, '');
  add(MEMBER, event.sender);
  if (event.type === MEMBER && typeof event.state_key === 'string') {
    add(MEMBER, event.state_key);
    const membership = membershipOf(event);
    if (membership === 'join' || membership === 'invite' || membership === 'knock') add(JOIN_RULES, '');
    const token = membership === 'invite' ? thirdPartyInviteToken(event.content) : undefined;
    if (token !== undefined) add(THIRD_PARTY_INVITE, token);
    const authoriser = authoriserOf(event.content);
    if (membership === 'join' && version.restrictedJoins && authoriser !== undefined) add(MEMBER, authoriser);
  }
  return [...keys.values()];
}

/**
 * Rule 2, on the event's own auth_events: each must be known, in the same room,
 * not rejected, of a (type, state_key) the selection allows and not duplicated,
 * and one must be the create event. From v12 (its rules 2 and 3) the create event
 * must not be listed: the room ID must name an accepted one instead. `authEvents`
 * holds (at least) the events the event's auth_events name, and from v12 the create
 * event its room ID names (authEventIds in pdu.ts lists both).
 */
export function checkAuthEvents(
  event: RoomEvent,
  authEvents: Iterable<RoomEvent>,
  version: RoomVersion,
  isRejected?: (eventId: string) => boolean,
): void {
  if (event.type === CREATE) return;
  const byId = new Map<string, RoomEvent>();
  for (const e of authEvents) byId.set(e.event_id, e);
  const allowed = new Set(authEventSelection(version, event).map(([type, key]) => stateKey(type, key)));
  if (version.roomIdFromCreateEvent) allowed.delete(stateKey(CREATE, ''));
  const seen = new Set<StateKey>();
  for (const id of referenceIds(event.auth_events)) {
    const auth = byId.get(id);
    if (!auth) throw new AuthError(`auth event ${id} is not known`);
    if (auth.room_id !== event.room_id) throw new AuthError(`auth event ${id} belongs to another room`);
    if (typeof auth.state_key !== 'string') throw new AuthError(`auth event ${id} is not a state event`);
    const key = stateKey(auth.type, auth.state_key);
    if (seen.has(key)) throw new AuthError(`auth events hold two entries for (${auth.type}, ${auth.state_key})`);
    if (!allowed.has(key)) throw new AuthError(`auth event ${id} (${auth.type}, ${auth.state_key}) is not one the selection allows`);
    if (isRejected?.(id)) throw new AuthError(`auth event ${id} was rejected`);
    seen.add(key);
  }
  if (!version.roomIdFromCreateEvent) {
    if (!seen.has(stateKey(CREATE, ''))) throw new AuthError('auth events hold no m.room.create event');
    return;
  }
  // v12 rule 2: the room ID is the ID of an accepted create event, with the `!` sigil.
  const createId = createEventIdOfRoom(event.room_id);
  const create = byId.get(createId);
  if (!create || !isCreateEvent(create) || create.room_id !== event.room_id) {
    throw new AuthError(`the room ID ${event.room_id} names no known m.room.create event`);
  }
  if (isRejected?.(createId)) throw new AuthError(`the room's m.room.create event ${createId} was rejected`);
}

/**
 * Checks one event against the authorization rules, reading the room state through
 * `authState` (the event's auth events, the state before it, or the current state).
 * Throws AuthError with the reason when the event is not allowed.
 *
 * Rule 2 (about the auth_events list itself) needs the list, not a state: see
 * checkAuthEvents and checkEventAgainstAuthEvents. Signatures on the event are the
 * signature checks' business; for `join_authorised_via_users_server` this checks
 * that the authorising server's signature is present (requiredSignatureServers
 * lists it for the signature checks, which verify it).
 */
export async function checkEventAuth(
  event: RoomEvent,
  authState: AuthStateLookup,
  version: RoomVersion,
  verifier: Ed25519Backend,
): Promise<void> {
  // Rule 1: m.room.create.
  if (event.type === CREATE) return checkCreate(event, version);

  const create = authState(CREATE, '');
  if (!create) throw new AuthError('no m.room.create event in the state');
  // v12: the create event is the one the room ID names (checkAuthEvents checks it is accepted).
  if (version.roomIdFromCreateEvent && create.event_id !== createEventIdOfRoom(event.room_id)) {
    throw new AuthError(`the m.room.create event ${create.event_id} is not the one room ${event.room_id} names`);
  }

  // Rule 3: m.federate.
  if (create.content['m.federate'] === false && domainOf(event.sender) !== domainOf(create.sender)) {
    throw new AuthError('the room does not federate and the sender is from another server');
  }

  // Rule 4 (v1–v5 only): m.room.aliases needs no membership, only the sender's own server as state_key.
  if (version.specialCaseAliasesAuth && event.type === 'm.room.aliases') {
    if (typeof event.state_key !== 'string') throw new AuthError('m.room.aliases has no state_key');
    if (event.state_key !== domainOf(event.sender)) {
      throw new AuthError("m.room.aliases state_key is not the sender's server");
    }
    return;
  }

  const levels = powerLevelsOf(version, authState);

  // Rule 5: m.room.member.
  if (event.type === MEMBER) return checkMember(event, authState, version, verifier, levels, create);

  // Rule 6: everything else needs a joined sender.
  if (membershipOf(authState(MEMBER, event.sender)) !== 'join') {
    throw new AuthError(`${event.sender} is not joined to the room`);
  }
  const senderLevel = levels.user(event.sender);

  // Rule 7: m.room.third_party_invite needs the invite level, nothing more.
  if (event.type === THIRD_PARTY_INVITE) {
    if (senderLevel < levels.named('invite')) throw new AuthError('sender is below the invite level');
    return;
  }

  // Rule 8: the event type's required power level.
  const isState = typeof event.state_key === 'string';
  const required = levels.required(event.type, isState);
  if (required > senderLevel) {
    throw new AuthError(`sending ${event.type} needs power level ${required}, the sender has ${senderLevel}`);
  }

  // Rule 9: state keys that are user IDs belong to that user.
  if (isState && event.state_key!.startsWith('@') && event.state_key !== event.sender) {
    throw new AuthError("the state_key is another user's ID");
  }

  // Rule 10: m.room.power_levels.
  if (event.type === POWER_LEVELS) checkPowerLevels(event, authState(POWER_LEVELS, ''), senderLevel, version, levels.creators);

  // Rule 11 (v1–v2 only): m.room.redaction.
  if (version.specialCaseRedactionAuth && event.type === 'm.room.redaction') {
    if (senderLevel >= levels.named('redact')) return;
    if (typeof event.redacts === 'string' && domainOf(event.redacts) === domainOf(event.event_id)) return;
    throw new AuthError('sender is below the redact level and the redacted event is from another server');
  }
}

/**
 * Checks one event against the auth events it names: rule 2 on the list, then the
 * other rules against the state those auth events form. This is the first of the
 * checks performed on receipt of a PDU (server-server §Checks performed on receipt
 * of a PDU); the same rules against the state before the event, and against the
 * current state (soft failure), are `checkEventAuth` with those states.
 *
 * @param event - the event to check
 * @param authEvents - the events its auth_events name, and from v12 the create event (more are ignored)
 * @param version - the room's version
 * @param verifier - checks third-party invite signatures (`defaultEd25519Backend()`)
 * @param options - `isRejected` marks auth events that were themselves rejected
 * @throws AuthError with a human-readable `reason` when the event is not allowed
 *
 * @example
 * ```ts
 * try {
 *   await checkEventAgainstAuthEvents(event, authEvents, requireRoomVersion('10'), await defaultEd25519Backend());
 * } catch (e) {
 *   if (e instanceof AuthError) console.log('rejected:', e.reason);
 * }
 * ```
 */
export async function checkEventAgainstAuthEvents(
  event: RoomEvent,
  authEvents: Iterable<RoomEvent>,
  version: RoomVersion,
  verifier: Ed25519Backend,
  options: { isRejected?: (eventId: string) => boolean } = {},
): Promise<void> {
  const list = [...authEvents];
  checkAuthEvents(event, list, version, options.isRejected);
  const named = new Set(authEventIds(event, version));
  const byKey = new Map<StateKey, RoomEvent>();
  for (const e of list) {
    if (named.has(e.event_id) && typeof e.state_key === 'string') byKey.set(stateKey(e.type, e.state_key), e);
  }
  await checkEventAuth(event, (type, key) => byKey.get(stateKey(type, key)), version, verifier);
}

function checkCreate(event: RoomEvent, version: RoomVersion): void {
  if (!Array.isArray(event.prev_events) || event.prev_events.length > 0) {
    throw new AuthError('m.room.create has prev_events');
  }
  if (version.roomIdFromCreateEvent) {
    // v12 rule 1.2: no room_id (the room ID is the event's own ID; asRoomEvent adds it as such).
    if (event.room_id !== roomIdOfCreateEvent(event.event_id)) throw new AuthError('m.room.create has a room_id');
  } else if (domainOf(event.room_id) !== domainOf(event.sender)) {
    throw new AuthError("the room ID's server is not the sender's server");
  }
  const roomVersion = event.content['room_version'];
  if (roomVersion !== undefined && (typeof roomVersion !== 'string' || !ROOM_VERSIONS.has(roomVersion))) {
    throw new AuthError(`room version ${JSON.stringify(roomVersion)} is not recognised`);
  }
  if (version.creatorInContent && !Object.hasOwn(event.content, 'creator')) {
    throw new AuthError('m.room.create has no creator');
  }
  // v12 rule 1.4: additional_creators, when present, is a list of user IDs.
  if (version.privilegedCreators && Object.hasOwn(event.content, 'additional_creators')) {
    const additional = event.content['additional_creators'];
    if (!Array.isArray(additional) || !additional.every((user) => typeof user === 'string' && isValidUserId(user))) {
      throw new AuthError('additional_creators is not a list of user IDs');
    }
  }
}

const TOP_LEVEL_LEVELS = ['users_default', 'events_default', 'state_default', 'ban', 'redact', 'kick', 'invite'];

function checkPowerLevels(
  event: RoomEvent,
  previous: RoomEvent | undefined,
  senderLevel: number,
  version: RoomVersion,
  creators: readonly string[],
): void {
  const content = event.content;
  const level = (value: unknown, where: string): number => {
    const parsed = parsePowerLevel(value, version);
    if (parsed === undefined) throw new AuthError(`power levels: ${where} is not a valid power level`);
    return parsed;
  };
  // Every map read below must be an object; v10 also wants integer values throughout.
  const mapOf = (source: JsonObject, name: string): JsonObject | undefined => {
    if (!Object.hasOwn(source, name)) return undefined;
    const map = source[name];
    if (!isJsonObject(map)) throw new AuthError(`power levels: ${name} is not an object`);
    return map;
  };

  if (version.integerPowerLevels) {
    for (const name of TOP_LEVEL_LEVELS) if (Object.hasOwn(content, name)) level(content[name], name);
    for (const name of ['events', 'notifications']) {
      const map = mapOf(content, name);
      if (map) for (const [key, value] of Object.entries(map)) level(value, `${name}[${key}]`);
    }
  }
  const users = mapOf(content, 'users');
  if (users) {
    for (const [user, value] of Object.entries(users)) {
      if (!isValidUserId(user)) throw new AuthError(`power levels: ${JSON.stringify(user)} is not a user ID`);
      level(value, `users[${user}]`);
    }
  }
  // v12 rule 10.4: creators have their (infinite) level from the create event, never from here.
  if (version.privilegedCreators) {
    const listed = creators.find((creator) => users && Object.hasOwn(users, creator));
    if (listed !== undefined) throw new AuthError(`power levels: users lists ${listed}, a creator of the room`);
  }

  if (!previous) return;
  const old = previous.content;
  const valueIn = (source: JsonObject | undefined, key: string, where: string): number | undefined =>
    source && Object.hasOwn(source, key) ? level(source[key], where) : undefined;

  for (const name of TOP_LEVEL_LEVELS) {
    const before = valueIn(old, name, name);
    const after = valueIn(content, name, name);
    if (before === after) continue;
    if (before !== undefined && before > senderLevel) throw new AuthError(`${name} is above the sender's level`);
    if (after !== undefined && after > senderLevel) throw new AuthError(`${name} would be above the sender's level`);
  }

  const maps = version.limitNotificationsPowerLevels ? ['events', 'notifications'] : ['events'];
  for (const name of [...maps, 'users']) {
    const before = mapOf(old, name);
    const after = mapOf(content, name);
    for (const key of new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})])) {
      const where = `${name}[${key}]`;
      const was = valueIn(before, key, where);
      const now = valueIn(after, key, where);
      if (was === now) continue;
      if (was !== undefined) {
        // Other users' entries may only change if they are below the sender; events and notifications if not above.
        const othersEntry = name === 'users' && key !== event.sender;
        if (othersEntry ? was >= senderLevel : was > senderLevel) {
          throw new AuthError(`${where} is ${othersEntry ? 'not below' : 'above'} the sender's level`);
        }
      }
      if (now !== undefined && now > senderLevel) throw new AuthError(`${where} would be above the sender's level`);
    }
  }
}

/**
 * The servers whose signatures an event needs (server-server §Validating hashes and
 * signatures on received events, and rule 4.2 of v8+): the sender's server (unless
 * the event is an invite from a third-party invite), the event ID's server in v1–v2,
 * and from v8 the server of a member event's join_authorised_via_users_server.
 */
export function requiredSignatureServers(version: RoomVersion, event: RoomEvent): string[] {
  const servers = new Set<string>();
  const viaThirdPartyInvite =
    event.type === MEMBER && membershipOf(event) === 'invite' && Object.hasOwn(event.content, 'third_party_invite');
  if (!viaThirdPartyInvite) servers.add(domainOf(event.sender));
  if (version.eventIdFormat === 'local') servers.add(domainOf(event.event_id));
  const authoriser = authoriserOf(event.content);
  if (version.restrictedJoins && event.type === MEMBER && authoriser !== undefined) servers.add(domainOf(authoriser));
  return [...servers];
}

/** The event an m.room.redaction redacts: content.redacts in v11, the top-level redacts before. */
export function redactsOf(version: RoomVersion, event: RoomEvent): string | undefined {
  const redacts = version.redactsInContent ? event.content['redacts'] : event.redacts;
  return typeof redacts === 'string' ? redacts : undefined;
}

/**
 * Whether a redaction that passed the auth rules may be applied to its target
 * (rooms/fragments/v3-handling-redactions): the redacter holds the redact level,
 * or is from the same server as the target's sender.
 */
export function mayApplyRedaction(redaction: RoomEvent, target: RoomEvent, levels: RoomPowerLevels): boolean {
  if (levels.user(redaction.sender) >= levels.named('redact')) return true;
  return domainOf(redaction.sender) === domainOf(target.sender);
}
