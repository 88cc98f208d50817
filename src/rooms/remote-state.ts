import { stateKey, type RoomEvent, type StateKey, type StateMap } from '../events/event.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import { resolveState } from '../events/state-res.ts';
import { RoomError } from './errors.ts';
import type { RoomReads } from './room-reads.ts';
import type { RoomStore } from './room-store.ts';
import type { NidState } from './state-store.ts';

/** Stands for an event in a state map before it is stored and has a nid. */
export const PENDING_NID = -1;

/**
 * The state a remote event is checked against (server-server §Checks performed on receipt of a PDU, step 5):
 * the states after its prev events, resolved by the room version's algorithm, or a state given by event IDs
 * (a join's, or the state at a backfilled event whose prev events we lack). States here are by event nid.
 */
export class RemoteEventState {
  constructor(
    private readonly store: RoomStore,
    private readonly reads: Pick<RoomReads, 'stateAtEvent'>,
  ) {}

  /** The state before `event`: the states after its prev events (or those `given` by ID for some), resolved. */
  async afterPrevEvents(version: RoomVersion, event: RoomEvent, prevIds: string[], given?: ReadonlyMap<string, readonly string[]>): Promise<NidState> {
    const prevStates: NidState[] = [];
    for (const id of prevIds) {
      const ids = given?.get(id);
      if (ids) {
        prevStates.push(await this.ofEvents(ids, event));
        continue;
      }
      const prev = this.store.pendingEvent(id) ?? (await this.store.getEvent(id));
      const state = prev && prev.event.room_id === event.room_id ? await this.reads.stateAtEvent(id, 'after') : undefined;
      if (state) prevStates.push(state);
      else if (!given) throw new RoomError('missing_events', `prev event ${id} of ${event.event_id} is unknown, has no state or is of another room`);
    }
    // No prev events at all (a create event) is an empty state; prev events none of which could be used, a hole.
    if (prevStates.length === 0 && prevIds.length > 0) throw new RoomError('missing_events', `no prev event of ${event.event_id} has a state here`);
    return this.resolve(version, prevStates);
  }

  /**
   * A state given as the IDs of its events, which must all be held (as outliers at least).
   * Read as rows of a few columns, a chunk at a time: a big room's state is 20,000 events,
   * which are neither parsed nor brought into the event cache for this. Rejected events and
   * events of another room (a bogus answer) are left out.
   */
  async ofEvents(eventIds: readonly string[], forEvent: RoomEvent): Promise<NidState> {
    type Row = { event_id: string; event_nid: number; room_id: string; type: string; state_key: string | null; rejected: string | null };
    const rows = new Map<string, Row>();
    for (let from = 0; from < eventIds.length; from += 500) {
      const chunk = eventIds.slice(from, from + 500);
      const found = await this.store.db.all<Row>(`SELECT event_id, event_nid, room_id, type, state_key, rejected FROM events WHERE event_id IN (${chunk.map(() => '?').join(',')})`, chunk);
      for (const row of found) rows.set(row.event_id, row);
    }
    const state = new Map<StateKey, number>();
    for (const id of eventIds) {
      const pending = this.store.pendingEvent(id);
      const row = pending
        ? { event_nid: pending.nid, room_id: pending.event.room_id, type: pending.event.type, state_key: pending.event.state_key ?? null, rejected: pending.rejected }
        : rows.get(id);
      if (!row) throw new RoomError('missing_events', `state event ${id} for ${forEvent.event_id} is unknown`);
      if (row.rejected || typeof row.state_key !== 'string' || row.room_id !== forEvent.room_id) continue;
      state.set(stateKey(row.type, row.state_key), row.event_nid);
    }
    return state;
  }

  /**
   * Resolves state sets given by event nid. `pending` is an event not stored yet,
   * standing in the sets under the nid PENDING_NID.
   */
  async resolve(version: RoomVersion, states: NidState[], pending?: RoomEvent): Promise<NidState> {
    if (states.length === 1) return states[0]!;
    const idOf = async (nid: number) => (nid === PENDING_NID ? pending?.event_id : (await this.store.getEventByNid(nid))?.event.event_id);
    const nidOf = new Map<string, number>();
    const asIds: StateMap[] = [];
    for (const state of states) {
      const map: StateMap = new Map();
      for (const [key, nid] of state) {
        const id = await idOf(nid);
        if (id === undefined) continue;
        map.set(key, id);
        nidOf.set(id, nid);
      }
      asIds.push(map);
    }
    const getEvent = async (id: string) => (id === pending?.event_id ? pending : (await this.store.getEvent(id))?.event);
    const resolved = await resolveState(version, asIds, { getEvent });
    const out = new Map<StateKey, number>();
    for (const [key, id] of resolved) {
      const nid = nidOf.get(id) ?? (await this.store.getEvent(id))?.nid;
      if (nid !== undefined) out.set(key, nid);
    }
    return out;
  }
}

/** What changes from one state to another: each key's new nid, 0 for a key gone. */
export function diffState(from: NidState | undefined, to: NidState): Map<StateKey, number> {
  const changes = new Map<StateKey, number>();
  for (const [key, nid] of to) if (from?.get(key) !== nid) changes.set(key, nid);
  if (from) for (const key of from.keys()) if (!to.has(key)) changes.set(key, 0);
  return changes;
}

export function sameState(a: NidState, b: NidState): boolean {
  if (a === b) return true;
  if (a.size !== b.size) return false;
  for (const [key, nid] of a) if (b.get(key) !== nid) return false;
  return true;
}
