/**
 * Other servers' verify keys, kept durably: each key with how long it may be used, and the
 * signed document it came in, which a notary serves again (countersigned) when its server
 * cannot be reached.
 */
import type { JsonObject } from '../crypto/canonical-json.ts';
import type { ComponentSchema, Database } from '../storage/database.ts';

export interface StoredServerKey {
  serverName: string;
  keyId: string;
  /** Unpadded base64. */
  key: string;
  /** A current key: usable until then (the lesser of its document's valid_until_ts and 7 days after it was fetched). */
  validUntilTs: number;
  /** An old key: usable for events signed before this; null for a current key. */
  expiredTs: number | null;
  fetchedTs: number;
}

export interface ServerKeyStore {
  keysOf(serverName: string): Promise<StoredServerKey[]>;
  /** The signed documents last seen for a server, newest first, with their own valid_until_ts. */
  documentsOf(serverName: string): Promise<JsonObject[]>;
  /** Keeps a verified document's keys; a key it does not list stays as it was. */
  save(serverName: string, keys: StoredServerKey[], document: JsonObject): Promise<void>;
}

export const serverKeysSchema: ComponentSchema = {
  component: 'server_keys',
  migrations: [
    {
      version: 1,
      description: "other servers' verify keys and the signed documents they came in",
      up: (tx) => {
        tx.run(`CREATE TABLE server_keys (
          server_name TEXT NOT NULL,
          key_id TEXT NOT NULL,
          key TEXT NOT NULL,
          valid_until_ts INTEGER NOT NULL,
          expired_ts INTEGER,
          fetched_ts INTEGER NOT NULL,
          document TEXT NOT NULL,
          PRIMARY KEY (server_name, key_id)
        )`);
      },
    },
  ],
};

interface KeyRow {
  [column: string]: string | number | null;
  server_name: string;
  key_id: string;
  key: string;
  valid_until_ts: number;
  expired_ts: number | null;
  fetched_ts: number;
  document: string;
}

/** The store on the homeserver's database (give `serverKeysSchema` to the database with the others). */
export class SqlServerKeyStore implements ServerKeyStore {
  constructor(private readonly db: Database) {}

  async keysOf(serverName: string): Promise<StoredServerKey[]> {
    const rows = await this.db.all<KeyRow>('SELECT * FROM server_keys WHERE server_name = ?', [serverName]);
    return rows.map((r) => ({ serverName: r.server_name, keyId: r.key_id, key: r.key, validUntilTs: r.valid_until_ts, expiredTs: r.expired_ts, fetchedTs: r.fetched_ts }));
  }

  async documentsOf(serverName: string): Promise<JsonObject[]> {
    const rows = await this.db.all<{ document: string; fetched: number }>(
      'SELECT document, MAX(fetched_ts) AS fetched FROM server_keys WHERE server_name = ? GROUP BY document ORDER BY fetched DESC',
      [serverName],
    );
    return rows.map((r) => JSON.parse(r.document) as JsonObject);
  }

  async save(serverName: string, keys: StoredServerKey[], document: JsonObject): Promise<void> {
    const json = JSON.stringify(document);
    await this.db.transaction((tx) => {
      for (const k of keys) {
        tx.run(
          `INSERT INTO server_keys (server_name, key_id, key, valid_until_ts, expired_ts, fetched_ts, document) VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (server_name, key_id) DO UPDATE SET key = excluded.key, valid_until_ts = excluded.valid_until_ts,
             expired_ts = excluded.expired_ts, fetched_ts = excluded.fetched_ts, document = excluded.document`,
          [serverName, k.keyId, k.key, k.validUntilTs, k.expiredTs, k.fetchedTs, json],
        );
      }
    });
  }
}
