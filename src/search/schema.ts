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
      },
    },
    {
      version: 2,
      description: 'the first index of the events stored before search existed, still to build',
      // Built at start from the room engine's API (SearchIndex.buildFirstIndex), never by reading its
      // table here: through_nid is how far it has got, and the row goes once it is done. Version 1
      // once read the events table itself; on a server that ran that, the first index finds every
      // event already there and adds nothing.
      up: (tx) => {
        tx.run('CREATE TABLE search_first_index (through_nid INTEGER NOT NULL)');
        tx.run('INSERT INTO search_first_index (through_nid) VALUES (0)');
      },
    },
  ],
};
