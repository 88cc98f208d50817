import type { ComponentSchema } from '../storage/database.ts';

export const syncSchema: ComponentSchema = {
  component: 'sync',
  migrations: [
    {
      version: 1,
      description: 'receipts',
      up: (tx) => {
        tx.run(`CREATE TABLE receipts (
          room_id TEXT NOT NULL,
          receipt_type TEXT NOT NULL,
          user_id TEXT NOT NULL,
          thread_id TEXT NOT NULL,
          event_id TEXT NOT NULL,
          ts INTEGER NOT NULL,
          stream_id INTEGER NOT NULL,
          PRIMARY KEY (room_id, receipt_type, user_id, thread_id)
        )`);
        tx.run('CREATE INDEX receipts_by_stream ON receipts (room_id, stream_id)');
      },
    },
    {
      version: 2,
      description: 'receipts by stream position alone, to find the rooms an incremental sync must look at',
      up: (tx) => void tx.run('CREATE INDEX receipts_by_position ON receipts (stream_id)'),
    },
    {
      version: 3,
      description: 'peeks: the world_readable rooms each device peeks into (MSC2753)',
      up: (tx) => void tx.run(`CREATE TABLE peeks (
        user_id TEXT NOT NULL,
        device_id TEXT NOT NULL,
        room_id TEXT NOT NULL,
        stream_id INTEGER NOT NULL,
        PRIMARY KEY (user_id, device_id, room_id)
      ) WITHOUT ROWID`),
    },
    {
      version: 4,
      description: 'push delivery kept across restarts: the notifications not yet delivered, and how far events were looked at',
      up: (tx) => {
        // One row per notification per pusher, deleted once its gateway took it (or gave it up).
        tx.run(`CREATE TABLE push_outbox (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          user_id TEXT NOT NULL,
          app_id TEXT NOT NULL,
          pushkey TEXT NOT NULL,
          url TEXT NOT NULL,
          body TEXT NOT NULL,
          event_id TEXT NOT NULL,
          failures INTEGER NOT NULL DEFAULT 0,
          first_failure_ts INTEGER,
          next_attempt_ts INTEGER NOT NULL DEFAULT 0
        )`);
        tx.run('CREATE INDEX push_outbox_by_pusher ON push_outbox (user_id, app_id, pushkey, id)');
        // The stream position up to which events were evaluated and their notifications queued.
        tx.run('CREATE TABLE push_progress (id INTEGER PRIMARY KEY CHECK (id = 0), stream_position INTEGER NOT NULL)');
      },
    },
  ],
};
