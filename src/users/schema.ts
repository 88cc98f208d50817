import type { ComponentSchema } from '../storage/database.ts';

export const usersSchema: ComponentSchema = {
  component: 'users',
  migrations: [
    {
      version: 1,
      description: 'accounts, devices, access tokens, profiles, account data, filters',
      up: (tx) => {
        tx.run(`CREATE TABLE users (
          user_id TEXT PRIMARY KEY,
          password_hash TEXT,
          created_ts INTEGER NOT NULL,
          deactivated INTEGER NOT NULL DEFAULT 0
        )`);
        tx.run(`CREATE TABLE devices (
          user_id TEXT NOT NULL,
          device_id TEXT NOT NULL,
          display_name TEXT,
          created_ts INTEGER NOT NULL,
          last_seen_ts INTEGER,
          last_seen_ip TEXT,
          PRIMARY KEY (user_id, device_id)
        )`);
        // Only a hash of each token is stored: a copied database does not hand out sessions.
        tx.run(`CREATE TABLE access_tokens (
          token_hash TEXT PRIMARY KEY,
          user_id TEXT NOT NULL,
          device_id TEXT NOT NULL,
          created_ts INTEGER NOT NULL
        )`);
        tx.run('CREATE INDEX access_tokens_by_device ON access_tokens (user_id, device_id)');
        tx.run(`CREATE TABLE profiles (
          user_id TEXT PRIMARY KEY,
          displayname TEXT,
          avatar_url TEXT
        )`);
        // room_id '' holds global account data.
        tx.run(`CREATE TABLE account_data (
          user_id TEXT NOT NULL,
          room_id TEXT NOT NULL,
          type TEXT NOT NULL,
          content TEXT NOT NULL,
          stream_id INTEGER NOT NULL,
          PRIMARY KEY (user_id, room_id, type)
        )`);
        tx.run('CREATE INDEX account_data_by_stream ON account_data (user_id, stream_id)');
        tx.run(`CREATE TABLE filters (
          user_id TEXT NOT NULL,
          filter_id INTEGER NOT NULL,
          filter TEXT NOT NULL,
          PRIMARY KEY (user_id, filter_id)
        )`);
      },
    },
    {
      version: 2,
      description: 'pushers, each kept with the access token that set it',
      up: (tx) => {
        tx.run(`CREATE TABLE pushers (
          user_id TEXT NOT NULL,
          app_id TEXT NOT NULL,
          pushkey TEXT NOT NULL,
          token_hash TEXT,
          kind TEXT NOT NULL,
          app_display_name TEXT NOT NULL,
          device_display_name TEXT NOT NULL,
          profile_tag TEXT,
          lang TEXT NOT NULL,
          data TEXT NOT NULL,
          created_ts INTEGER NOT NULL,
          PRIMARY KEY (user_id, app_id, pushkey)
        )`);
        tx.run('CREATE INDEX pushers_by_key ON pushers (app_id, pushkey)');
        tx.run('CREATE INDEX pushers_by_token ON pushers (user_id, token_hash)');
      },
    },
    {
      version: 3,
      description: 'erased accounts: the stream position of the erasure',
      up: (tx) => {
        // Who joins a room after this position no longer sees what the user said there.
        tx.run('CREATE TABLE erased_users (user_id TEXT PRIMARY KEY, erased_stream INTEGER NOT NULL) WITHOUT ROWID');
      },
    },
    {
      version: 4,
      description: 'OpenID tokens, which other services exchange for the user ID',
      up: (tx) => {
        tx.run('CREATE TABLE openid_tokens (token_hash TEXT PRIMARY KEY, user_id TEXT NOT NULL, expires_ts INTEGER NOT NULL) WITHOUT ROWID');
      },
    },
    {
      version: 5,
      description: 'guest accounts',
      up: (tx) => void tx.run('ALTER TABLE users ADD COLUMN is_guest INTEGER NOT NULL DEFAULT 0'),
    },
  ],
};
