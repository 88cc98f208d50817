export * from './room-versions.ts';
export * from './identifiers.ts';
export * from './event.ts';
export * from './redaction.ts';
export * from './pdu.ts';
