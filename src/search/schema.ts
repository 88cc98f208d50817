import type { ComponentSchema } from '../storage/database.ts';

/**
 * The search component's tables: an FTS4 full-text index of the searchable fields of
 * room events (README.md says why FTS4 and which tokenizer), and beside it what a
 * query filters and orders by, keyed by the room engine's event nid (the FTS docid).
 */
export const searchSchema: ComponentSchema = {
  component: 'search',
  migrations: [
    {
      version: 1,
      description: 'full-text index (FTS4, unicode61) of content.body, content.name and content.topic',
      up: (tx) => {
        tx.run('CREATE VIRTUAL TABLE search_fts USING fts4(body, name, topic, tokenize=unicode61)');
        tx.run(`CREATE TABLE search_events (
          event_nid INTEGER PRIMARY KEY,
          event_id TEXT NOT NULL UNIQUE,
          room_id TEXT NOT NULL,
          sender TEXT NOT NULL,
          type TEXT NOT NULL,
          stream_ordering INTEGER NOT NULL
        )`);
        tx.run('CREATE INDEX search_events_by_room ON search_events (room_id, stream_ordering)');
        // Events stored before this component existed: the one time search reads the room
        // engine's table (rooms' schema is applied first), so an existing server's history is
        // searchable at once; from here on the engine's index hook fills the index.
        const text = (field: string) => `CASE WHEN json_type(json, '$.content.${field}') = 'text' AND json_extract(json, '$.content.${field}') <> '' THEN json_extract(json, '$.content.${field}') END`;
        const accepted = 'rejected IS NULL AND outlier = 0 AND soft_failed = 0 AND stream_ordering IS NOT NULL AND redacted_by IS NULL';
        tx.run(`INSERT INTO search_fts (docid, body, name, topic)
          SELECT event_nid, body, name, topic FROM (SELECT event_nid, ${text('body')} AS body, ${text('name')} AS name, ${text('topic')} AS topic FROM events WHERE ${accepted})
          WHERE body IS NOT NULL OR name IS NOT NULL OR topic IS NOT NULL`);
        tx.run(`INSERT INTO search_events (event_nid, event_id, room_id, sender, type, stream_ordering)
          SELECT event_nid, event_id, room_id, sender, type, stream_ordering FROM events WHERE event_nid IN (SELECT docid FROM search_fts)`);
      },
    },
  ],
};
