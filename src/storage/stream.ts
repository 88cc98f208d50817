import type { Database, Migration, WriteTransaction } from './database.ts';

/**
 * One global, persistent stream position shared by everything /sync reports
 * (timeline events, receipts, account data, to-device messages, device list
 * changes, profile changes…). A single counter makes a sync token one number that
 * stays valid across restarts, and ordering across kinds of data free.
 */
export const streamMigration: Migration = {
  version: 1,
  description: 'global stream position',
  up: (tx) => {
    tx.run('CREATE TABLE stream_position (id INTEGER NOT NULL)');
    tx.run('INSERT INTO stream_position (id) VALUES (0)');
  },
};

export const streamSchema = { component: 'stream', migrations: [streamMigration] };

/** Allocates the next stream position inside a write transaction. */
export function nextStreamId(tx: WriteTransaction): number {
  return tx.get<{ id: number }>('UPDATE stream_position SET id = id + 1 RETURNING id')!.id;
}

export function currentStreamId(tx: Pick<WriteTransaction, 'get'>): number {
  return tx.get<{ id: number }>('SELECT id FROM stream_position')!.id;
}

/** The stream position now, read outside a write (what a /sync token reaches up to). */
export async function readStreamPosition(db: Pick<Database, 'get'>): Promise<number> {
  return (await db.get<{ id: number }>('SELECT id FROM stream_position'))!.id;
}

/** What changed at a stream position, so the sync notifier can wake the right long-polls. */
export interface StreamChange {
  position: number;
  /** Rooms whose members should wake. */
  roomIds?: readonly string[];
  /** Users who should wake (account data, to-device, invites, device lists…). */
  userIds?: readonly string[];
}

export type StreamNotify = (change: StreamChange) => void;

/**
 * Where the components that write report their stream changes (`notify`), made before any of them. The
 * component that wakes long-polls is made after the ones it reads, so it is connected last (`deliverTo`);
 * a change reported before that has no long-poll to wake.
 */
export class StreamChanges {
  private listener: StreamNotify | undefined;
  readonly notify: StreamNotify = (change) => this.listener?.(change);

  deliverTo(listener: StreamNotify): void {
    this.listener = listener;
  }
}
