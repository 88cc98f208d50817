import { sha1 } from '@noble/hashes/legacy.js';
import { utf8 } from '../crypto/canonical-json.ts';
import type { Ed25519Backend } from '../crypto/ed25519.ts';
import { AuthError, authEventSelection, checkEventAuth } from './auth.ts';
import { splitStateKey, stateKey, type RoomEvent, type StateKey, type StateMap } from './event.ts';
import type { EventCache } from './event-cache.ts';
import type { RoomVersion } from './room-versions.ts';

// State resolution for room version 1 (rooms/v1 §State resolution). Known to reset
// state; kept only so that version 1 rooms resolve as everyone else resolves them.

const POWER_LEVELS_KEY = stateKey('m.room.power_levels', '');

/** v1 conflicts: a key is conflicted only when two sets hold different events for it; a key missing from a set is not. */
function separate(stateSets: readonly StateMap[]): { unconflicted: StateMap; conflicted: Map<StateKey, Set<string>> } {
  const unconflicted: StateMap = new Map();
  const conflicted = new Map<StateKey, Set<string>>();
  for (const set of stateSets) {
    for (const [key, id] of set) {
      const seen = conflicted.get(key);
      if (seen) seen.add(id);
      else if (!unconflicted.has(key)) unconflicted.set(key, id);
      else if (unconflicted.get(key) !== id) {
        conflicted.set(key, new Set([unconflicted.get(key)!, id]));
        unconflicted.delete(key);
      }
    }
  }
  return { unconflicted, conflicted };
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/** Highest depth first, then lowest sha1(event_id). */
function ordered(events: readonly RoomEvent[]): RoomEvent[] {
  const hashes = new Map(events.map((e) => [e.event_id, sha1(utf8(e.event_id))]));
  return [...events].sort(
    (a, b) => b.depth - a.depth || compareBytes(hashes.get(a.event_id)!, hashes.get(b.event_id)!),
  );
}

/** Resolves state sets with the room version 1 algorithm. */
export async function resolveStateV1(
  version: RoomVersion,
  stateSets: readonly StateMap[],
  cache: EventCache,
  verifier: Ed25519Backend,
): Promise<StateMap> {
  if (stateSets.length === 0) return new Map();
  if (stateSets.length === 1) return new Map(stateSets[0]);
  const { unconflicted, conflicted } = separate(stateSets);

  // Conflicts among events we cannot load shrink: one known event is no conflict.
  const conflictedEvents = new Map<StateKey, RoomEvent[]>();
  for (const [key, ids] of conflicted) {
    await cache.load(ids);
    const events = [...ids].map((id) => cache.peek(id)).filter((e): e is RoomEvent => e !== undefined);
    if (events.length > 1) conflictedEvents.set(key, events);
    else if (events.length === 1) unconflicted.set(key, events[0]!.event_id);
  }

  // R starts as the unconflicted state, as far as the conflicted events' auth rules read it.
  const authState = new Map<StateKey, RoomEvent>();
  for (const events of conflictedEvents.values()) {
    for (const event of events) {
      for (const [type, key] of authEventSelection(version, event)) {
        const id = unconflicted.get(stateKey(type, key));
        const known = id === undefined ? undefined : await cache.get(id);
        if (known) authState.set(stateKey(type, key), known);
      }
    }
  }

  const allowed = async (event: RoomEvent, state: Map<StateKey, RoomEvent>): Promise<boolean> => {
    try {
      await checkEventAuth(event, (type, key) => state.get(stateKey(type, key)), version, verifier);
      return true;
    } catch (e) {
      if (e instanceof AuthError) return false;
      throw e;
    }
  };

  // Power levels, join rules and memberships: from the lowest depth up, each event
  // replaces the last while the auth rules allow it against R; the first refusal stops.
  const resolveAuthEvents = async (events: RoomEvent[]): Promise<RoomEvent> => {
    const ascending = ordered(events).reverse();
    const state = new Map(authState);
    let previous = ascending[0]!;
    for (const event of ascending.slice(1)) {
      state.set(stateKey(previous.type, previous.state_key!), previous);
      if (!(await allowed(event, state))) return previous;
      previous = event;
    }
    return previous;
  };
  // Everything else: the highest, lowest-hash event that passes auth in R, else the last.
  const resolveOtherEvents = async (events: RoomEvent[]): Promise<RoomEvent> => {
    const candidates = ordered(events);
    for (const event of candidates) if (await allowed(event, authState)) return event;
    return candidates[candidates.length - 1]!;
  };

  const resolved = new Map<StateKey, RoomEvent>();
  const applyResolved = (): void => {
    for (const [key, event] of resolved) authState.set(key, event);
  };
  const powerLevels = conflictedEvents.get(POWER_LEVELS_KEY);
  if (powerLevels) resolved.set(POWER_LEVELS_KEY, await resolveAuthEvents(powerLevels));
  applyResolved();
  for (const type of ['m.room.join_rules', 'm.room.member']) {
    for (const [key, events] of conflictedEvents) {
      if (splitStateKey(key)[0] === type && !resolved.has(key)) resolved.set(key, await resolveAuthEvents(events));
    }
    applyResolved();
  }
  for (const [key, events] of conflictedEvents) {
    if (!resolved.has(key)) resolved.set(key, await resolveOtherEvents(events));
  }

  const result: StateMap = new Map(unconflicted);
  for (const [key, event] of resolved) result.set(key, event.event_id);
  return result;
}
