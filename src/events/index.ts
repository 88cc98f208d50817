export * from './room-versions.ts';
export * from './identifiers.ts';
export * from './event.ts';
export * from './redaction.ts';
export * from './pdu.ts';
export * from './power-levels.ts';
export * from './auth.ts';
