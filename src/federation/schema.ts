import type { ComponentSchema } from '../storage/database.ts';

export const federationSchema: ComponentSchema = {
  component: 'federation',
  migrations: [
    {
      version: 1,
      description: 'durable outgoing queue per destination, received transactions',
      up: (tx) => {
        // What waits to be sent, in order. A row goes once the destination accepted the
        // transaction that carried it; until then it survives restarts and crashes.
        tx.run(`CREATE TABLE federation_outbox (
          seq INTEGER PRIMARY KEY,
          destination TEXT NOT NULL,
          kind TEXT NOT NULL,
          json TEXT NOT NULL
        )`);
        tx.run('CREATE INDEX federation_outbox_by_destination ON federation_outbox (destination, seq)');
        // Transactions already processed, answered again with the same response (dedupe by origin and txn ID).
        tx.run(`CREATE TABLE federation_received_txns (
          origin TEXT NOT NULL,
          txn_id TEXT NOT NULL,
          response TEXT NOT NULL,
          received_ts INTEGER NOT NULL,
          PRIMARY KEY (origin, txn_id)
        )`);
      },
    },
    {
      version: 2,
      description: 'outbox sequence numbers are never reused',
      up: (tx) => {
        // A transaction's ID names its first and last seq. A plain INTEGER PRIMARY KEY reuses
        // numbers once the outbox drains, so an ID would repeat and the receiver, deduping by
        // it, would answer from its cache and drop what is new. AUTOINCREMENT never reuses.
        tx.run('ALTER TABLE federation_outbox RENAME TO federation_outbox_v1');
        tx.run(`CREATE TABLE federation_outbox (
          seq INTEGER PRIMARY KEY AUTOINCREMENT,
          destination TEXT NOT NULL,
          kind TEXT NOT NULL,
          json TEXT NOT NULL
        )`);
        tx.run('INSERT INTO federation_outbox (seq, destination, kind, json) SELECT seq, destination, kind, json FROM federation_outbox_v1');
        tx.run('DROP TABLE federation_outbox_v1');
        tx.run('CREATE INDEX federation_outbox_by_destination ON federation_outbox (destination, seq)');
      },
    },
    {
      version: 3,
      description: 'outbox PDU rows name their event, so a client can see which of its messages still wait',
      up: (tx) => {
        // A room v3+ PDU carries no event_id (it is its reference hash): the queue stores it beside the JSON.
        // Rows queued before this migration stay NULL; they are sent all the same.
        tx.run('ALTER TABLE federation_outbox ADD COLUMN event_id TEXT');
      },
    },
    {
      version: 4,
      description: 'outbox PDU rows name their sender and room, indexed, for the pending marks',
      up: (tx) => {
        // The page asks what its user's messages still wait for after each send and sync: an index
        // answers that, where reading the sender out of every row's JSON scanned the whole outbox.
        tx.run('ALTER TABLE federation_outbox ADD COLUMN sender TEXT');
        tx.run('ALTER TABLE federation_outbox ADD COLUMN room_id TEXT');
        tx.run("UPDATE federation_outbox SET sender = json_extract(json, '$.sender'), room_id = json_extract(json, '$.room_id') WHERE kind = 'pdu' AND event_id IS NOT NULL");
        tx.run('CREATE INDEX federation_outbox_by_sender ON federation_outbox (sender, seq) WHERE sender IS NOT NULL');
      },
    },
  ],
};
