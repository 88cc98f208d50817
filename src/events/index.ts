export * from './room-versions.ts';
export * from './redaction.ts';
export * from './pdu.ts';
