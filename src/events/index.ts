export * from './room-versions.ts';
export * from './identifiers.ts';
export * from './event.ts';
export * from './redaction.ts';
export * from './pdu.ts';
export * from './power-levels.ts';
export * from './auth.ts';
export * from './event-cache.ts';
export * from './state-res.ts';
export { resolveStateV1 } from './state-res-v1.ts';
export {
  resolveStateV2,
  isPowerEvent,
  separateStateSets,
  authDifference,
  reverseTopologicalPowerOrder,
  iterativeAuthChecks,
  mainlineOrder,
  conflictedStateSubgraph,
} from './state-res-v2.ts';
