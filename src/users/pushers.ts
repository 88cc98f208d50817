import { utf8 } from '../crypto/canonical-json.ts';
import type { Database, WriteTransaction } from '../storage/database.ts';
import { UsersError } from './errors.ts';

// Pushers (client-server modules/push: GET /pushers, POST /pushers/set). A pusher
// belongs to the access token that set it and goes when that token does (a
// logout, a deleted device, a password change that signs other sessions out),
// as in Synapse. Hosts that can reach push gateways deliver to them (src/sync/push-delivery.ts).

/** A pusher as GET /pushers lists it. */
export interface Pusher {
  pushkey: string;
  kind: string;
  app_id: string;
  app_display_name: string;
  device_display_name: string;
  profile_tag?: string;
  lang: string;
  data: Record<string, unknown>;
}

const MAX_PUSHKEY_BYTES = 512;
const MAX_APP_ID_CHARS = 64;
const NOTIFY_PATH = '/_matrix/push/v1/notify';

type PusherRow = {
  pushkey: string;
  kind: string;
  app_id: string;
  app_display_name: string;
  device_display_name: string;
  profile_tag: string | null;
  lang: string;
  data: string;
};

const missing = (names: string[]) => new UsersError(400, 'M_MISSING_PARAM', `Missing parameters: ${names.join(', ')}`);
const invalid = (message: string) => new UsersError(400, 'M_INVALID_PARAM', message);

export class Pushers {
  constructor(
    private readonly db: Database,
    private readonly now: () => number,
  ) {}

  async list(userId: string): Promise<Pusher[]> {
    return (await this.forDelivery(userId)).map(({ pushkey_ts: _, ...pusher }) => pusher);
  }

  /** A user's pushers with what delivery needs besides: when each was set (`pushkey_ts`, in seconds). */
  async forDelivery(userId: string): Promise<(Pusher & { pushkey_ts: number })[]> {
    const rows = await this.db.all<PusherRow & { created_ts: number } & Record<string, string | number | null>>(
      `SELECT pushkey, kind, app_id, app_display_name, device_display_name, profile_tag, lang, data, created_ts
       FROM pushers WHERE user_id = ? ORDER BY rowid`,
      [userId],
    );
    return rows.map((row) => {
      const pusher: Pusher & { pushkey_ts: number } = {
        pushkey: row.pushkey, kind: row.kind, app_id: row.app_id, app_display_name: row.app_display_name,
        device_display_name: row.device_display_name, lang: row.lang, data: JSON.parse(row.data) as Record<string, unknown>,
        pushkey_ts: Math.floor(row.created_ts / 1000),
      };
      if (row.profile_tag !== null) pusher.profile_tag = row.profile_tag;
      return pusher;
    });
  }

  /**
   * Creates, updates or (with `kind: null`) deletes the user's pusher for an app and
   * pushkey (POST /pushers/set). `tokenId` is the access token setting it. Without
   * `append`, the same app and pushkey is taken from any other user.
   */
  async set(userId: string, tokenId: string | undefined, request: Record<string, unknown>): Promise<void> {
    const absent = ['kind', 'app_id', 'pushkey'].filter((name) => !(name in request));
    if (absent.length > 0) throw missing(absent);
    const { kind, app_id: appId, pushkey } = request;
    if (typeof appId !== 'string' || typeof pushkey !== 'string') throw new UsersError(400, 'M_BAD_JSON', 'app_id and pushkey must be strings');
    if (utf8(pushkey).length > MAX_PUSHKEY_BYTES) throw invalid(`pushkey is longer than ${MAX_PUSHKEY_BYTES} bytes`);
    if (appId.length > MAX_APP_ID_CHARS) throw invalid(`app_id is longer than ${MAX_APP_ID_CHARS} characters`);
    if (kind === null) {
      await this.db.transaction((tx) => tx.run('DELETE FROM pushers WHERE user_id = ? AND app_id = ? AND pushkey = ?', [userId, appId, pushkey]));
      return;
    }
    if (typeof kind !== 'string') throw new UsersError(400, 'M_BAD_JSON', 'kind must be a string or null');
    const needed = ['app_display_name', 'device_display_name', 'lang', 'data'].filter((name) => request[name] === undefined || request[name] === null);
    if (needed.length > 0) throw missing(needed);
    for (const name of ['app_display_name', 'device_display_name', 'lang']) {
      if (typeof request[name] !== 'string') throw new UsersError(400, 'M_BAD_JSON', `${name} must be a string`);
    }
    const profileTag = request['profile_tag'];
    if (profileTag !== undefined && typeof profileTag !== 'string') throw new UsersError(400, 'M_BAD_JSON', 'profile_tag must be a string');
    const data = request['data'];
    if (typeof data !== 'object' || data === null || Array.isArray(data)) throw new UsersError(400, 'M_BAD_JSON', 'data must be an object');
    if (kind !== 'http') throw invalid(`pushers of kind ${JSON.stringify(kind)} are not supported; use http`);
    checkGatewayUrl((data as Record<string, unknown>)['url']);
    const append = request['append'] === true;
    await this.db.transaction((tx) => {
      if (!append) tx.run('DELETE FROM pushers WHERE app_id = ? AND pushkey = ? AND user_id != ?', [appId, pushkey, userId]);
      tx.run(
        `INSERT INTO pushers (user_id, app_id, pushkey, token_hash, kind, app_display_name, device_display_name, profile_tag, lang, data, created_ts)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (user_id, app_id, pushkey) DO UPDATE SET token_hash = excluded.token_hash, kind = excluded.kind,
           app_display_name = excluded.app_display_name, device_display_name = excluded.device_display_name,
           profile_tag = excluded.profile_tag, lang = excluded.lang, data = excluded.data`,
        [
          userId, appId, pushkey, tokenId ?? null, kind, request['app_display_name'] as string, request['device_display_name'] as string,
          (profileTag as string | undefined) ?? null, request['lang'] as string, JSON.stringify(data), this.now(),
        ],
      );
    });
  }

  /** The profile tag of a pusher the access token set (`tokenId`, its hash), if it gave one. */
  async profileTagOf(userId: string, tokenId: string | undefined): Promise<string | undefined> {
    if (tokenId === undefined) return undefined;
    const row = await this.db.get<{ profile_tag: string }>('SELECT profile_tag FROM pushers WHERE user_id = ? AND token_hash = ? AND profile_tag IS NOT NULL ORDER BY rowid LIMIT 1', [userId, tokenId]);
    return row?.profile_tag;
  }

  /** Removes a pusher its gateway rejected. */
  async remove(userId: string, appId: string, pushkey: string): Promise<void> {
    await this.db.transaction((tx) => tx.run('DELETE FROM pushers WHERE user_id = ? AND app_id = ? AND pushkey = ?', [userId, appId, pushkey]));
  }

  /** Deletes the pushers the given access tokens set, inside the transaction that deletes the tokens. */
  deleteForTokens(tx: WriteTransaction, userId: string, tokenIds: string[]): void {
    for (const tokenId of tokenIds) tx.run('DELETE FROM pushers WHERE user_id = ? AND token_hash = ?', [userId, tokenId]);
  }
}

/** An HTTP pusher's push gateway: an http(s) URL whose path is the notify endpoint (client-server PusherData.url). */
function checkGatewayUrl(url: unknown): void {
  if (url === undefined || url === null) throw missing(['data.url']);
  if (typeof url !== 'string') throw new UsersError(400, 'M_BAD_JSON', 'data.url must be a string');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid('data.url is not a URL');
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw invalid('data.url must be an HTTPS URL');
  if (parsed.pathname !== NOTIFY_PATH) throw invalid(`data.url must have the path ${NOTIFY_PATH}`);
}
