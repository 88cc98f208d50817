import { encodeBase64Url } from '../crypto/base64.ts';
import { utf8 } from '../crypto/canonical-json.ts';
import { randomString, randomToken, type RandomBytes } from '../crypto/random.ts';
import { sha256 } from '../crypto/sha256.ts';
import { byteLength, LOCALPART_PATTERN, MAX_ID_BYTES, serverNameOf } from '../events/identifiers.ts';
import type { Database, WriteTransaction } from '../storage/database.ts';
import { nextStreamId, type StreamNotify } from '../storage/stream.ts';
import { UsersError } from './errors.ts';
import { hashPassword, verifyPassword } from './password.ts';
import { defaultPushRules } from './push-rules.ts';
import { Pushers } from './pushers.ts';
import { PUSH_RULES_TYPE, PushRules } from './push-rule-edits.ts';
import { AccountData } from './account-data.ts';

export interface Session {
  userId: string;
  deviceId: string;
  /** Which access token authenticated it (its hash): what a pusher set with it belongs to. */
  tokenId?: string;
  /** A guest account's (`/register?kind=guest`): only the endpoints open to guests accept it. */
  isGuest?: boolean;
}

export interface Device {
  device_id: string;
  display_name: string | null;
  last_seen_ts: number | null;
  last_seen_ip: string | null;
}

export interface Profile {
  displayname?: string;
  avatar_url?: string;
}

export type ProfileField = keyof Profile;
const PROFILE_FIELDS: ProfileField[] = ['displayname', 'avatar_url'];

/** Where other servers' users' profiles come from (federation's client: /query/profile). */
export interface RemoteProfiles {
  queryProfile(server: string, userId: string, field?: ProfileField): Promise<Record<string, unknown>>;
}

/** Lets the keys component record device list changes in the same transaction as the device change. */
export interface DeviceListener {
  devicesAdded(tx: WriteTransaction, userId: string, deviceIds: string[]): void;
  devicesRemoved(tx: WriteTransaction, userId: string, deviceIds: string[]): void;
  /** Devices changed otherwise (renamed). */
  devicesChanged?(tx: WriteTransaction, userId: string, deviceIds: string[]): void;
  /** Called after the transaction that added or removed devices committed (to wake /sync). */
  devicesCommitted?(userId: string): void;
}

export interface UsersOptions {
  db: Database;
  serverName: string;
  now: () => number;
  random: RandomBytes;
  notify: StreamNotify;
  passwordIterations?: number;
}

const DEVICE_ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
/** How long an OpenID token is good for (Synapse: an hour). */
const OPENID_TOKEN_LIFETIME_MS = 60 * 60 * 1000;

const hashToken = (token: string) => encodeBase64Url(sha256(utf8(token)));

/** Accounts, devices, access tokens, profiles, account data and filters. */
export class Users {
  /**
   * Every erased account with the stream position of its erasure, read once: asked for the sender
   * of every event served, and only this server's accounts are ever erased, so it stays small.
   */
  private erased: Promise<Map<string, number>> | undefined;
  private readonly sessions = new Map<string, Session>();
  private readonly deviceListeners: DeviceListener[] = [];
  private readonly profileListeners: ((userId: string) => Promise<void>)[] = [];
  private readonly deactivationListeners: ((userId: string) => Promise<void>)[] = [];
  /** Pushers, each belonging to the access token that set it. */
  readonly pushers: Pushers;
  /** Account data (incl. tags, m.direct, the ignored users): global and per room. */
  readonly accountData: AccountData;
  readonly pushRules: PushRules;

  constructor(private readonly options: UsersOptions) {
    this.pushers = new Pushers(options.db, options.now);
    this.accountData = new AccountData(options.db, options.notify);
    this.pushRules = new PushRules(this.accountData);
  }

  addDeviceListener(listener: DeviceListener): void {
    this.deviceListeners.push(listener);
  }

  get serverName(): string {
    return this.options.serverName;
  }

  userId(localpart: string): string {
    return `@${localpart}:${this.options.serverName}`;
  }

  isLocal(userId: string): boolean {
    return userId.endsWith(':' + this.options.serverName);
  }

  /**
   * The user ID a new account's username asks for: lower-cased first, as Synapse and
   * Dendrite do (`Alice` registers `@alice`), then checked for the characters and
   * length new user IDs may have, and for being free.
   */
  async newAccountUserId(username: string): Promise<string> {
    const localpart = username.toLowerCase();
    if (!LOCALPART_PATTERN.test(localpart)) {
      throw new UsersError(400, 'M_INVALID_USERNAME', 'User ID may only contain a-z, 0-9, and . _ = - / +');
    }
    const userId = this.userId(localpart);
    if (byteLength(userId) > MAX_ID_BYTES) throw new UsersError(400, 'M_INVALID_USERNAME', 'User ID is too long');
    if (await this.exists(userId)) throw new UsersError(400, 'M_USER_IN_USE', 'User ID already taken');
    return userId;
  }

  async exists(userId: string): Promise<boolean> {
    return !!(await this.options.db.get('SELECT 1 FROM users WHERE user_id = ?', [userId]));
  }

  /** Whether any account was ever made here (a deactivated one counts): a host asks before it lets an archive replace everything. */
  async anyAccount(): Promise<boolean> {
    return !!(await this.options.db.get('SELECT 1 FROM users LIMIT 1'));
  }

  async isDeactivated(userId: string): Promise<boolean> {
    const row = await this.options.db.get<{ deactivated: number }>('SELECT deactivated FROM users WHERE user_id = ?', [userId]);
    return row?.deactivated === 1;
  }

  /** Creates an account; returns false when the user ID is taken. */
  async createAccount(userId: string, password: string | undefined): Promise<boolean> {
    const passwordHash = password === undefined ? null : await hashPassword(password, this.options.passwordIterations);
    const now = this.options.now();
    return this.options.db.transaction((tx) => {
      if (tx.get('SELECT 1 FROM users WHERE user_id = ?', [userId])) return false;
      tx.run('INSERT INTO users (user_id, password_hash, created_ts) VALUES (?, ?, ?)', [userId, passwordHash, now]);
      tx.run('INSERT INTO profiles (user_id, displayname) VALUES (?, ?)', [userId, userId.slice(1, userId.indexOf(':'))]);
      this.accountData.putTx(tx, userId, '', PUSH_RULES_TYPE, { global: defaultPushRules(userId) });
      return true;
    });
  }

  /**
   * A guest account (client-server §Guest access): no password, and a numeric localpart, as
   * Synapse gives them, the next one free (an ordinary account may have taken a number).
   */
  async createGuestAccount(): Promise<string> {
    const now = this.options.now();
    return this.options.db.transaction((tx) => {
      let number = tx.get<{ count: number }>('SELECT COUNT(*) AS count FROM users WHERE is_guest = 1')!.count + 1;
      while (tx.get('SELECT 1 FROM users WHERE user_id = ?', [this.userId(String(number))])) number++;
      const userId = this.userId(String(number));
      tx.run('INSERT INTO users (user_id, password_hash, created_ts, is_guest) VALUES (?, NULL, ?, 1)', [userId, now]);
      tx.run('INSERT INTO profiles (user_id, displayname) VALUES (?, ?)', [userId, String(number)]);
      this.accountData.putTx(tx, userId, '', PUSH_RULES_TYPE, { global: defaultPushRules(userId) });
      return userId;
    });
  }

  async isGuest(userId: string): Promise<boolean> {
    return (await this.options.db.get<{ is_guest: number }>('SELECT is_guest FROM users WHERE user_id = ?', [userId]))?.is_guest === 1;
  }

  /**
   * Makes a guest a full account with a password, keeping its user ID, rooms and devices
   * (`/register` with `guest_access_token`, as Synapse does). False when `userId` is no guest.
   */
  async upgradeGuest(userId: string, password: string | undefined): Promise<boolean> {
    const passwordHash = password === undefined ? null : await hashPassword(password, this.options.passwordIterations);
    const upgraded = await this.options.db.transaction((tx) => tx.run('UPDATE users SET is_guest = 0, password_hash = ? WHERE user_id = ? AND is_guest = 1', [passwordHash, userId]).changes > 0);
    // Cached sessions still say guest.
    if (upgraded) this.forgetSessions((s) => s.userId === userId);
    return upgraded;
  }

  async checkPassword(userId: string, password: string): Promise<boolean> {
    const row = await this.options.db.get<{ password_hash: string | null; deactivated: number }>(
      'SELECT password_hash, deactivated FROM users WHERE user_id = ?', [userId],
    );
    if (!row || row.deactivated || !row.password_hash) return false;
    return verifyPassword(password, row.password_hash);
  }

  async setPassword(userId: string, password: string): Promise<void> {
    const passwordHash = await hashPassword(password, this.options.passwordIterations);
    await this.options.db.transaction((tx) => tx.run('UPDATE users SET password_hash = ? WHERE user_id = ?', [passwordHash, userId]));
  }

  /** Creates (or reuses) a device and issues an access token for it. */
  async createSession(userId: string, deviceId: string | undefined, displayName: string | undefined): Promise<Session & { accessToken: string }> {
    const id = deviceId ?? randomString(this.options.random, 10, DEVICE_ID_ALPHABET);
    const token = randomToken(this.options.random);
    const now = this.options.now();
    const added = await this.options.db.transaction((tx) => {
      const existing = tx.get('SELECT 1 FROM devices WHERE user_id = ? AND device_id = ?', [userId, id]);
      if (!existing) {
        tx.run('INSERT INTO devices (user_id, device_id, display_name, created_ts, last_seen_ts) VALUES (?, ?, ?, ?, ?)', [
          userId, id, displayName ?? null, now, now,
        ]);
        for (const listener of this.deviceListeners) listener.devicesAdded(tx, userId, [id]);
      }
      tx.run('INSERT INTO access_tokens (token_hash, user_id, device_id, created_ts) VALUES (?, ?, ?, ?)', [hashToken(token), userId, id, now]);
      return !existing;
    });
    if (added) for (const listener of this.deviceListeners) listener.devicesCommitted?.(userId);
    return { userId, deviceId: id, accessToken: token, tokenId: hashToken(token) };
  }

  async authenticate(token: string): Promise<Session | undefined> {
    const hash = hashToken(token);
    const cached = this.sessions.get(hash);
    if (cached) return cached;
    const row = await this.options.db.get<{ user_id: string; device_id: string; is_guest: number | null }>(
      'SELECT t.user_id, t.device_id, u.is_guest FROM access_tokens t LEFT JOIN users u ON u.user_id = t.user_id WHERE t.token_hash = ?', [hash],
    );
    if (!row) return undefined;
    const session: Session = { userId: row.user_id, deviceId: row.device_id, tokenId: hash, ...(row.is_guest === 1 ? { isGuest: true } : {}) };
    if (this.sessions.size > 10_000) this.sessions.clear();
    this.sessions.set(hash, session);
    return session;
  }

  async logout(token: string): Promise<void> {
    const session = await this.authenticate(token);
    if (!session) return;
    await this.deleteDevices(session.userId, [session.deviceId]);
  }

  async logoutAll(userId: string): Promise<void> {
    const devices = await this.listDevices(userId);
    await this.deleteDevices(userId, devices.map((d) => d.device_id));
  }

  /** Deletes devices with their access tokens (logging them out) and the pushers those tokens set. */
  async deleteDevices(userId: string, deviceIds: string[]): Promise<void> {
    if (deviceIds.length === 0) return;
    const removedAny = await this.options.db.transaction((tx) => {
      const removed: string[] = [];
      for (const deviceId of deviceIds) {
        const tokens = tx.all<{ token_hash: string }>('SELECT token_hash FROM access_tokens WHERE user_id = ? AND device_id = ?', [userId, deviceId]);
        this.pushers.deleteForTokens(tx, userId, tokens.map((t) => t.token_hash));
        tx.run('DELETE FROM access_tokens WHERE user_id = ? AND device_id = ?', [userId, deviceId]);
        if (tx.run('DELETE FROM devices WHERE user_id = ? AND device_id = ?', [userId, deviceId]).changes > 0) removed.push(deviceId);
      }
      if (removed.length > 0) for (const listener of this.deviceListeners) listener.devicesRemoved(tx, userId, removed);
      return removed.length > 0;
    });
    this.forgetSessions((s) => s.userId === userId && deviceIds.includes(s.deviceId));
    if (removedAny) for (const listener of this.deviceListeners) listener.devicesCommitted?.(userId);
  }

  /**
   * Signs a user out everywhere but one session (a password change, as Synapse does):
   * every other device goes, and so do the session's device's other access tokens,
   * each with the pushers it set.
   */
  async revokeTokensExcept(userId: string, keep: Session): Promise<void> {
    const devices = (await this.listDevices(userId)).map((d) => d.device_id).filter((d) => d !== keep.deviceId);
    await this.deleteDevices(userId, devices);
    if (keep.tokenId === undefined) return;
    const tokenId = keep.tokenId;
    const revoked = await this.options.db.transaction((tx) => {
      const others = tx.all<{ token_hash: string }>(
        'SELECT token_hash FROM access_tokens WHERE user_id = ? AND device_id = ? AND token_hash != ?', [userId, keep.deviceId, tokenId],
      ).map((t) => t.token_hash);
      this.pushers.deleteForTokens(tx, userId, others);
      for (const hash of others) tx.run('DELETE FROM access_tokens WHERE token_hash = ?', [hash]);
      return new Set(others);
    });
    for (const [hash] of this.sessions) if (revoked.has(hash)) this.sessions.delete(hash);
  }

  private forgetSessions(predicate: (session: Session) => boolean): void {
    for (const [hash, session] of this.sessions) if (predicate(session)) this.sessions.delete(hash);
  }

  listDevices(userId: string): Promise<Device[]> {
    return this.options.db.all<Device & Record<string, string | number | null>>(
      'SELECT device_id, display_name, last_seen_ts, last_seen_ip FROM devices WHERE user_id = ? ORDER BY created_ts, device_id', [userId],
    );
  }

  getDevice(userId: string, deviceId: string): Promise<Device | undefined> {
    return this.options.db.get<Device & Record<string, string | number | null>>(
      'SELECT device_id, display_name, last_seen_ts, last_seen_ip FROM devices WHERE user_id = ? AND device_id = ?', [userId, deviceId],
    );
  }

  /** Updates a device's display name; false when there is no such device. */
  async renameDevice(userId: string, deviceId: string, displayName: string | null): Promise<boolean> {
    const renamed = await this.options.db.transaction((tx) => {
      const current = tx.get<{ display_name: string | null }>('SELECT display_name FROM devices WHERE user_id = ? AND device_id = ?', [userId, deviceId]);
      if (!current) return false;
      if (current.display_name === displayName) return true;
      tx.run('UPDATE devices SET display_name = ? WHERE user_id = ? AND device_id = ?', [displayName, userId, deviceId]);
      // Other servers show device names: a rename is a device list change.
      for (const listener of this.deviceListeners) listener.devicesChanged?.(tx, userId, [deviceId]);
      return 'changed';
    });
    if (renamed === 'changed') for (const listener of this.deviceListeners) listener.devicesCommitted?.(userId);
    return renamed !== false;
  }

  /**
   * Deactivates an account: signed out everywhere, no password. With `erase`, its profile
   * goes too and the erasure's stream position is kept: what the user said is then served
   * redacted to those who were not there (client-server §Account deactivation; src/sync). The
   * deactivation listeners run first (the composition root has the account leave its rooms).
   */
  async deactivate(userId: string, options: { erase?: boolean } = {}): Promise<void> {
    for (const listener of this.deactivationListeners) await listener(userId);
    await this.logoutAll(userId);
    await this.options.db.transaction((tx) => {
      tx.run('UPDATE users SET deactivated = 1, password_hash = NULL WHERE user_id = ?', [userId]);
      if (options.erase) {
        tx.run('DELETE FROM profiles WHERE user_id = ?', [userId]);
        tx.run('INSERT OR REPLACE INTO erased_users (user_id, erased_stream) VALUES (?, ?)', [userId, nextStreamId(tx)]);
      }
    });
    if (options.erase) this.erased = undefined;
  }

  /**
   * A short-lived OpenID token (client-server §OpenID): proof of the user's identity that a
   * widget or integration manager exchanges through federation's `/openid/userinfo`. Stored
   * hashed, like access tokens; it grants nothing on the client API.
   */
  async createOpenIdToken(userId: string): Promise<{ token: string; expiresInMs: number }> {
    const token = randomToken(this.options.random);
    const now = this.options.now();
    await this.options.db.transaction((tx) => {
      tx.run('DELETE FROM openid_tokens WHERE expires_ts <= ?', [now]);
      tx.run('INSERT INTO openid_tokens (token_hash, user_id, expires_ts) VALUES (?, ?, ?)', [hashToken(token), userId, now + OPENID_TOKEN_LIFETIME_MS]);
    });
    return { token, expiresInMs: OPENID_TOKEN_LIFETIME_MS };
  }

  /** The user an unexpired OpenID token was issued to. */
  async openIdUser(token: string): Promise<string | undefined> {
    const row = await this.options.db.get<{ user_id: string; expires_ts: number }>('SELECT user_id, expires_ts FROM openid_tokens WHERE token_hash = ?', [hashToken(token)]);
    return row && row.expires_ts > this.options.now() ? row.user_id : undefined;
  }

  /**
   * Federation's `/openid/userinfo` answer for a token: `{ sub }`, or 401 with Synapse's codes, which the spec's
   * example follows: `M_MISSING_TOKEN` when there is none, `M_UNKNOWN_TOKEN` when it is unknown or expired.
   */
  async openIdUserinfo(token: string | undefined): Promise<{ sub: string }> {
    if (!token) throw new UsersError(401, 'M_MISSING_TOKEN', 'access_token is required');
    const userId = await this.openIdUser(token);
    if (!userId) throw new UsersError(401, 'M_UNKNOWN_TOKEN', 'The OpenID token is unknown or has expired');
    return { sub: userId };
  }

  /** The stream position an account was erased at, if it was. */
  async erasedAt(userId: string): Promise<number | undefined> {
    this.erased ??= this.options.db.all<{ user_id: string; erased_stream: number }>('SELECT user_id, erased_stream FROM erased_users')
      .then((rows) => new Map(rows.map((row) => [row.user_id, row.erased_stream])));
    const erased = this.erased;
    erased.catch(() => {
      if (this.erased === erased) this.erased = undefined; // read again next time
    });
    return (await erased).get(userId);
  }

  // Profiles

  async getProfile(userId: string): Promise<Profile | undefined> {
    const row = await this.options.db.get<{ displayname: string | null; avatar_url: string | null }>(
      'SELECT displayname, avatar_url FROM profiles WHERE user_id = ?', [userId],
    );
    if (!row) return undefined;
    const profile: Profile = {};
    if (row.displayname !== null) profile.displayname = row.displayname;
    if (row.avatar_url !== null) profile.avatar_url = row.avatar_url;
    return profile;
  }

  /**
   * Any user's profile: ours from our table, another server's user from that server
   * (only `field`, when given). Its errors (a 404 included) are the caller's to report.
   */
  async lookupProfile(userId: string, remote: RemoteProfiles, field?: ProfileField): Promise<Profile | undefined> {
    if (this.isLocal(userId)) return this.getProfile(userId);
    const answer = await remote.queryProfile(serverNameOf(userId), userId, field);
    const profile: Profile = {};
    for (const name of field ? [field] : PROFILE_FIELDS) {
      const value = answer[name];
      if (typeof value === 'string') profile[name] = value;
    }
    return profile;
  }

  /** Listens for accounts about to be deactivated; the deactivation goes on once every listener is done. */
  onDeactivate(listener: (userId: string) => Promise<void>): void {
    this.deactivationListeners.push(listener);
  }

  /** Listens to local users' profile changes; the change is answered once every listener is done. */
  onProfileChange(listener: (userId: string) => Promise<void>): void {
    this.profileListeners.push(listener);
  }

  async setProfileField(userId: string, field: 'displayname' | 'avatar_url', value: string | null): Promise<void> {
    await this.options.db.transaction((tx) => tx.run(`UPDATE profiles SET ${field} = ? WHERE user_id = ?`, [value, userId]));
    for (const listener of this.profileListeners) await listener(userId);
  }

  // Filters

  async createFilter(userId: string, filter: object): Promise<string> {
    return this.options.db.transaction((tx) => {
      const row = tx.get<{ next: number }>('SELECT COALESCE(MAX(filter_id), -1) + 1 AS next FROM filters WHERE user_id = ?', [userId]);
      const id = row!.next;
      tx.run('INSERT INTO filters (user_id, filter_id, filter) VALUES (?, ?, ?)', [userId, id, JSON.stringify(filter)]);
      return String(id);
    });
  }

  async getFilter(userId: string, filterId: string): Promise<Record<string, unknown> | undefined> {
    if (!/^\d+$/.test(filterId)) return undefined;
    const row = await this.options.db.get<{ filter: string }>('SELECT filter FROM filters WHERE user_id = ? AND filter_id = ?', [userId, Number(filterId)]);
    return row ? (JSON.parse(row.filter) as Record<string, unknown>) : undefined;
  }
}
