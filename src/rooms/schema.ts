import type { ComponentSchema } from '../storage/database.ts';

export const roomsSchema: ComponentSchema = {
  component: 'rooms',
  migrations: [
    {
      version: 1,
      description: 'rooms, events, state snapshots built from shared blocks, current state, memberships, aliases',
      up: (tx) => {
        tx.run(`CREATE TABLE rooms (
          room_id TEXT PRIMARY KEY,
          room_version TEXT NOT NULL,
          current_snapshot INTEGER,
          published INTEGER NOT NULL DEFAULT 0,
          created_ts INTEGER NOT NULL
        )`);
        // Every event we hold, accepted or not. stream_ordering is its place in the
        // global stream (NULL for outliers, rejected and soft-failed events, which
        // never reach clients). state_snapshot is the room state before the event.
        tx.run(`CREATE TABLE events (
          event_nid INTEGER PRIMARY KEY,
          event_id TEXT NOT NULL UNIQUE,
          room_id TEXT NOT NULL,
          type TEXT NOT NULL,
          state_key TEXT,
          sender TEXT NOT NULL,
          depth INTEGER NOT NULL,
          origin_server_ts INTEGER NOT NULL,
          json TEXT NOT NULL,
          stream_ordering INTEGER UNIQUE,
          state_snapshot INTEGER,
          replaces_state INTEGER,
          outlier INTEGER NOT NULL DEFAULT 0,
          rejected TEXT,
          soft_failed INTEGER NOT NULL DEFAULT 0,
          redacted_by TEXT
        )`);
        tx.run('CREATE INDEX events_by_room_stream ON events (room_id, stream_ordering)');
        tx.run(`CREATE TABLE transaction_ids (
          user_id TEXT NOT NULL,
          device_id TEXT NOT NULL,
          txn_id TEXT NOT NULL,
          event_id TEXT NOT NULL,
          PRIMARY KEY (user_id, device_id, txn_id)
        )`);
        tx.run('CREATE INDEX transaction_ids_by_event ON transaction_ids (event_id)');
        tx.run(`CREATE TABLE forward_extremities (
          room_id TEXT NOT NULL,
          event_id TEXT NOT NULL,
          PRIMARY KEY (room_id, event_id)
        )`);
        // A snapshot is an ordered list of immutable blocks (later blocks override
        // earlier ones). Snapshots share blocks; small new blocks are merged as they
        // accumulate, so each entry is copied O(log n) times and no event gets a full copy.
        tx.run('CREATE TABLE state_blocks (block_nid INTEGER PRIMARY KEY, size INTEGER NOT NULL)');
        tx.run(`CREATE TABLE state_block_entries (
          block_nid INTEGER NOT NULL,
          type TEXT NOT NULL,
          state_key TEXT NOT NULL,
          event_nid INTEGER NOT NULL,
          PRIMARY KEY (block_nid, type, state_key)
        ) WITHOUT ROWID`);
        tx.run(`CREATE TABLE state_snapshots (
          snapshot_nid INTEGER PRIMARY KEY,
          room_id TEXT NOT NULL,
          blocks TEXT NOT NULL
        )`);
        tx.run(`CREATE TABLE current_state (
          room_id TEXT NOT NULL,
          type TEXT NOT NULL,
          state_key TEXT NOT NULL,
          event_nid INTEGER NOT NULL,
          membership TEXT,
          PRIMARY KEY (room_id, type, state_key)
        ) WITHOUT ROWID`);
        tx.run('CREATE INDEX current_state_by_member ON current_state (state_key, type, membership)');
        // Each local user's latest membership per room, with the stream position it
        // changed at: what /sync needs to list joined, invited and left rooms.
        tx.run(`CREATE TABLE local_memberships (
          user_id TEXT NOT NULL,
          room_id TEXT NOT NULL,
          membership TEXT NOT NULL,
          event_id TEXT NOT NULL,
          stream_ordering INTEGER NOT NULL,
          forgotten INTEGER NOT NULL DEFAULT 0,
          PRIMARY KEY (user_id, room_id)
        )`);
        tx.run('CREATE INDEX local_memberships_by_stream ON local_memberships (user_id, stream_ordering)');
        tx.run(`CREATE TABLE room_aliases (
          alias TEXT PRIMARY KEY,
          room_id TEXT NOT NULL,
          creator TEXT NOT NULL
        )`);
      },
    },
    {
      version: 2,
      description: 'events in topological order, for pagination',
      up: (tx) => {
        tx.run('CREATE INDEX events_by_room_topology ON events (room_id, depth, stream_ordering)');
      },
    },
    {
      version: 3,
      description: 'relations index: child, parent, rel_type, type, sender and annotation key of timeline events (relations.ts)',
      up: (tx) => {
        tx.run(`CREATE TABLE event_relations (
          event_nid INTEGER PRIMARY KEY,
          event_id TEXT NOT NULL UNIQUE,
          room_id TEXT NOT NULL,
          parent_id TEXT NOT NULL,
          rel_type TEXT NOT NULL,
          type TEXT NOT NULL,
          sender TEXT NOT NULL,
          aggregation_key TEXT,
          depth INTEGER NOT NULL,
          stream_ordering INTEGER NOT NULL,
          origin_server_ts INTEGER NOT NULL
        )`);
        tx.run('CREATE INDEX event_relations_by_parent ON event_relations (parent_id, rel_type, depth, stream_ordering)');
        tx.run('CREATE INDEX event_relations_annotations ON event_relations (parent_id, sender, aggregation_key) WHERE aggregation_key IS NOT NULL');
        tx.run('CREATE INDEX event_relations_threads ON event_relations (room_id, rel_type, parent_id, stream_ordering)');
        // Events stored before the index existed.
        const rows = tx.all<{ event_nid: number; event_id: string; room_id: string; type: string; sender: string; depth: number; stream_ordering: number; origin_server_ts: number; json: string }>(
          `SELECT event_nid, event_id, room_id, type, sender, depth, stream_ordering, origin_server_ts, json FROM events
           WHERE stream_ordering IS NOT NULL AND rejected IS NULL AND soft_failed = 0 AND redacted_by IS NULL AND state_key IS NULL AND json LIKE '%m.relates_to%'`,
        );
        for (const row of rows) {
          const relatesTo = (JSON.parse(row.json) as { content?: Record<string, unknown> }).content?.['m.relates_to'] as Record<string, unknown> | undefined;
          const relType = relatesTo?.['rel_type'];
          const parentId = relatesTo?.['event_id'];
          if (typeof relType !== 'string' || relType === '' || typeof parentId !== 'string' || !parentId.startsWith('$') || parentId === row.event_id) continue;
          const key = relType === 'm.annotation' && typeof relatesTo?.['key'] === 'string' ? relatesTo['key'] : null;
          tx.run(
            `INSERT OR IGNORE INTO event_relations (event_nid, event_id, room_id, parent_id, rel_type, type, sender, aggregation_key, depth, stream_ordering, origin_server_ts)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
            [row.event_nid, row.event_id, row.room_id, parentId, relType, row.type, row.sender, key, row.depth, row.stream_ordering, row.origin_server_ts],
          );
        }
      },
    },
    {
      version: 4,
      description: 'events by room, type and stream position: the latest event of some types in each room (sliding sync\'s bump stamps)',
      up: (tx) => void tx.run('CREATE INDEX events_by_room_type_stream ON events (room_id, type, stream_ordering)'),
    },
    {
      version: 5,
      description: 'client transaction IDs scoped to the device and the endpoint, not the device alone',
      up: (tx) => {
        tx.run(`CREATE TABLE transaction_ids_scoped (
          user_id TEXT NOT NULL,
          device_id TEXT NOT NULL,
          endpoint TEXT NOT NULL,
          txn_id TEXT NOT NULL,
          event_id TEXT NOT NULL,
          PRIMARY KEY (user_id, device_id, endpoint, txn_id)
        )`);
        // Earlier rows named no endpoint; they are kept (for unsigned.transaction_id) under an empty one.
        tx.run("INSERT INTO transaction_ids_scoped (user_id, device_id, endpoint, txn_id, event_id) SELECT user_id, device_id, '', txn_id, event_id FROM transaction_ids");
        tx.run('DROP TABLE transaction_ids');
        tx.run('ALTER TABLE transaction_ids_scoped RENAME TO transaction_ids');
        tx.run('CREATE INDEX transaction_ids_by_event ON transaction_ids (event_id)');
      },
    },
    {
      version: 6,
      description: 'backfilled events (below the live stream) by room and topological position, apart from the live ones and the outliers',
      // /sync's "limited" walks back through backfilled history from the timeline's start; through
      // events_by_room_topology it passed over every outlier (a joined big room's 20,000 state events) first.
      up: (tx) => void tx.run('CREATE INDEX events_backfilled ON events (room_id, depth, stream_ordering) WHERE stream_ordering < 0'),
    },
    {
      version: 7,
      description: 'redactions the rooms took: their target, and whether they apply (decided when the target is known)',
      // A redaction is shown to clients once it applies (rooms v3+: one may arrive before its target,
      // or from a server without the power); one whose target never comes stays unshown.
      up: (tx) => {
        tx.run(`CREATE TABLE redactions (
          redaction_id TEXT PRIMARY KEY,
          target_id TEXT NOT NULL,
          room_id TEXT NOT NULL,
          sender TEXT NOT NULL,
          by_power INTEGER NOT NULL,
          applies INTEGER
        )`);
        tx.run('CREATE INDEX redactions_by_target ON redactions (target_id)');
        tx.run('CREATE INDEX redactions_waiting ON redactions (room_id) WHERE applies IS NULL');
        // Redactions taken before: those that redacted their target apply; the others wait for it.
        const rows = tx.all<{ event_id: string; room_id: string; sender: string; json: string }>(
          "SELECT event_id, room_id, sender, json FROM events WHERE type = 'm.room.redaction' AND rejected IS NULL AND soft_failed = 0 AND outlier = 0",
        );
        for (const row of rows) {
          const event = JSON.parse(row.json) as { redacts?: unknown; content?: { redacts?: unknown } };
          const target = typeof event.redacts === 'string' ? event.redacts : event.content?.redacts;
          if (typeof target !== 'string') continue;
          const redacted = tx.get<{ room_id: string; redacted_by: string | null }>('SELECT room_id, redacted_by FROM events WHERE event_id = ?', [target]);
          const applies = redacted === undefined ? null : redacted.redacted_by === row.event_id || (redacted.redacted_by !== null && redacted.room_id === row.room_id) ? 1 : 0;
          tx.run('INSERT OR IGNORE INTO redactions (redaction_id, target_id, room_id, sender, by_power, applies) VALUES (?, ?, ?, ?, 1, ?)', [row.event_id, target, row.room_id, row.sender, applies]);
        }
      },
    },
  ],
};
