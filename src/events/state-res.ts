import { defaultEd25519Backend, type Ed25519Backend } from '../crypto/ed25519.ts';
import type { StateMap } from './event.ts';
import { EventCache, type EventSource } from './event-cache.ts';
import type { RoomVersion } from './room-versions.ts';
import { resolveStateV1 } from './state-res-v1.ts';
import { resolveStateV2 } from './state-res-v2.ts';

export interface ResolveOptions {
  /** Verifies third-party invite signatures met during the auth checks (default: the runtime's fastest backend). */
  verifier?: Ed25519Backend;
  /** Reuse a cache across resolutions (the room engine may keep one per room while it works). */
  cache?: EventCache;
}

/**
 * Resolves the state of a room from the states of its forks: the v1 algorithm for
 * room version 1, v2 for versions 2–11, v2.1 from 12 (rooms/v1, rooms/fragments/v2-state-res
 * and rooms/v12).
 * The answer does not depend on the order of the state sets.
 *
 * @param version - the room's version, e.g. `requireRoomVersion('10')`
 * @param stateSets - the states to resolve, e.g. the states after each prev event of a new event
 * @param source - looks up events by ID; optionally supplies cached auth chains and rejection
 * @param options - the Ed25519 verifier for third-party invite signatures, a cache to reuse
 * @returns the resolved state: (type, state_key) → event ID (keys made with `stateKey`)
 *
 * @example
 * ```ts
 * const state = await resolveState(requireRoomVersion('10'), [stateA, stateB], {
 *   getEvent: async (id) => store.get(id),
 * });
 * state.get(stateKey('m.room.power_levels', '')); // the power levels event ID
 * ```
 */
export async function resolveState(
  version: RoomVersion,
  stateSets: readonly StateMap[],
  source: EventSource,
  options: ResolveOptions = {},
): Promise<StateMap> {
  if (stateSets.length === 0) return new Map();
  const verifier = options.verifier ?? (await defaultEd25519Backend());
  const cache = options.cache ?? new EventCache(source, version);
  return version.stateResolution === 'v1'
    ? resolveStateV1(version, stateSets, cache, verifier)
    : resolveStateV2(version, stateSets, cache, verifier);
}
