import type { ComponentSchema } from '../storage/database.ts';

export const keysSchema: ComponentSchema = {
  component: 'keys',
  migrations: [
    {
      version: 1,
      description: 'device keys, one-time and fallback keys, cross-signing keys and signatures, key changes, to-device messages, key backup',
      up: (tx) => {
        // The device keys exactly as the device uploaded and signed them (without `unsigned`).
        tx.run(`CREATE TABLE device_keys (
          user_id TEXT NOT NULL,
          device_id TEXT NOT NULL,
          key_json TEXT NOT NULL,
          PRIMARY KEY (user_id, device_id)
        )`);
        // seq orders keys by upload, so /keys/claim hands out the oldest first.
        tx.run(`CREATE TABLE one_time_keys (
          seq INTEGER PRIMARY KEY,
          user_id TEXT NOT NULL,
          device_id TEXT NOT NULL,
          algorithm TEXT NOT NULL,
          key_id TEXT NOT NULL,
          key_json TEXT NOT NULL,
          UNIQUE (user_id, device_id, algorithm, key_id)
        )`);
        tx.run('CREATE INDEX one_time_keys_by_age ON one_time_keys (user_id, device_id, algorithm, seq)');
        // At most one fallback key per device and algorithm (MSC2732); `used` once claimed.
        tx.run(`CREATE TABLE fallback_keys (
          user_id TEXT NOT NULL,
          device_id TEXT NOT NULL,
          algorithm TEXT NOT NULL,
          key_id TEXT NOT NULL,
          key_json TEXT NOT NULL,
          used INTEGER NOT NULL DEFAULT 0,
          PRIMARY KEY (user_id, device_id, algorithm)
        )`);
        // key_type: master, self_signing or user_signing.
        tx.run(`CREATE TABLE cross_signing_keys (
          user_id TEXT NOT NULL,
          key_type TEXT NOT NULL,
          public_key TEXT NOT NULL,
          key_json TEXT NOT NULL,
          PRIMARY KEY (user_id, key_type)
        )`);
        // Signatures uploaded after the key itself (/keys/signatures/upload). target_key_id is a
        // device ID or a cross-signing public key; signer_key_id is `ed25519:<key>`.
        tx.run(`CREATE TABLE key_signatures (
          target_user_id TEXT NOT NULL,
          target_key_id TEXT NOT NULL,
          signer_user_id TEXT NOT NULL,
          signer_key_id TEXT NOT NULL,
          signature TEXT NOT NULL,
          PRIMARY KEY (target_user_id, target_key_id, signer_user_id, signer_key_id)
        )`);
        // What /sync device_lists.changed and /keys/changes read: user_id's keys changed at
        // stream_id. audience NULL: everyone sharing a room with user_id should hear of it;
        // otherwise only that user (user-signing keys and the signatures they make).
        tx.run(`CREATE TABLE key_changes (
          stream_id INTEGER NOT NULL,
          user_id TEXT NOT NULL,
          kind TEXT NOT NULL,
          audience TEXT
        )`);
        tx.run('CREATE INDEX key_changes_by_stream ON key_changes (stream_id)');
        // The outbound device list stream for federation (m.device_list_update EDUs): one row
        // per change of a local device, chained per user by prev_id.
        tx.run(`CREATE TABLE device_list_stream (
          stream_id INTEGER PRIMARY KEY,
          user_id TEXT NOT NULL,
          device_id TEXT NOT NULL,
          prev_id INTEGER,
          deleted INTEGER NOT NULL
        )`);
        tx.run('CREATE INDEX device_list_stream_by_user ON device_list_stream (user_id, stream_id)');
        // Pending to-device messages, in arrival order (id). delivered_at is the stream position
        // of the /sync response that last carried the message; a later sync from at least that
        // position acknowledges it and it is deleted.
        tx.run(`CREATE TABLE to_device_messages (
          id INTEGER PRIMARY KEY,
          user_id TEXT NOT NULL,
          device_id TEXT NOT NULL,
          stream_id INTEGER NOT NULL,
          sender TEXT NOT NULL,
          type TEXT NOT NULL,
          content TEXT NOT NULL,
          delivered_at INTEGER
        )`);
        tx.run('CREATE INDEX to_device_by_device ON to_device_messages (user_id, device_id, id)');
        tx.run(`CREATE TABLE to_device_txns (
          user_id TEXT NOT NULL,
          device_id TEXT NOT NULL,
          txn_id TEXT NOT NULL,
          PRIMARY KEY (user_id, device_id, txn_id)
        )`);
        // Key backup versions are numbered per user; deleted ones stay (flagged) so numbers are never reused.
        tx.run(`CREATE TABLE backup_versions (
          user_id TEXT NOT NULL,
          version INTEGER NOT NULL,
          algorithm TEXT NOT NULL,
          auth_data TEXT NOT NULL,
          etag INTEGER NOT NULL DEFAULT 0,
          deleted INTEGER NOT NULL DEFAULT 0,
          PRIMARY KEY (user_id, version)
        )`);
        tx.run(`CREATE TABLE backup_keys (
          user_id TEXT NOT NULL,
          version INTEGER NOT NULL,
          room_id TEXT NOT NULL,
          session_id TEXT NOT NULL,
          first_message_index INTEGER NOT NULL,
          forwarded_count INTEGER NOT NULL,
          is_verified INTEGER NOT NULL,
          session_data TEXT NOT NULL,
          PRIMARY KEY (user_id, version, room_id, session_id)
        )`);
      },
    },
    {
      version: 2,
      description: 'to-device messages received from other servers, by message ID',
      up: (tx) => {
        // An m.direct_to_device EDU may come again (a retried transaction): deliver it once.
        tx.run(`CREATE TABLE to_device_received (
          origin TEXT NOT NULL,
          message_id TEXT NOT NULL,
          PRIMARY KEY (origin, message_id)
        )`);
      },
    },
    {
      version: 3,
      description: 'device lists of users on other servers',
      up: (tx) => {
        // One row per remote user we share a room with: their server's stream ID we are at,
        // whether we may have missed updates (stale), and the list as JSON (devices with
        // keys and names, master and self-signing keys), replaced whole on a resync.
        tx.run(`CREATE TABLE remote_device_lists (
          user_id TEXT PRIMARY KEY,
          stream_id INTEGER NOT NULL,
          stale INTEGER NOT NULL,
          list_json TEXT NOT NULL
        )`);
        tx.run('CREATE INDEX remote_device_lists_stale ON remote_device_lists (stale)');
      },
    },
  ],
};
