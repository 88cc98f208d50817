import type { ComponentSchema } from '../storage/database.ts';

export const slidingSyncSchema: ComponentSchema = {
  component: 'sliding-sync',
  migrations: [
    {
      version: 1,
      description: 'sliding sync connections, their positions, and what each position had sent of each room',
      up: (tx) => {
        // One per (user, device, conn_id); a new connection under the same name replaces the old.
        tx.run(`CREATE TABLE sliding_sync_connections (
          conn_key INTEGER PRIMARY KEY,
          user_id TEXT NOT NULL,
          device_id TEXT NOT NULL,
          conn_id TEXT NOT NULL,
          created_ts INTEGER NOT NULL,
          UNIQUE (user_id, device_id, conn_id)
        )`);
        // A `pos` the server answered with (never reused: AUTOINCREMENT): the stream positions it covered and the sticky request
        // parameters (room subscriptions, extensions) in force at it.
        tx.run(`CREATE TABLE sliding_sync_positions (
          pos INTEGER PRIMARY KEY AUTOINCREMENT,
          conn_key INTEGER NOT NULL,
          stream INTEGER NOT NULL,
          ephemeral INTEGER NOT NULL,
          sticky TEXT NOT NULL,
          created_ts INTEGER NOT NULL
        )`);
        tx.run('CREATE INDEX sliding_sync_positions_by_conn ON sliding_sync_positions (conn_key, pos)');
        // What the client has of a room as of position `pos` (and later positions, until a newer row):
        // its timeline up to `sent_stream`, the state that `required_state` (JSON) asked for,
        // and the member events of `$LAZY` members sent (a JSON list of user IDs).
        tx.run(`CREATE TABLE sliding_sync_rooms (
          conn_key INTEGER NOT NULL,
          pos INTEGER NOT NULL,
          room_id TEXT NOT NULL,
          sent_stream INTEGER NOT NULL,
          membership TEXT NOT NULL,
          required_state TEXT NOT NULL,
          lazy_members TEXT NOT NULL,
          PRIMARY KEY (conn_key, room_id, pos)
        )`);
      },
    },
  ],
};
