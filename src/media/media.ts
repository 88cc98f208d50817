import { randomString, type RandomBytes } from '../crypto/random.ts';
import { isValidServerName } from '../events/identifiers.ts';
import type { Database } from '../storage/database.ts';
import { CodedError } from '../util/coded-error.ts';
import type { MediaStore } from './store.ts';
import { THUMBNAILABLE_TYPES, type ThumbnailMethod, type Thumbnailer } from './thumbnailer.ts';
import { baseContentType, chooseThumbnailSize, DEFAULT_MEDIA_CONFIG, type MediaConfig } from './config.ts';

/** A refusal, with the spec's status and errcode (an API answers it as that Matrix error). */
export class MediaError extends CodedError {
  override name = 'MediaError';
}

const notFound = (message: string) => new MediaError(404, 'M_NOT_FOUND', message);

/** A transport that refused an oversized answer (p2p's ResponseTooLarge, by name: media sits below p2p) means 502 M_TOO_LARGE. */
const tooLargeToFetch = (error: unknown): never => {
  if (error instanceof Error && error.name === 'ResponseTooLarge') throw new MediaError(502, 'M_TOO_LARGE', `the remote content is too large to fetch: ${error.message}`);
  throw error;
};

/** Media as served: the bytes, their type and the name they were uploaded with. */
export interface MediaContent {
  bytes: Uint8Array;
  contentType: string;
  uploadName?: string;
}

/** How remote media is fetched from its origin (the federation client, in the composition root). */
export interface RemoteMediaFetcher {
  download(serverName: string, mediaId: string, options: { timeoutMs: number }): Promise<MediaContent>;
  thumbnail(serverName: string, mediaId: string, query: { width: number; height: number; method: ThumbnailMethod; timeoutMs: number }): Promise<MediaContent>;
}

export interface MediaOptions {
  db: Database;
  store: MediaStore;
  /** Without one, thumbnails of local media are refused (400) and remote ones are asked of their origin. */
  thumbnailer?: Thumbnailer;
  remote?: RemoteMediaFetcher;
  serverName: string;
  random: RandomBytes;
  now: () => number;
  config?: Partial<MediaConfig>;
  log?: (message: string, error?: unknown) => void;
}

interface MediaRow {
  server_name: string;
  media_id: string;
  user_id: string | null;
  content_type: string | null;
  upload_name: string | null;
  size: number;
  blob_key: string | null;
  uploaded_ts: number | null;
  expires_ts: number | null;
  last_access_ts: number;
  remote: number;
  [column: string]: string | number | null;
}

interface ThumbnailRow {
  width: number;
  height: number;
  method: string;
  content_type: string;
  size: number;
  blob_key: string;
  [column: string]: string | number;
}

/** The spec's media ID grammar (client-server §Matrix Content URIs). */
const MEDIA_ID = /^[A-Za-z0-9_-]{1,255}$/;
const BLOB_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const MEDIA_ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** A last-access time is rewritten at most this often (each rewrite is a durable write). */
const ACCESS_TOUCH_MS = 60_000;

/**
 * The media repository (client-server §Content repository, server-server §Content
 * repository): uploads, downloads, thumbnails, limits and the cache of remote media.
 * Metadata lives in the database; the bytes in the injected MediaStore, written
 * durably before the metadata that names them (a crash leaves at worst an orphan
 * blob, never a row without its bytes).
 */
export class Media {
  readonly config: MediaConfig;
  readonly serverName: string;
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly inFlight = new Map<string, Promise<unknown>>();

  constructor(private readonly options: MediaOptions) {
    this.config = { ...DEFAULT_MEDIA_CONFIG, ...options.config };
    this.serverName = options.serverName;
  }

  private get db(): Database {
    return this.options.db;
  }

  private blobKey(): string {
    return randomString(this.options.random, 26, BLOB_ALPHABET);
  }

  checkIds(serverName: string, mediaId: string): void {
    if (!isValidServerName(serverName)) throw notFound(`invalid server name ${JSON.stringify(serverName)}`);
    if (!MEDIA_ID.test(mediaId)) throw notFound(`invalid media ID ${JSON.stringify(mediaId)}`);
  }

  // ------------------------------------------------------------------ upload

  /** POST /media/v1/create: an mxc:// URI whose content comes later. */
  async create(userId: string): Promise<{ contentUri: string; unusedExpiresAt: number }> {
    const now = this.options.now();
    const mediaId = randomString(this.options.random, 24, MEDIA_ID_ALPHABET);
    const expires = now + this.config.unusedIdExpiryMs;
    await this.db.transaction((tx) => {
      tx.run('DELETE FROM media WHERE remote = 0 AND uploaded_ts IS NULL AND expires_ts < ?', [now]);
      const pending = tx.get<{ n: number }>('SELECT COUNT(*) AS n FROM media WHERE remote = 0 AND user_id = ? AND uploaded_ts IS NULL', [userId])!.n;
      if (pending >= this.config.maxPendingIdsPerUser) {
        throw new MediaError(429, 'M_LIMIT_EXCEEDED', `${pending} media IDs are already waiting for their content`, { retry_after_ms: 60_000 });
      }
      tx.run(
        'INSERT INTO media (server_name, media_id, user_id, created_ts, expires_ts, last_access_ts, remote) VALUES (?, ?, ?, ?, ?, ?, 0)',
        [this.serverName, mediaId, userId, now, expires, now],
      );
    });
    return { contentUri: `mxc://${this.serverName}/${mediaId}`, unusedExpiresAt: expires };
  }

  /** Refusals that need no bytes: the type and the size. */
  checkUpload(contentType: string, size: number): void {
    const type = baseContentType(contentType);
    const kind = type.split('/')[0] + '/*';
    if (this.config.refusedContentTypes.some((refused) => refused.toLowerCase() === type || refused.toLowerCase() === kind)) {
      throw new MediaError(403, 'M_FORBIDDEN', `this server does not accept ${type} content`);
    }
    if (size > this.config.maxUploadBytes) throw new MediaError(413, 'M_TOO_LARGE', `uploads are limited to ${this.config.maxUploadBytes} bytes`);
  }

  /**
   * Stores an upload: a new media ID (POST /upload) or the content of one made by
   * /create (PUT /upload/{serverName}/{mediaId}). Resolves once bytes and metadata are durable.
   */
  async upload(userId: string, content: MediaContent, target?: { serverName: string; mediaId: string }): Promise<{ contentUri: string }> {
    this.checkUpload(content.contentType, content.bytes.byteLength);
    const now = this.options.now();
    if (target) {
      this.checkIds(target.serverName, target.mediaId);
      if (target.serverName !== this.serverName) throw notFound('media IDs of other servers cannot be uploaded here');
      // Refuse early, before any bytes are stored; checked again in the transaction.
      this.checkTarget(await this.db.get<MediaRow>('SELECT * FROM media WHERE server_name = ? AND media_id = ?', [this.serverName, target.mediaId]), userId, now);
    }
    const mediaId = target?.mediaId ?? randomString(this.options.random, 24, MEDIA_ID_ALPHABET);
    const blobKey = this.blobKey();
    await this.options.store.put(blobKey, content.bytes);
    try {
      await this.db.transaction((tx) => {
        const used = tx.get<{ n: number }>('SELECT COALESCE(SUM(size), 0) AS n FROM media WHERE remote = 0 AND user_id = ?', [userId])!.n;
        if (used + content.bytes.byteLength > this.config.quotaBytesPerUser) {
          throw new MediaError(403, 'M_FORBIDDEN', `this upload would take you past your quota of ${this.config.quotaBytesPerUser} bytes (${used} used)`);
        }
        const values = [content.contentType, content.uploadName ?? null, content.bytes.byteLength, blobKey, now, now];
        if (target) {
          this.checkTarget(tx.get<MediaRow>('SELECT * FROM media WHERE server_name = ? AND media_id = ?', [this.serverName, mediaId]), userId, now);
          tx.run(
            'UPDATE media SET content_type = ?, upload_name = ?, size = ?, blob_key = ?, uploaded_ts = ?, last_access_ts = ?, expires_ts = NULL WHERE server_name = ? AND media_id = ?',
            [...values, this.serverName, mediaId],
          );
        } else {
          tx.run(
            `INSERT INTO media (content_type, upload_name, size, blob_key, uploaded_ts, last_access_ts, server_name, media_id, user_id, created_ts, remote)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)`,
            [...values, this.serverName, mediaId, userId, now],
          );
        }
      });
    } catch (error) {
      await this.options.store.delete(blobKey).catch(() => undefined);
      throw error;
    }
    for (const wake of this.waiters.get(mediaId) ?? []) wake();
    return { contentUri: `mxc://${this.serverName}/${mediaId}` };
  }

  private checkTarget(row: MediaRow | undefined, userId: string, now: number): void {
    if (!row || (row.uploaded_ts === null && row.expires_ts !== null && row.expires_ts < now)) throw notFound('no such media ID was created here, or it has expired');
    if (row.user_id !== userId) throw new MediaError(403, 'M_FORBIDDEN', 'this media ID was created by another user');
    if (row.uploaded_ts !== null) throw new MediaError(409, 'M_CANNOT_OVERWRITE_MEDIA', 'this media ID already has content');
  }

  /** Bytes a user has stored here. */
  async usage(userId: string): Promise<number> {
    return (await this.db.get<{ n: number }>('SELECT COALESCE(SUM(size), 0) AS n FROM media WHERE remote = 0 AND user_id = ?', [userId]))!.n;
  }

  // ---------------------------------------------------------------- download

  /** Content, local or (when allowed) fetched from its origin and cached. */
  async download(serverName: string, mediaId: string, options: { allowRemote?: boolean; timeoutMs?: number } = {}): Promise<MediaContent> {
    this.checkIds(serverName, mediaId);
    const timeoutMs = Math.min(options.timeoutMs ?? this.config.maxWaitMs, this.config.maxWaitMs);
    if (serverName === this.serverName) {
      const row = await this.uploadedRow(mediaId, timeoutMs);
      return this.read(row);
    }
    if (options.allowRemote === false) throw notFound('remote media was not asked for (allow_remote=false)');
    return this.remoteDownload(serverName, mediaId, timeoutMs);
  }

  /** A local row with its content, waiting up to timeoutMs for content still to come (then 504 M_NOT_YET_UPLOADED). */
  private async uploadedRow(mediaId: string, timeoutMs: number): Promise<MediaRow> {
    const select = () => this.db.get<MediaRow>('SELECT * FROM media WHERE server_name = ? AND media_id = ? AND remote = 0', [this.serverName, mediaId]);
    let row = await select();
    if (row && row.uploaded_ts === null) {
      if (row.expires_ts !== null && row.expires_ts < this.options.now()) row = undefined;
      else {
        await this.uploaded(mediaId, timeoutMs);
        row = await select();
      }
    }
    if (!row) throw notFound(`no media ${mediaId} here`);
    if (row.uploaded_ts === null) throw new MediaError(504, 'M_NOT_YET_UPLOADED', 'the content has not been uploaded yet');
    return row;
  }

  /** Resolves when mediaId's content is uploaded, or after timeoutMs. */
  private uploaded(mediaId: string, timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const set = this.waiters.get(mediaId) ?? new Set();
      this.waiters.set(mediaId, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0) this.waiters.delete(mediaId);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      set.add(done);
    });
  }

  private async read(row: MediaRow): Promise<MediaContent> {
    const bytes = row.blob_key ? await this.options.store.get(row.blob_key) : undefined;
    if (!bytes) throw notFound(`the content of ${row.media_id} is gone`);
    return { bytes, contentType: row.content_type ?? 'application/octet-stream', ...(row.upload_name ? { uploadName: row.upload_name } : {}) };
  }

  /** Dedupes concurrent work on one key: a second asker waits for the first's result. */
  private once<T>(key: string, work: () => Promise<T>): Promise<T> {
    const running = this.inFlight.get(key) as Promise<T> | undefined;
    if (running) return running;
    const promise = work().finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, promise);
    return promise;
  }

  private async remoteDownload(serverName: string, mediaId: string, timeoutMs: number): Promise<MediaContent> {
    const cached = await this.db.get<MediaRow>('SELECT * FROM media WHERE server_name = ? AND media_id = ?', [serverName, mediaId]);
    if (cached?.blob_key) {
      const bytes = await this.options.store.get(cached.blob_key);
      if (bytes) {
        await this.touch(cached);
        return { bytes, contentType: cached.content_type ?? 'application/octet-stream', ...(cached.upload_name ? { uploadName: cached.upload_name } : {}) };
      }
    }
    return this.once(`download ${serverName} ${mediaId}`, async () => {
      const remote = this.options.remote;
      if (!remote) throw new MediaError(502, 'M_UNKNOWN', 'this server cannot reach other servers');
      const content = await remote.download(serverName, mediaId, { timeoutMs }).catch(tooLargeToFetch);
      if (content.bytes.byteLength > this.config.remoteCacheBytes) throw new MediaError(502, 'M_TOO_LARGE', 'the remote content is too large for this server to serve');
      const blobKey = this.blobKey();
      await this.options.store.put(blobKey, content.bytes);
      const now = this.options.now();
      const previous = await this.db.transaction((tx) => {
        const old = tx.get<{ blob_key: string | null }>('SELECT blob_key FROM media WHERE server_name = ? AND media_id = ?', [serverName, mediaId]);
        tx.run(
          `INSERT INTO media (server_name, media_id, content_type, upload_name, size, blob_key, created_ts, uploaded_ts, last_access_ts, remote)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)
           ON CONFLICT (server_name, media_id) DO UPDATE SET content_type = excluded.content_type, upload_name = excluded.upload_name,
             size = excluded.size, blob_key = excluded.blob_key, uploaded_ts = excluded.uploaded_ts, last_access_ts = excluded.last_access_ts`,
          [serverName, mediaId, content.contentType, content.uploadName ?? null, content.bytes.byteLength, blobKey, now, now, now],
        );
        return old?.blob_key ?? null;
      });
      if (previous) await this.options.store.delete(previous).catch(() => undefined);
      await this.evict(serverName, mediaId);
      return content;
    });
  }

  private async touch(row: MediaRow): Promise<void> {
    const now = this.options.now();
    if (now - row.last_access_ts < ACCESS_TOUCH_MS) return;
    await this.db.transaction((tx) => tx.run('UPDATE media SET last_access_ts = ? WHERE server_name = ? AND media_id = ?', [now, row.server_name, row.media_id]));
  }

  /** Bytes of cached remote media: content and thumbnails. */
  async remoteCacheSize(): Promise<number> {
    const content = (await this.db.get<{ n: number }>('SELECT COALESCE(SUM(size), 0) AS n FROM media WHERE remote = 1'))!.n;
    const thumbnails = (await this.db.get<{ n: number }>('SELECT COALESCE(SUM(t.size), 0) AS n FROM media_thumbnails t JOIN media m USING (server_name, media_id) WHERE m.remote = 1'))!.n;
    return content + thumbnails;
  }

  /** Drops the least recently used remote media (never `keep`, just fetched) until the cache fits its bound. */
  private async evict(keepServer: string, keepMedia: string): Promise<void> {
    let size = await this.remoteCacheSize();
    while (size > this.config.remoteCacheBytes) {
      const victim = await this.db.get<MediaRow>(
        'SELECT * FROM media WHERE remote = 1 AND NOT (server_name = ? AND media_id = ?) ORDER BY last_access_ts, created_ts LIMIT 1',
        [keepServer, keepMedia],
      );
      if (!victim) return;
      // Rows go first, durably; then the bytes. A crash in between leaves orphan blobs, never a row without bytes.
      const blobs = await this.db.transaction((tx) => {
        const keys = tx.all<{ blob_key: string }>('SELECT blob_key FROM media_thumbnails WHERE server_name = ? AND media_id = ?', [victim.server_name, victim.media_id]).map((r) => r.blob_key);
        tx.run('DELETE FROM media_thumbnails WHERE server_name = ? AND media_id = ?', [victim.server_name, victim.media_id]);
        tx.run('DELETE FROM media WHERE server_name = ? AND media_id = ?', [victim.server_name, victim.media_id]);
        return victim.blob_key ? [victim.blob_key, ...keys] : keys;
      });
      for (const key of blobs) await this.options.store.delete(key).catch((error) => this.options.log?.('media: could not delete an evicted blob', error));
      size = await this.remoteCacheSize();
    }
  }

  // -------------------------------------------------------------- thumbnails

  /** A thumbnail in (about) the size asked for: made once, then kept. */
  async thumbnail(
    serverName: string,
    mediaId: string,
    request: { width: number; height: number; method: ThumbnailMethod; allowRemote?: boolean; timeoutMs?: number },
  ): Promise<MediaContent> {
    this.checkIds(serverName, mediaId);
    const timeoutMs = Math.min(request.timeoutMs ?? this.config.maxWaitMs, this.config.maxWaitMs);
    const size = chooseThumbnailSize(request.width, request.height, request.method);
    const local = serverName === this.serverName;
    if (!local && request.allowRemote === false) throw notFound('remote media was not asked for (allow_remote=false)');
    if (local) await this.uploadedRow(mediaId, timeoutMs);
    const kept = await this.keptThumbnail(serverName, mediaId, size);
    if (kept) return kept;
    return this.once(`thumbnail ${serverName} ${mediaId} ${size.width}x${size.height} ${size.method}`, async () => {
      let thumbnail: MediaContent;
      if (local || !this.options.remote || (await this.cachedContent(serverName, mediaId))) {
        thumbnail = await this.makeThumbnail(await this.download(serverName, mediaId, { timeoutMs }), size);
      } else {
        // Ask the origin for it: a thumbnail is a fraction of the image it comes from.
        thumbnail = await this.options.remote.thumbnail(serverName, mediaId, { ...size, timeoutMs }).catch(tooLargeToFetch);
        if (!THUMBNAILABLE_TYPES.has(baseContentType(thumbnail.contentType))) throw new MediaError(502, 'M_UNKNOWN', `the origin sent a thumbnail of type ${thumbnail.contentType}`);
      }
      await this.keepThumbnail(serverName, mediaId, size, thumbnail, !local);
      return thumbnail;
    });
  }

  private async cachedContent(serverName: string, mediaId: string): Promise<boolean> {
    return !!(await this.db.get('SELECT 1 FROM media WHERE server_name = ? AND media_id = ? AND blob_key IS NOT NULL', [serverName, mediaId]));
  }

  private async keptThumbnail(serverName: string, mediaId: string, size: { width: number; height: number; method: ThumbnailMethod }): Promise<MediaContent | undefined> {
    const row = await this.db.get<ThumbnailRow>(
      'SELECT * FROM media_thumbnails WHERE server_name = ? AND media_id = ? AND width = ? AND height = ? AND method = ?',
      [serverName, mediaId, size.width, size.height, size.method],
    );
    if (!row) return undefined;
    const bytes = await this.options.store.get(row.blob_key);
    return bytes && { bytes, contentType: row.content_type };
  }

  private async makeThumbnail(source: MediaContent, size: { width: number; height: number; method: ThumbnailMethod }): Promise<MediaContent> {
    const type = baseContentType(source.contentType);
    const thumbnailer = this.options.thumbnailer;
    if (!thumbnailer || !THUMBNAILABLE_TYPES.has(type) || !thumbnailer.canThumbnail(type)) {
      throw new MediaError(400, 'M_UNKNOWN', `cannot generate thumbnails for ${type} content`);
    }
    if (source.bytes.byteLength > this.config.maxThumbnailSourceBytes) throw new MediaError(413, 'M_TOO_LARGE', 'the content is too large to thumbnail');
    try {
      const made = await thumbnailer.thumbnail(source.bytes, type, size.width, size.height, size.method);
      return { bytes: made.bytes, contentType: made.contentType };
    } catch (error) {
      this.options.log?.('media: thumbnailing failed', error);
      throw new MediaError(400, 'M_UNKNOWN', 'cannot generate thumbnails for the requested content: it is not an image this server can read');
    }
  }

  private async keepThumbnail(serverName: string, mediaId: string, size: { width: number; height: number; method: ThumbnailMethod }, thumbnail: MediaContent, remote: boolean): Promise<void> {
    const blobKey = this.blobKey();
    await this.options.store.put(blobKey, thumbnail.bytes);
    const now = this.options.now();
    const replaced = await this.db.transaction((tx) => {
      // A remote thumbnail may come before (or without) the content: a row with no blob stands for the media.
      if (remote) {
        tx.run(
          `INSERT INTO media (server_name, media_id, size, created_ts, last_access_ts, remote) VALUES (?, ?, 0, ?, ?, 1)
           ON CONFLICT (server_name, media_id) DO UPDATE SET last_access_ts = excluded.last_access_ts`,
          [serverName, mediaId, now, now],
        );
      }
      const old = tx.get<{ blob_key: string }>(
        'SELECT blob_key FROM media_thumbnails WHERE server_name = ? AND media_id = ? AND width = ? AND height = ? AND method = ?',
        [serverName, mediaId, size.width, size.height, size.method],
      );
      tx.run(
        `INSERT OR REPLACE INTO media_thumbnails (server_name, media_id, width, height, method, content_type, size, blob_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        [serverName, mediaId, size.width, size.height, size.method, thumbnail.contentType, thumbnail.bytes.byteLength, blobKey],
      );
      return old?.blob_key;
    });
    if (replaced) await this.options.store.delete(replaced).catch(() => undefined);
    if (remote) await this.evict(serverName, mediaId);
  }

  /**
   * Deletes blobs no row names: left by a crash between a put and its commit, or between an
   * eviction's commit and its deletes. Run at start-up, before requests are served (a put in
   * flight would look like an orphan). Returns how many went.
   */
  async sweepOrphans(): Promise<number> {
    const store = this.options.store;
    if (!store.keys) return 0;
    const keys = await store.keys();
    const rows = [
      ...(await this.db.all<{ blob_key: string }>('SELECT blob_key FROM media WHERE blob_key IS NOT NULL')),
      ...(await this.db.all<{ blob_key: string }>('SELECT blob_key FROM media_thumbnails')),
    ];
    const named = new Set(rows.map((r) => r.blob_key));
    let swept = 0;
    for (const key of keys) {
      if (named.has(key)) continue;
      await store.delete(key);
      swept++;
    }
    if (swept > 0) this.options.log?.(`media: removed ${swept} blob(s) that no metadata named (left by a crash)`);
    return swept;
  }

  /** For the federation route: local content only, never fetched from elsewhere. */
  async serveToServer(mediaId: string, timeoutMs?: number): Promise<MediaContent> {
    return this.download(this.serverName, mediaId, { allowRemote: false, timeoutMs });
  }

  async serveThumbnailToServer(mediaId: string, request: { width: number; height: number; method: ThumbnailMethod; timeoutMs?: number }): Promise<MediaContent> {
    return this.thumbnail(this.serverName, mediaId, { ...request, allowRemote: false });
  }
}
