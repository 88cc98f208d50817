import type { Hono } from 'hono';
import { BodyTooLargeError, readRequestBounded } from '../../http/bounded-body.ts';
import { mediaResponse, parseThumbnailQuery, parseTimeout } from '../../media/http.ts';
import { MediaError } from '../../media/media.ts';
import { requireSession, type Ctx, type Env } from '../context.ts';
import { missingParam } from '../../http/matrix-error.ts';
import { on } from './route.ts';

// The content repository (client-server §Content repository): uploads under
// /_matrix/media, authenticated downloads under /_matrix/client/v1/media (spec v1.11)
// and, for clients that still use them, the older unauthenticated /_matrix/media paths.
// These routes are mounted before the client app's body middleware: an upload's body is
// bytes, read here with the media limit, not text with the JSON limit.

const MEDIA_V3 = ['/_matrix/media/v3', '/_matrix/media/r0'];
const MEDIA_V1 = ['/_matrix/media/v1'];
const CLIENT_V1_MEDIA = ['/_matrix/client/v1/media'];

/** Reads an upload's bytes, refusing (413) as soon as they pass the limit: the declared length first, then as they stream in. */
async function readUpload(c: Ctx, limit: number): Promise<Uint8Array> {
  try {
    return (await readRequestBounded(c.req.raw, limit)) ?? new Uint8Array(0);
  } catch (error) {
    if (error instanceof BodyTooLargeError) throw new MediaError(413, 'M_TOO_LARGE', `uploads are limited to ${limit} bytes`);
    throw error;
  }
}

async function upload(c: Ctx, target?: { serverName: string; mediaId: string }) {
  const session = await requireSession(c);
  const services = c.get('services');
  services.rateLimiter?.take(session.userId + '/' + session.deviceId);
  const { media } = services;
  const contentType = c.req.header('content-type')?.trim() || 'application/octet-stream';
  // The type is refused before the body is read.
  media.checkUpload(contentType, 0);
  const bytes = await readUpload(c, media.config.maxUploadBytes);
  const fileName = c.req.query('filename');
  return media.upload(session.userId, { bytes, contentType, ...(fileName ? { uploadName: fileName } : {}) }, target);
}

async function download(c: Ctx): Promise<Response> {
  const { media } = c.get('services');
  const content = await media.download(c.req.param('serverName')!, c.req.param('mediaId')!, {
    allowRemote: c.req.query('allow_remote') !== 'false',
    timeoutMs: parseTimeout(c.req.query('timeout_ms')),
  });
  const fileName = c.req.param('fileName');
  return mediaResponse(content, fileName ? { fileName } : {});
}

async function thumbnail(c: Ctx): Promise<Response> {
  const { media } = c.get('services');
  const query = parseThumbnailQuery((name) => c.req.query(name));
  const content = await media.thumbnail(c.req.param('serverName')!, c.req.param('mediaId')!, { ...query, allowRemote: c.req.query('allow_remote') !== 'false' });
  return mediaResponse(content, { thumbnail: true });
}

const config = async (c: Ctx) => {
  await requireSession(c);
  return c.json({ 'm.upload.size': c.get('services').media.config.maxUploadBytes });
};

/**
 * URL previews are off: the homeserver runs in a tab (or a peer) with no open web to fetch
 * pages from, and fetching them would tell the sites what the user reads. The spec's answer
 * is OpenGraph data "which may be empty": `{}`, which clients show as no preview.
 */
const previewUrl = async (c: Ctx) => {
  await requireSession(c);
  if (!c.req.query('url')) throw missingParam('url is required');
  return c.json({});
};

export function mediaRoutes(app: Hono<Env>): void {
  on(app, 'POST', '/upload', async (c) => c.json({ content_uri: (await upload(c)).contentUri }), MEDIA_V3);
  on(
    app,
    'PUT',
    '/upload/:serverName/:mediaId',
    async (c) => {
      await upload(c, { serverName: c.req.param('serverName')!, mediaId: c.req.param('mediaId')! });
      return c.json({});
    },
    MEDIA_V3,
  );
  on(
    app,
    'POST',
    '/create',
    async (c) => {
      const session = await requireSession(c);
      const services = c.get('services');
      services.rateLimiter?.take(session.userId + '/' + session.deviceId);
      const created = await services.media.create(session.userId);
      return c.json({ content_uri: created.contentUri, unused_expires_at: created.unusedExpiresAt });
    },
    MEDIA_V1,
  );

  // Authenticated media (v1.11).
  const authenticated = (handler: (c: Ctx) => Promise<Response>) => async (c: Ctx) => (await requireSession(c), handler(c));
  on(app, 'GET', '/download/:serverName/:mediaId', authenticated(download), CLIENT_V1_MEDIA);
  on(app, 'GET', '/download/:serverName/:mediaId/:fileName', authenticated(download), CLIENT_V1_MEDIA);
  on(app, 'GET', '/thumbnail/:serverName/:mediaId', authenticated(thumbnail), CLIENT_V1_MEDIA);
  on(app, 'GET', '/config', config, CLIENT_V1_MEDIA);
  on(app, 'GET', '/preview_url', previewUrl, CLIENT_V1_MEDIA);

  // The older paths, deprecated by v1.11: downloads and thumbnails need no access token there.
  on(app, 'GET', '/download/:serverName/:mediaId', download, MEDIA_V3);
  on(app, 'GET', '/download/:serverName/:mediaId/:fileName', download, MEDIA_V3);
  on(app, 'GET', '/thumbnail/:serverName/:mediaId', thumbnail, MEDIA_V3);
  on(app, 'GET', '/config', config, MEDIA_V3);
  on(app, 'GET', '/preview_url', previewUrl, MEDIA_V3);
}
