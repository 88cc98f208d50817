import type { ThumbnailMethod } from './thumbnailer.ts';

// What a host may set of its media repository, and the fixed sizes thumbnails are made in.

export interface MediaConfig {
  /** `m.upload.size`: the largest upload, in bytes. */
  maxUploadBytes: number;
  /** The most bytes one user may have stored here (their uploads, not cached remote media). */
  quotaBytesPerUser: number;
  /** Content types refused at upload: exact (`text/html`) or a whole kind (`video/*`). Case-insensitive, parameters ignored. */
  refusedContentTypes: string[];
  /** Bound on cached remote media (content and thumbnails); the least recently used goes first. */
  remoteCacheBytes: number;
  /** How long an ID from /create waits for its content (the spec recommends 24 hours). */
  unusedIdExpiryMs: number;
  /** How many IDs from /create a user may have waiting at once. */
  maxPendingIdsPerUser: number;
  /** Cap on `timeout_ms` when a download waits for content not uploaded yet (the spec's default is 20 s). */
  maxWaitMs: number;
  /** Images larger than this are not thumbnailed (413). */
  maxThumbnailSourceBytes: number;
}

export const DEFAULT_MEDIA_CONFIG: MediaConfig = {
  // The browser's service worker refuses request bodies above 8 MiB (worker/protocol.ts), so
  // the same figure everywhere: what one peer accepts, every peer can serve and fetch.
  maxUploadBytes: 8 * 1024 * 1024,
  quotaBytesPerUser: 512 * 1024 * 1024,
  refusedContentTypes: [],
  remoteCacheBytes: 256 * 1024 * 1024,
  unusedIdExpiryMs: 24 * 60 * 60 * 1000,
  maxPendingIdsPerUser: 50,
  maxWaitMs: 20_000,
  maxThumbnailSourceBytes: 32 * 1024 * 1024,
};

/**
 * The sizes thumbnails are made in (client-server §Thumbnails lists the first five as
 * what servers should make). A request gets the smallest of its method that covers it,
 * else the largest of its method: at most this many kept per image, whatever clients ask.
 */
export const THUMBNAIL_SIZES: { width: number; height: number; method: ThumbnailMethod }[] = [
  { width: 32, height: 32, method: 'crop' },
  { width: 96, height: 96, method: 'crop' },
  { width: 320, height: 320, method: 'crop' },
  { width: 640, height: 640, method: 'crop' },
  { width: 320, height: 240, method: 'scale' },
  { width: 640, height: 480, method: 'scale' },
  { width: 800, height: 600, method: 'scale' },
  { width: 1600, height: 1200, method: 'scale' },
];

export function chooseThumbnailSize(width: number, height: number, method: ThumbnailMethod): { width: number; height: number; method: ThumbnailMethod } {
  const ofMethod = THUMBNAIL_SIZES.filter((s) => s.method === method);
  return ofMethod.find((s) => s.width >= width && s.height >= height) ?? ofMethod[ofMethod.length - 1]!;
}

/** The type without parameters, lower-cased: what the refused list and inline rules compare. */
export function baseContentType(contentType: string): string {
  return contentType.split(';')[0]!.trim().toLowerCase();
}
