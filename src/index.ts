/**
 * Hearth's package root: the public entry for tooling and tests.
 *
 * - {@link resolveState} resolves the state of a room from the states of its
 *   forks, for any room version from 1 to 11, given a way to look up events.
 * - {@link checkEventAgainstAuthEvents} checks one event's authorization
 *   against the auth events it names; {@link checkEventAuth} checks it against
 *   any room state (the state before the event, or the current state).
 * - {@link getRoomVersion} / {@link requireRoomVersion} look up a room version
 *   by its identifier; {@link DEFAULT_ROOM_VERSION} is the one new rooms get.
 *
 * Everything here is platform-free: it runs in a browser tab, a Worker or Node.
 *
 * @example
 * ```ts
 * import { resolveState, requireRoomVersion, stateKey } from 'hearth';
 *
 * const state = await resolveState(requireRoomVersion('10'), [forkA, forkB], {
 *   getEvent: async (eventId) => events.get(eventId),
 * });
 * const powerLevelsId = state.get(stateKey('m.room.power_levels', ''));
 * ```
 *
 * @packageDocumentation
 */

export { resolveState, type ResolveOptions } from './events/state-res.ts';
export { EventCache, type EventSource } from './events/event-cache.ts';
export {
  AuthError,
  authEventSelection,
  checkAuthEvents,
  checkEventAgainstAuthEvents,
  checkEventAuth,
  requiredSignatureServers,
  type AuthStateLookup,
} from './events/auth.ts';
export { powerLevelsOf, userPowerLevel, RoomPowerLevels } from './events/power-levels.ts';
export {
  DEFAULT_ROOM_VERSION,
  ROOM_VERSIONS,
  getRoomVersion,
  requireRoomVersion,
  UnsupportedRoomVersionError,
  type RoomVersion,
} from './events/room-versions.ts';
export { stateKey, splitStateKey, type RoomEvent, type StateKey, type StateMap } from './events/event.ts';
export type { PDU } from './events/pdu.ts';
export { defaultEd25519Backend, type Ed25519Backend } from './crypto/ed25519.ts';
