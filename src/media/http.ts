import { baseContentType } from './config.ts';
import { MediaError, type MediaContent } from './media.ts';

/**
 * Types served `inline` (client-server §Serving inline content): everything else is an
 * `attachment`, so a browser never renders, say, uploaded HTML as a page of this origin.
 */
export const INLINE_CONTENT_TYPES = new Set([
  'text/css',
  'text/plain',
  'text/csv',
  'application/json',
  'application/ld+json',
  'image/jpeg',
  'image/gif',
  'image/png',
  'image/apng',
  'image/webp',
  'image/avif',
  'video/mp4',
  'video/webm',
  'video/ogg',
  'video/quicktime',
  'audio/mp4',
  'audio/webm',
  'audio/aac',
  'audio/mpeg',
  'audio/ogg',
  'audio/wave',
  'audio/wav',
  'audio/x-wav',
  'audio/x-pn-wav',
  'audio/flac',
  'audio/x-flac',
]);

/**
 * The headers the spec recommends on every download (client-server §Content
 * repository, security considerations): the content can run nothing, and clients
 * on other origins (Element) may still embed it. In the browser host media is
 * served from the page's own origin through the service worker, so the sandbox
 * matters there most.
 */
export const MEDIA_SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': "sandbox; default-src 'none'; script-src 'none'; plugin-types application/pdf; style-src 'unsafe-inline'; media-src 'self'; object-src 'self';",
  'cross-origin-resource-policy': 'cross-origin',
  'x-content-type-options': 'nosniff',
};

/** `inline` or `attachment`, with the file name (RFC 6266: plain when it can be, `filename*` UTF-8 when not). */
export function contentDisposition(contentType: string, fileName: string | undefined, forceInline = false): string {
  const disposition = forceInline || INLINE_CONTENT_TYPES.has(baseContentType(contentType)) ? 'inline' : 'attachment';
  if (!fileName) return disposition;
  if (/^[\x20-\x7e]*$/.test(fileName) && !/["\\]/.test(fileName)) return `${disposition}; filename="${fileName}"`;
  const encoded = encodeURIComponent(fileName).replace(/['()*]/g, (ch) => `%${ch.charCodeAt(0).toString(16).toUpperCase()}`);
  return `${disposition}; filename*=utf-8''${encoded}`;
}

/** The file name a Content-Disposition header names, if any. */
export function fileNameOf(disposition: string | null | undefined): string | undefined {
  if (!disposition) return undefined;
  const extended = /filename\*\s*=\s*(?:utf-8|UTF-8)''([^;]+)/.exec(disposition);
  if (extended) {
    try {
      return decodeURIComponent(extended[1]!.trim());
    } catch {
      // fall through to the plain form
    }
  }
  const plain = /filename\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]+))/.exec(disposition);
  return plain ? (plain[1]?.replace(/\\(.)/g, '$1') ?? plain[2]) : undefined;
}

/** A download or thumbnail as a Response, with the spec's headers. */
export function mediaResponse(content: MediaContent, options: { fileName?: string; thumbnail?: boolean } = {}): Response {
  const fileName = options.fileName ?? content.uploadName ?? (options.thumbnail ? `thumbnail.${content.contentType.endsWith('png') ? 'png' : 'jpg'}` : undefined);
  const body = content.bytes as Uint8Array<ArrayBuffer>;
  return new Response(body, {
    status: 200,
    headers: {
      'content-type': content.contentType,
      'content-length': String(content.bytes.byteLength),
      'content-disposition': contentDisposition(content.contentType, fileName, options.thumbnail),
      ...MEDIA_SECURITY_HEADERS,
    },
  });
}

/** width, height, method and timeout_ms of a thumbnail request; 400 when they make no sense. */
export function parseThumbnailQuery(query: (name: string) => string | undefined): { width: number; height: number; method: 'crop' | 'scale'; timeoutMs?: number } {
  const dimension = (name: string): number => {
    const raw = query(name);
    if (raw === undefined || raw === '') throw new MediaError(400, 'M_MISSING_PARAM', `${name} is required`);
    if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 10_000) throw new MediaError(400, 'M_INVALID_PARAM', `${name} must be a positive integer`);
    return Number(raw);
  };
  const width = dimension('width');
  const height = dimension('height');
  const method = query('method') ?? 'scale';
  if (method !== 'crop' && method !== 'scale') throw new MediaError(400, 'M_INVALID_PARAM', 'method must be crop or scale');
  const timeoutMs = parseTimeout(query('timeout_ms'));
  return { width, height, method, ...(timeoutMs !== undefined ? { timeoutMs } : {}) };
}

/** timeout_ms: a non-negative integer, or absent. */
export function parseTimeout(raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (!/^\d+$/.test(raw)) throw new MediaError(400, 'M_INVALID_PARAM', 'timeout_ms must be a non-negative integer');
  return Number(raw);
}
