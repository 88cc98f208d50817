import { compareCodePoints } from '../crypto/canonical-json.ts';
import type { Ed25519Backend } from '../crypto/ed25519.ts';
import { AuthError, authEventSelection, checkEventAuth, membershipOf } from './auth.ts';
import { stateKey, type RoomEvent, type StateKey, type StateMap } from './event.ts';
import type { EventCache } from './event-cache.ts';
import { authEventIds, referenceIds } from './pdu.ts';
import { RoomPowerLevels, roomCreators } from './power-levels.ts';
import type { RoomVersion } from './room-versions.ts';

// State resolution v2 (rooms/fragments/v2-state-res), for room versions 2–11, and v2.1
// (rooms/v12, MSC4297) from room version 12: the full conflicted set also holds the
// conflicted state subgraph, and the power events are checked from an empty state.

const POWER_LEVELS_KEY = stateKey('m.room.power_levels', '');

/**
 * Power events might take away someone's ability to act: power levels, join rules,
 * and kicks and bans (leave or ban of someone else). The create event counts too,
 * as in Synapse and Ruma, so that a conflicted create is ordered before the rest.
 */
export function isPowerEvent(event: RoomEvent): boolean {
  if (event.state_key === '' && ['m.room.power_levels', 'm.room.join_rules', 'm.room.create'].includes(event.type)) {
    return true;
  }
  if (event.type === 'm.room.member' && typeof event.state_key === 'string') {
    const membership = membershipOf(event);
    return (membership === 'leave' || membership === 'ban') && event.sender !== event.state_key;
  }
  return false;
}

/** The split of state sets: a key is unconflicted when every set has it with the same event. */
export interface StateSplit {
  unconflicted: StateMap;
  conflicted: Map<StateKey, Set<string>>;
}

export function separateStateSets(stateSets: readonly StateMap[]): StateSplit {
  const unconflicted: StateMap = new Map();
  const conflicted = new Map<StateKey, Set<string>>();
  const [first, ...others] = stateSets;
  if (!first) return { unconflicted, conflicted };
  const conflict = (key: StateKey): void => {
    const ids = new Set<string>();
    for (const set of stateSets) {
      const id = set.get(key);
      if (id !== undefined) ids.add(id);
    }
    conflicted.set(key, ids);
  };
  for (const [key, id] of first) {
    let same = true;
    for (let i = 0; same && i < others.length; i++) same = others[i]!.get(key) === id;
    if (same) unconflicted.set(key, id);
    else conflict(key);
  }
  // Keys the first set lacks are conflicted (missing somewhere) by definition.
  for (const set of others) for (const key of set.keys()) if (!first.has(key) && !conflicted.has(key)) conflict(key);
  return { unconflicted, conflicted };
}

/**
 * The auth difference: the union minus the intersection of each state set's full
 * auth chain (the union of the auth chains of the set's events).
 *
 * A set's own events count as reached by it, as in Synapse (whose walk starts at
 * them) and gomatrixserverlib (which drops unconflicted state from the conflicted
 * set). Read literally, the spec's auth chain of an event leaves the event out;
 * the two readings differ only for an unconflicted state event that some sets'
 * events cite and others' do not, which the literal reading would re-check. We
 * follow the deployed servers so that Hearth converges with them.
 */
export async function authDifference(
  stateSets: readonly StateMap[],
  cache: EventCache,
  split: StateSplit = separateStateSets(stateSets),
): Promise<Set<string>> {
  const chainOf = async (id: string): Promise<ReadonlySet<string>> => cache.knownChain(id) ?? (await cache.authChain(id));

  // The unconflicted events are held by every set, so they and all they reach are
  // reached by every set and can never be in the difference. Only the conflicted
  // events' chains need counting per set, which keeps this cheap when the sets
  // share most of their state (the usual case).
  await cache.load(split.unconflicted.values());
  const common = new Set<string>();
  for (const id of split.unconflicted.values()) {
    common.add(id);
    for (const a of await chainOf(id)) common.add(a);
  }
  const reached = new Map<string, number>();
  for (const set of stateSets) {
    const mine = new Set<string>();
    for (const key of split.conflicted.keys()) {
      const id = set.get(key);
      if (id === undefined) continue;
      if (!common.has(id)) mine.add(id);
      for (const a of await chainOf(id)) if (!common.has(a)) mine.add(a);
    }
    for (const id of mine) reached.set(id, (reached.get(id) ?? 0) + 1);
  }
  const difference = new Set<string>();
  for (const [id, count] of reached) if (count < stateSets.length) difference.add(id);
  return difference;
}

/** Ties are broken by origin_server_ts, then by event ID (compared by code point). */
function compareTsThenId(a: RoomEvent, b: RoomEvent): number {
  return a.origin_server_ts - b.origin_server_ts || compareCodePoints(a.event_id, b.event_id);
}

/**
 * The sender's power level according to the event's own auth events (used by the power
 * ordering); from v12 a creator's is infinite, as Synapse and Ruma read it.
 */
async function senderPowerLevel(event: RoomEvent, cache: EventCache, version: RoomVersion): Promise<number> {
  let powerLevels: RoomEvent | undefined;
  let create: RoomEvent | undefined;
  for (const id of authEventIds(event, version)) {
    const auth = await cache.get(id);
    if (auth?.state_key !== '') continue;
    if (auth.type === 'm.room.power_levels') powerLevels = auth;
    else if (auth.type === 'm.room.create') create = auth;
  }
  try {
    return new RoomPowerLevels(version, powerLevels?.content, roomCreators(version, create)).user(event.sender);
  } catch (e) {
    if (e instanceof AuthError) return 0; // a malformed level counts as none
    throw e;
  }
}

/** A binary min-heap. */
class Heap<T> {
  private readonly items: T[] = [];
  constructor(private readonly less: (a: T, b: T) => boolean) {}
  get size(): number {
    return this.items.length;
  }
  push(item: T): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(items[i]!, items[parent]!)) break;
      [items[i], items[parent]] = [items[parent]!, items[i]!];
      i = parent;
    }
  }
  pop(): T | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0 && last !== undefined) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let smallest = i;
        if (l < items.length && this.less(items[l]!, items[smallest]!)) smallest = l;
        if (r < items.length && this.less(items[r]!, items[smallest]!)) smallest = r;
        if (smallest === i) break;
        [items[i], items[smallest]] = [items[smallest]!, items[i]!];
        i = smallest;
      }
    }
    return top;
  }
}

/**
 * Step 1: the power events of the full conflicted set, enlarged by the events of
 * their auth chains that are in the full conflicted set, in reverse topological
 * power order: Kahn's algorithm over the auth DAG, taking at each step the event
 * whose sender has the highest power level, then the earliest origin_server_ts,
 * then the smallest event ID. The auth chain is walked through events of the full
 * conflicted set only, as Synapse and Ruma do.
 */
export async function reverseTopologicalPowerOrder(
  powerEvents: readonly string[],
  fullConflicted: ReadonlySet<string>,
  cache: EventCache,
  version: RoomVersion,
): Promise<string[]> {
  // graph: event → its auth events inside the full conflicted set
  const graph = new Map<string, Set<string>>();
  const stack = [...powerEvents];
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (graph.has(id)) continue;
    const edges = new Set<string>();
    graph.set(id, edges);
    const event = await cache.get(id);
    for (const a of event ? authEventIds(event, version) : []) {
      if (!fullConflicted.has(a)) continue;
      edges.add(a);
      if (!graph.has(a)) stack.push(a);
    }
  }

  type Entry = { id: string; event: RoomEvent; power: number };
  const entries = new Map<string, Entry>();
  for (const id of graph.keys()) {
    const event = cache.peek(id)!;
    entries.set(id, { id, event, power: await senderPowerLevel(event, cache, version) });
  }
  const less = (a: Entry, b: Entry): boolean => {
    if (a.power !== b.power) return a.power > b.power;
    return compareTsThenId(a.event, b.event) < 0;
  };

  const dependants = new Map<string, string[]>(); // auth event → events citing it
  const outstanding = new Map<string, number>(); // event → auth events not yet emitted
  const ready = new Heap<Entry>(less);
  for (const [id, edges] of graph) {
    outstanding.set(id, edges.size);
    for (const a of edges) {
      let list = dependants.get(a);
      if (!list) dependants.set(a, (list = []));
      list.push(id);
    }
    if (edges.size === 0) ready.push(entries.get(id)!);
  }
  const order: string[] = [];
  while (ready.size > 0) {
    const { id } = ready.pop()!;
    order.push(id);
    for (const child of dependants.get(id) ?? []) {
      const left = outstanding.get(child)! - 1;
      outstanding.set(child, left);
      if (left === 0) ready.push(entries.get(child)!);
    }
  }
  return order;
}

/**
 * The iterative auth checks: applies each event, in order, to the state when the
 * auth rules allow it against that state. A (type, state_key) the rules need and
 * the state lacks is taken from the event's own auth events, unless that auth event
 * was rejected.
 */
export async function iterativeAuthChecks(
  version: RoomVersion,
  eventIds: readonly string[],
  base: StateMap,
  cache: EventCache,
  verifier: Ed25519Backend,
): Promise<StateMap> {
  const state: StateMap = new Map(base);
  for (const id of eventIds) {
    const event = await cache.get(id);
    if (!event || typeof event.state_key !== 'string') continue;
    const authState = new Map<StateKey, RoomEvent>();
    for (const authId of authEventIds(event, version)) {
      const auth = await cache.get(authId);
      if (!auth || typeof auth.state_key !== 'string' || (await cache.isRejected(authId))) continue;
      authState.set(stateKey(auth.type, auth.state_key), auth);
    }
    for (const [type, key] of authEventSelection(version, event)) {
      const current = state.get(stateKey(type, key));
      const currentEvent = current === undefined ? undefined : await cache.get(current);
      if (currentEvent) authState.set(stateKey(type, key), currentEvent);
    }
    try {
      await checkEventAuth(event, (type, key) => authState.get(stateKey(type, key)), version, verifier);
      state.set(stateKey(event.type, event.state_key), id);
    } catch (e) {
      if (!(e instanceof AuthError)) throw e;
    }
  }
  return state;
}

/** The power levels event among an event's auth events, if any (never the implied create event, so only those listed). */
async function powerLevelsAuthEvent(event: RoomEvent, cache: EventCache): Promise<RoomEvent | undefined> {
  for (const id of referenceIds(event.auth_events)) {
    const auth = await cache.get(id);
    if (auth && auth.type === 'm.room.power_levels' && auth.state_key === '') return auth;
  }
  return undefined;
}

/**
 * Step 3: orders events by the mainline of the resolved power levels event P:
 * events whose power levels ancestry meets P's mainline earlier (further from P)
 * come first; events that never meet it come before all; ties by
 * origin_server_ts, then event ID.
 */
export async function mainlineOrder(
  eventIds: readonly string[],
  resolvedPowerLevels: string | undefined,
  cache: EventCache,
): Promise<string[]> {
  if (eventIds.length === 0) return [];
  const mainline: string[] = [];
  for (let id = resolvedPowerLevels; id !== undefined; ) {
    mainline.push(id);
    const event = await cache.get(id);
    id = event ? (await powerLevelsAuthEvent(event, cache))?.event_id : undefined;
    if (id !== undefined && mainline.includes(id)) break; // a forged cycle
  }
  // Depth along the mainline: its oldest event is 1, P is mainline.length; 0 = not on it.
  const depth = new Map<string, number>();
  mainline.forEach((id, i) => depth.set(id, mainline.length - i));

  const depthOf = async (event: RoomEvent): Promise<number> => {
    const walked: string[] = [];
    let found = 0;
    for (let current: RoomEvent | undefined = event; current; ) {
      const known = depth.get(current.event_id);
      if (known !== undefined) {
        found = known;
        break;
      }
      walked.push(current.event_id);
      current = await powerLevelsAuthEvent(current, cache);
      if (current && walked.includes(current.event_id)) break;
    }
    for (const id of walked) depth.set(id, found); // memoise the power levels events passed on the way
    return found;
  };

  const keyed: { event: RoomEvent; depth: number }[] = [];
  for (const id of eventIds) {
    const event = await cache.get(id);
    if (event) keyed.push({ event, depth: await depthOf(event) });
  }
  keyed.sort((a, b) => a.depth - b.depth || compareTsThenId(a.event, b.event));
  return keyed.map((k) => k.event.event_id);
}

/**
 * The conflicted state subgraph (v2.1, rooms/v12): every event on a path of auth events
 * from one conflicted event to another, both ends included. That is each conflicted event,
 * and each event of their auth chains that reaches a conflicted event in turn. Which do is
 * worked out once per event, bottom up, over the auth edges among those chains.
 */
export async function conflictedStateSubgraph(conflicted: ReadonlySet<string>, cache: EventCache, version: RoomVersion): Promise<Set<string>> {
  const below = new Set<string>();
  for (const id of conflicted) for (const a of cache.knownChain(id) ?? (await cache.authChain(id))) below.add(a);
  const reaches = new Map<string, boolean>();
  for (const id of conflicted) reaches.set(id, true);
  const authEventsWithin = async (id: string): Promise<string[]> => {
    const event = await cache.get(id);
    return event ? authEventIds(event, version).filter((a) => below.has(a) || conflicted.has(a)) : [];
  };
  // Depth-first, with a stack of its own: an auth chain can be thousands of events deep.
  for (const start of below) {
    if (reaches.has(start)) continue;
    const stack: { id: string; children: string[] }[] = [{ id: start, children: await authEventsWithin(start) }];
    const onStack = new Set([start]);
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const next = top.children.find((c) => !reaches.has(c) && !onStack.has(c));
      if (next !== undefined) {
        stack.push({ id: next, children: await authEventsWithin(next) });
        onStack.add(next);
        continue;
      }
      reaches.set(top.id, top.children.some((c) => reaches.get(c) === true));
      onStack.delete(top.id);
      stack.pop();
    }
  }
  const subgraph = new Set(conflicted);
  for (const id of below) if (reaches.get(id)) subgraph.add(id);
  return subgraph;
}

/** State resolution v2 (and from room version 12, v2.1): the resolution of a set of room states. */
export async function resolveStateV2(
  version: RoomVersion,
  stateSets: readonly StateMap[],
  cache: EventCache,
  verifier: Ed25519Backend,
): Promise<StateMap> {
  const split = separateStateSets(stateSets);
  const { unconflicted, conflicted } = split;
  if (conflicted.size === 0) return unconflicted;

  const conflictedIds = new Set<string>();
  for (const ids of conflicted.values()) for (const id of ids) conflictedIds.add(id);
  const full = new Set(conflictedIds);
  for (const id of await authDifference(stateSets, cache, split)) full.add(id);
  const v21 = version.stateResolution === 'v2.1';
  if (v21) for (const id of await conflictedStateSubgraph(conflictedIds, cache, version)) full.add(id);
  await cache.load(full);
  for (const id of full) if (!cache.peek(id)) full.delete(id); // unknown events take no part

  const powerEvents = [...full].filter((id) => isPowerEvent(cache.peek(id)!));
  const sortedPower = await reverseTopologicalPowerOrder(powerEvents, full, cache, version);
  // v2.1 checks the power events from nothing but their own auth events, not the unconflicted state.
  const partial = await iterativeAuthChecks(version, sortedPower, v21 ? new Map() : unconflicted, cache, verifier);

  const picked = new Set(sortedPower);
  const rest = [...full].filter((id) => !picked.has(id));
  const sortedRest = await mainlineOrder(rest, partial.get(POWER_LEVELS_KEY), cache);
  const resolved = await iterativeAuthChecks(version, sortedRest, partial, cache, verifier);

  for (const [key, id] of unconflicted) resolved.set(key, id);
  return resolved;
}
