import type { PDU } from './pdu.ts';

/**
 * A PDU together with its event ID (carried in v1–v2 PDUs, computed from v3 on) and its room
 * ID (a v12+ create event carries none: its own ID gives it, see asRoomEvent in pdu.ts).
 */
export type RoomEvent = PDU & { event_id: string; room_id: string };

/** A state map key: event type and state key, joined by a NUL, which neither may contain in practice. */
export type StateKey = string;

export function stateKey(type: string, key: string): StateKey {
  return `${type}\u0000${key}`;
}

export function splitStateKey(key: StateKey): [type: string, stateKey: string] {
  const i = key.indexOf('\u0000');
  return [key.slice(0, i), key.slice(i + 1)];
}

/** Room state: (type, state_key) → event ID. */
export type StateMap = Map<StateKey, string>;

export const isStateEvent = (event: { state_key?: unknown }): boolean => typeof event.state_key === 'string';
