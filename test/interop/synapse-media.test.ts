import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { api } from '../integration/harness.ts';
import { synapseAndHearth, type InteropServer, type Side } from '../support/synapse-interop.ts';

// Media between a Hearth host and Synapse (issue 35, item 7), both ways: a file uploaded on one
// server is downloaded by a person of the other through authenticated media
// (`/_matrix/client/v1/media/download/{serverName}/{mediaId}`), which the other server fetches
// from the origin over `/_matrix/federation/v1/media/download`; and thumbnails of an image,
// likewise. Which federation route each server used is read from the origin's own record: Hearth's
// trace of inbound exchanges (HEARTH_TRACE_FEDERATION), Synapse's access log.

const servers = synapseAndHearth({ traceHearthFederation: true });

/** A 640×480 PNG, a gradient so that no two uploads need be alike. */
async function picture(seed: number): Promise<Buffer> {
  const width = 640;
  const height = 480;
  const pixels = Buffer.alloc(width * height * 3);
  for (let i = 0; i < width * height; i++) pixels.set([(i + seed) % 256, (i >> 8) % 256, seed % 256], i * 3);
  return sharp(pixels, { raw: { width, height, channels: 3 } }).png().toBuffer();
}

async function upload(side: Side, bytes: Buffer, contentType: string, fileName: string): Promise<{ serverName: string; mediaId: string }> {
  const r = await api(side.server, 'POST', `/_matrix/media/v3/upload?filename=${encodeURIComponent(fileName)}`, { token: side.account.accessToken, rawBody: new Uint8Array(bytes), headers: { 'content-type': contentType }, unchecked: true });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const [, serverName, mediaId] = /^mxc:\/\/([^/]+)\/(.+)$/.exec(r.body.content_uri)!;
  expect(serverName).toBe(side.server.name);
  return { serverName: serverName!, mediaId: mediaId! };
}

/** An authenticated GET of media through `server`'s client API: status, headers and the bytes. */
async function media(server: InteropServer, token: string | undefined, path: string): Promise<{ status: number; headers: Headers; bytes: Buffer }> {
  const response = await server.fetch(`${server.url}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { status: response.status, headers: response.headers, bytes: Buffer.from(await response.arrayBuffer()) };
}

/** The federation media requests the origin answered for this media ID, as `GET path` lines. */
async function federationMediaRequests(origin: Side, mediaId: string): Promise<string[]> {
  if (origin.server === servers.hearth) {
    return (await servers.hearthTrace()).filter((t) => t.path.includes('/media/') && t.path.includes(mediaId)).map((t) => `${t.method} ${t.path.split('?')[0]} ${t.status}`);
  }
  // Synapse's access log: "... Processed request: …sec/…sec (…) …B 200 "GET /_matrix/… HTTP/1.1" …".
  return [...servers.synapse.log().matchAll(/ (\d{3}) "(GET) (\/_matrix\/federation\/v1\/media\/[^ ?"]*)[^"]*"/g)]
    .filter((m) => m[3]!.includes(mediaId))
    .map((m) => `${m[2]} ${m[3]} ${m[1]}`);
}

describe.each([
  { direction: 'uploaded on Synapse, fetched through Hearth', origin: () => servers.onSynapse, fetcher: () => servers.onHearth },
  { direction: 'uploaded on Hearth, fetched through Synapse', origin: () => servers.onHearth, fetcher: () => servers.onSynapse },
])('media $direction', ({ origin: originSide, fetcher: fetcherSide }) => {
  it('a file is downloaded through authenticated media, which the fetching server had over federation’s media download', async () => {
    const [origin, fetcher] = [originSide(), fetcherSide()];
    const bytes = Buffer.from(`a report written on ${origin.label}\n`.repeat(200));
    const { serverName, mediaId } = await upload(origin, bytes, 'text/plain', 'report.txt');
    const path = `/_matrix/client/v1/media/download/${encodeURIComponent(serverName)}/${encodeURIComponent(mediaId)}`;

    // Authenticated media needs a token, on the fetching server too.
    expect((await media(fetcher.server, undefined, path)).status).toBe(401);
    const got = await media(fetcher.server, fetcher.account.accessToken, path);
    expect(got.status, got.bytes.toString().slice(0, 300)).toBe(200);
    expect(got.bytes.equals(bytes)).toBe(true);
    expect(got.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(got.headers.get('content-disposition')).toMatch(/report\.txt/);
    // With a file name of the client's choosing, that name is the one given.
    const named = await media(fetcher.server, fetcher.account.accessToken, `${path}/renamed.txt`);
    expect(named.status).toBe(200);
    expect(named.bytes.equals(bytes)).toBe(true);
    expect(named.headers.get('content-disposition')).toMatch(/renamed\.txt/);

    // The origin was asked once, over the federation route (not the deprecated /_matrix/media one).
    expect(await federationMediaRequests(origin, mediaId)).toEqual([`GET /_matrix/federation/v1/media/download/${mediaId} 200`]);
  });

  it('thumbnails of an image on the other server, cropped and scaled', async () => {
    const [origin, fetcher] = [originSide(), fetcherSide()];
    const image = await picture(origin === servers.onSynapse ? 1 : 2);
    const { serverName, mediaId } = await upload(origin, image, 'image/png', 'gradient.png');
    const thumbnail = (query: string) => media(fetcher.server, fetcher.account.accessToken, `/_matrix/client/v1/media/thumbnail/${encodeURIComponent(serverName)}/${encodeURIComponent(mediaId)}?${query}`);

    const cropped = await thumbnail('width=32&height=32&method=crop');
    expect(cropped.status, cropped.bytes.toString().slice(0, 300)).toBe(200);
    expect(cropped.headers.get('content-type')).toMatch(/^image\/(png|jpeg)/);
    const croppedSize = await sharp(cropped.bytes).metadata();
    expect([croppedSize.width, croppedSize.height]).toEqual([32, 32]);

    const scaled = await thumbnail('width=320&height=240&method=scale');
    expect(scaled.status).toBe(200);
    const scaledSize = await sharp(scaled.bytes).metadata();
    // Scaled to fit, keeping the 4:3 shape, at least as large as asked, smaller than the original.
    expect(scaledSize.width! * 3).toBe(scaledSize.height! * 4);
    expect(scaledSize.width).toBeGreaterThanOrEqual(320);
    expect(scaledSize.width).toBeLessThan(640);

    // Hearth asks the origin for thumbnails of media it does not hold whole; Synapse fetches the
    // whole file (over the federation download) and makes its own.
    const asked = await federationMediaRequests(origin, mediaId);
    if (fetcher === servers.onHearth) {
      expect(asked).toEqual([`GET /_matrix/federation/v1/media/thumbnail/${mediaId} 200`, `GET /_matrix/federation/v1/media/thumbnail/${mediaId} 200`]);
    } else {
      expect(asked).toEqual([`GET /_matrix/federation/v1/media/download/${mediaId} 200`]);
    }
  });
});
