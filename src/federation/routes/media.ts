import type { Hono } from 'hono';
import { unrecognized } from '../../http/matrix-error.ts';
import { webRandomBytes } from '../../crypto/random.ts';
import { contentDisposition, parseThumbnailQuery, parseTimeout } from '../../media/http.ts';
import type { MediaContent } from '../../media/media.ts';
import type { FederationCtx, FederationEnv, FederationMediaSource } from '../context.ts';
import { encodeMediaMultipart } from '../../media/multipart.ts';

function source(c: FederationCtx): FederationMediaSource {
  const media = c.get('services').media;
  if (!media) throw unrecognized('this server has no media repository');
  return media;
}

function multipart(content: MediaContent, thumbnail: boolean): Response {
  const boundary = [...webRandomBytes(16)].map((b) => b.toString(16).padStart(2, '0')).join('');
  const fileName = content.uploadName ?? (thumbnail ? `thumbnail.${content.contentType.endsWith('png') ? 'png' : 'jpg'}` : undefined);
  const { body, contentType } = encodeMediaMultipart({ bytes: content.bytes, contentType: content.contentType, contentDisposition: contentDisposition(content.contentType, fileName, thumbnail) }, boundary);
  return new Response(body, { status: 200, headers: { 'content-type': contentType } });
}

/** Server-server §Content repository (spec v1.11): our own media, to other servers, as multipart/mixed. */
export function mediaRoutes(app: Hono<FederationEnv>): void {
  app.get('/_matrix/federation/v1/media/download/:mediaId', async (c) =>
    multipart(await source(c).serveToServer(c.req.param('mediaId'), parseTimeout(c.req.query('timeout_ms'))), false),
  );

  app.get('/_matrix/federation/v1/media/thumbnail/:mediaId', async (c) =>
    multipart(await source(c).serveThumbnailToServer(c.req.param('mediaId'), parseThumbnailQuery((name) => c.req.query(name))), true),
  );
}
