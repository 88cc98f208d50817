// The media repository (issue 14): matrix-js-sdk uploads and downloads, thumbnails made
// with sharp, the spec's errors, limits, remote media fetched over federation and cached
// within its bound, and files that outlive a restart of the Node host.
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { SharpThumbnailer } from '../../src/node/media-thumbnailer.ts';
import { startNodeHost } from '../../src/node/node-host.ts';
import { federatedServers, type FederatedServer } from '../support/federated-homeservers.ts';
import { api, register, startTestServer, type TestServer } from './harness.ts';
import { sdk, startClient } from './sdk.ts';

/** A real PNG of the given size: left half red, right half blue. */
async function image(width: number, height: number, format: 'png' | 'jpeg' = 'png'): Promise<Uint8Array<ArrayBuffer>> {
  const half = Math.floor(width / 2);
  const base = sharp({ create: { width, height, channels: 3, background: '#ff0000' } }).composite([
    { input: { create: { width: width - half, height, channels: 3, background: '#0000ff' } }, left: half, top: 0 },
  ]);
  const buffer = await (format === 'png' ? base.png() : base.jpeg()).toBuffer();
  return new Uint8Array(buffer);
}

/** A PNG of random pixels: it does not compress, so its size is about width × height × 3. */
async function noise(width: number, height: number): Promise<Uint8Array<ArrayBuffer>> {
  const pixels = new Uint8Array(width * height * 3);
  for (let i = 0; i < pixels.length; i += 65536) crypto.getRandomValues(pixels.subarray(i, i + 65536));
  return new Uint8Array(await sharp(pixels, { raw: { width, height, channels: 3 } }).png().toBuffer());
}

async function dimensions(bytes: ArrayBuffer | Uint8Array): Promise<{ width: number; height: number; format: string }> {
  const meta = await sharp(new Uint8Array(bytes)).metadata();
  return { width: meta.width!, height: meta.height!, format: meta.format! };
}

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});
const directories: string[] = [];
afterAll(async () => {
  for (const dir of directories) await rm(dir, { recursive: true, force: true });
});

async function server(media: NonNullable<NonNullable<Parameters<typeof startTestServer>[0]>['media']> = {}): Promise<TestServer> {
  const s = await startTestServer({ media: { thumbnailer: new SharpThumbnailer(), ...media } });
  closers.push(() => s.close());
  return s;
}

const get = (s: { url: string }, path: string, token?: string) => fetch(s.url + path, token ? { headers: { authorization: `Bearer ${token}` } } : {});

describe('media with matrix-js-sdk', () => {
  it('uploads an image, then downloads it and thumbnails of it', async () => {
    const s = await server();
    const alice = await register(s, 'alice');
    const client = await startClient(s.url, alice);
    closers.push(async () => client.stopClient());
    const png = await image(400, 300);

    const { content_uri } = await client.uploadContent(new Blob([png], { type: 'image/png' }), { name: 'cat picture.png', type: 'image/png' });
    expect(content_uri).toMatch(new RegExp(`^mxc://${s.homeserver.serverName}/[A-Za-z0-9_-]+$`));

    // Authenticated download, as the SDK builds it.
    const url = client.mxcUrlToHttp(content_uri, undefined, undefined, undefined, false, true, true)!;
    expect(url).toContain('/_matrix/client/v1/media/download/');
    const download = await fetch(url, { headers: { authorization: `Bearer ${alice.accessToken}` } });
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('image/png');
    expect(download.headers.get('content-disposition')).toBe('inline; filename="cat picture.png"');
    expect(download.headers.get('content-security-policy')).toMatch(/sandbox/);
    expect(download.headers.get('cross-origin-resource-policy')).toBe('cross-origin');
    expect(new Uint8Array(await download.arrayBuffer())).toEqual(png);

    // Thumbnails: crop gives the asked-for shape; scale fits inside, keeping the aspect ratio.
    const cropUrl = client.mxcUrlToHttp(content_uri, 96, 96, 'crop', false, true, true)!;
    const crop = await fetch(cropUrl, { headers: { authorization: `Bearer ${alice.accessToken}` } });
    expect(crop.status).toBe(200);
    expect(crop.headers.get('content-type')).toBe('image/png');
    expect(crop.headers.get('content-disposition')).toMatch(/^inline/);
    expect(await dimensions(await crop.arrayBuffer())).toEqual({ width: 96, height: 96, format: 'png' });
    const scale = await get(s, `/_matrix/client/v1/media/thumbnail/${content_uri.slice(6)}?width=300&height=300&method=scale`, alice.accessToken);
    expect(await dimensions(await scale.arrayBuffer())).toEqual({ width: 400, height: 300, format: 'png' });
    const small = await get(s, `/_matrix/client/v1/media/thumbnail/${content_uri.slice(6)}?width=100&height=100&method=scale`, alice.accessToken);
    expect(await dimensions(await small.arrayBuffer())).toEqual({ width: 320, height: 240, format: 'png' });

    // Thumbnails are kept: asking again reads the stored one.
    const kept = await s.homeserver.services.media.thumbnail(s.homeserver.serverName, content_uri.split('/').pop()!, { width: 96, height: 96, method: 'crop' });
    expect(new Uint8Array(await (await fetch(cropUrl, { headers: { authorization: `Bearer ${alice.accessToken}` } })).arrayBuffer())).toEqual(kept.bytes);

    // The older unauthenticated path and a file name override.
    const legacy = await get(s, `/_matrix/media/v3/download/${content_uri.slice(6)}/other.png`);
    expect(legacy.status).toBe(200);
    expect(legacy.headers.get('content-disposition')).toBe('inline; filename="other.png"');

    // JPEG stays JPEG.
    const jpeg = await image(800, 600, 'jpeg');
    const { content_uri: jpegUri } = await client.uploadContent(new Blob([jpeg], { type: 'image/jpeg' }), { type: 'image/jpeg', name: 'photo.jpg' });
    const jpegThumb = await get(s, `/_matrix/client/v1/media/thumbnail/${jpegUri.slice(6)}?width=32&height=32&method=crop`, alice.accessToken);
    expect(jpegThumb.headers.get('content-type')).toBe('image/jpeg');
    expect(await dimensions(await jpegThumb.arrayBuffer())).toEqual({ width: 32, height: 32, format: 'jpeg' });
  });

  it('serves non-inline types as attachments, and a UTF-8 file name as filename*', async () => {
    const s = await server();
    const alice = await register(s, 'alice');
    const upload = await api(s, 'POST', `/_matrix/media/v3/upload?filename=${encodeURIComponent('página.html')}`, {
      token: alice.accessToken,
      rawBody: new TextEncoder().encode('<script>alert(1)</script>') as Uint8Array<ArrayBuffer>,
      headers: { 'content-type': 'text/html' },
    });
    expect(upload.status).toBe(200);
    const response = await get(s, `/_matrix/client/v1/media/download/${upload.body.content_uri.slice(6)}`, alice.accessToken);
    expect(response.headers.get('content-type')).toBe('text/html');
    expect(response.headers.get('content-disposition')).toBe("attachment; filename*=utf-8''p%C3%A1gina.html");
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
  });
});

describe('media errors and limits', () => {
  it('answers bad input with the spec errors', async () => {
    const s = await server({ config: { maxUploadBytes: 1000, refusedContentTypes: ['application/x-msdownload', 'video/*'] } });
    const alice = await register(s, 'alice');
    const bob = await register(s, 'bob');
    const bytes = (n: number) => new Uint8Array(n) as Uint8Array<ArrayBuffer>;
    const upload = (body: Uint8Array<ArrayBuffer>, type = 'application/octet-stream', token: string | undefined = alice.accessToken) =>
      api(s, 'POST', '/_matrix/media/v3/upload', { token, rawBody: body, headers: { 'content-type': type } });

    expect((await upload(bytes(10), 'text/plain', '')).body.errcode).toBe('M_MISSING_TOKEN');
    const big = await upload(bytes(1001));
    expect([big.status, big.body.errcode]).toEqual([413, 'M_TOO_LARGE']);
    const refused = await upload(bytes(10), 'video/mp4');
    expect([refused.status, refused.body.errcode]).toEqual([403, 'M_FORBIDDEN']);
    expect((await upload(bytes(10), 'application/x-msdownload; charset=binary')).status).toBe(403);

    const config = await api(s, 'GET', '/_matrix/client/v1/media/config', { token: alice.accessToken });
    expect(config.body).toEqual({ 'm.upload.size': 1000 });
    expect((await api(s, 'GET', '/_matrix/client/v1/media/config')).body.errcode).toBe('M_MISSING_TOKEN');
    expect((await api(s, 'GET', '/_matrix/client/v1/media/preview_url?url=https%3A%2F%2Fmatrix.org', { token: alice.accessToken })).body).toEqual({});
    expect((await api(s, 'GET', '/_matrix/client/v1/media/preview_url', { token: alice.accessToken, unchecked: true })).body.errcode).toBe('M_MISSING_PARAM');

    const name = s.homeserver.serverName;
    const missing = await api(s, 'GET', `/_matrix/client/v1/media/download/${name}/nothingHere`, { token: alice.accessToken, unchecked: true });
    expect([missing.status, missing.body.errcode]).toEqual([404, 'M_NOT_FOUND']);
    expect((await api(s, 'GET', `/_matrix/client/v1/media/download/${name}/nothingHere`, { unchecked: true })).body.errcode).toBe('M_MISSING_TOKEN');
    expect((await api(s, 'GET', `/_matrix/client/v1/media/download/${name}/bad%20id`, { token: alice.accessToken, unchecked: true })).status).toBe(404);

    // Create, then upload: not yet uploaded, another user, overwrite.
    const created = await api(s, 'POST', '/_matrix/media/v1/create', { token: alice.accessToken });
    expect(created.status).toBe(200);
    expect(created.body.unused_expires_at).toBeGreaterThan(Date.now());
    const path = created.body.content_uri.slice(6);
    const early = await api(s, 'GET', `/_matrix/client/v1/media/download/${path}?timeout_ms=0`, { token: alice.accessToken, unchecked: true });
    expect([early.status, early.body.errcode]).toEqual([504, 'M_NOT_YET_UPLOADED']);
    const put = (token: string) => api(s, 'PUT', `/_matrix/media/v3/upload/${path}`, { token, rawBody: new TextEncoder().encode('hello') as Uint8Array<ArrayBuffer>, headers: { 'content-type': 'text/plain' } });
    const byBob = await put(bob.accessToken);
    expect([byBob.status, byBob.body.errcode]).toEqual([403, 'M_FORBIDDEN']);
    // A download waiting for the content gets it as soon as it is uploaded.
    const waiting = get(s, `/_matrix/client/v1/media/download/${path}?timeout_ms=10000`, alice.accessToken);
    expect((await put(alice.accessToken)).status).toBe(200);
    expect(await (await waiting).text()).toBe('hello');
    const again = await put(alice.accessToken);
    expect([again.status, again.body.errcode]).toEqual([409, 'M_CANNOT_OVERWRITE_MEDIA']);
    const unknownId = await api(s, 'PUT', `/_matrix/media/v3/upload/${name}/neverCreated`, { token: alice.accessToken, rawBody: bytes(1), headers: { 'content-type': 'text/plain' } });
    expect([unknownId.status, unknownId.body.errcode]).toEqual([404, 'M_NOT_FOUND']);

    // Thumbnails: bad sizes, and content that is not an image.
    const thumb = (query: string) => api(s, 'GET', `/_matrix/client/v1/media/thumbnail/${path}${query}`, { token: alice.accessToken, unchecked: true });
    expect((await thumb('?width=abc&height=10')).status).toBe(400);
    expect((await thumb('?height=10')).body.errcode).toBe('M_MISSING_PARAM');
    expect((await thumb('?width=10&height=10&method=stretch')).status).toBe(400);
    const notImage = await thumb('?width=32&height=32');
    expect([notImage.status, notImage.body.errcode]).toEqual([400, 'M_UNKNOWN']);
    const broken = await upload(bytes(100), 'image/png');
    const brokenThumb = await api(s, 'GET', `/_matrix/client/v1/media/thumbnail/${broken.body.content_uri.slice(6)}?width=32&height=32`, { token: alice.accessToken, unchecked: true });
    expect([brokenThumb.status, brokenThumb.body.errcode]).toEqual([400, 'M_UNKNOWN']);

    // Wrong method on a media path: 405, not 404.
    expect((await api(s, 'DELETE', '/_matrix/media/v3/upload', { token: alice.accessToken, unchecked: true })).status).toBe(405);
  });

  it('holds each user to their quota', async () => {
    const s = await server({ config: { quotaBytesPerUser: 2500 } });
    const alice = await register(s, 'alice');
    const bob = await register(s, 'bob');
    const upload = (token: string, n: number) => api(s, 'POST', '/_matrix/media/v3/upload', { token, rawBody: new Uint8Array(n) as Uint8Array<ArrayBuffer>, headers: { 'content-type': 'application/octet-stream' } });
    expect((await upload(alice.accessToken, 1000)).status).toBe(200);
    expect((await upload(alice.accessToken, 1000)).status).toBe(200);
    const over = await upload(alice.accessToken, 1000);
    expect([over.status, over.body.errcode]).toEqual([403, 'M_FORBIDDEN']);
    expect(over.body.error).toMatch(/quota/);
    // Another user has their own; the refused upload left nothing behind.
    expect((await upload(bob.accessToken, 2000)).status).toBe(200);
    expect(await s.homeserver.services.media.usage(alice.userId)).toBe(2000);
  });
});

describe('media across servers', () => {
  const downloadOn = async (server: FederatedServer, token: string, mxc: string, suffix = '') => {
    const response = await server.homeserver.fetch(new Request(`http://hearth.test/_matrix/client/v1/media/${suffix ? 'thumbnail' : 'download'}/${mxc.slice(6)}${suffix}`, { headers: { authorization: `Bearer ${token}` } }));
    return { status: response.status, headers: response.headers, bytes: new Uint8Array(await response.arrayBuffer()) };
  };
  const uploadOn = async (server: FederatedServer, token: string, bytes: Uint8Array<ArrayBuffer>, name: string) => {
    const response = await server.homeserver.fetch(
      new Request(`http://hearth.test/_matrix/media/v3/upload?filename=${name}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'image/png' }, body: bytes }),
    );
    return ((await response.json()) as { content_uri: string }).content_uri;
  };
  const mediaRequests = (server: FederatedServer, kind: 'download' | 'thumbnail') => server.sent.filter((e) => e.path.startsWith(`/_matrix/federation/v1/media/${kind}/`));

  it('fetches an image uploaded on A from A when B first needs it, then serves it from its bounded cache', async () => {
    const png = await noise(200, 100);
    const other = await noise(150, 150);
    // B's cache holds one of these images, not both.
    const limit = Math.max(png.byteLength, other.byteLength) + 8000;
    const { servers, close } = await federatedServers(2, { media: { thumbnailer: new SharpThumbnailer(), config: { remoteCacheBytes: limit } } });
    closers.push(close);
    const [a, b] = servers as [FederatedServer, FederatedServer];
    const alice = await a.register('alice');
    const bob = await b.register('bob');
    const mxc = await uploadOn(a, alice.accessToken, png, 'wide.png');

    const first = await downloadOn(b, bob.accessToken, mxc);
    expect(first.status).toBe(200);
    expect(first.bytes).toEqual(png);
    expect(first.headers.get('content-type')).toBe('image/png');
    expect(first.headers.get('content-disposition')).toBe('inline; filename="wide.png"');
    expect(mediaRequests(b, 'download')).toHaveLength(1);
    expect(mediaRequests(b, 'download')[0]!.status).toBe(200);

    // Cached: the second download does not go to A.
    expect((await downloadOn(b, bob.accessToken, mxc)).bytes).toEqual(png);
    expect(mediaRequests(b, 'download')).toHaveLength(1);

    // allow_remote=false: B does not ask A for what it has not cached.
    const mxc2 = await uploadOn(a, alice.accessToken, other, 'square.png');
    const noRemote = await b.homeserver.fetch(new Request(`http://hearth.test/_matrix/client/v1/media/download/${mxc2.slice(6)}?allow_remote=false`, { headers: { authorization: `Bearer ${bob.accessToken}` } }));
    expect(noRemote.status).toBe(404);

    // A thumbnail of media B has not cached comes from A's thumbnail route.
    const thumb = await downloadOn(b, bob.accessToken, mxc2, '?width=32&height=32&method=crop');
    expect(thumb.status).toBe(200);
    expect(await dimensions(thumb.bytes)).toEqual({ width: 32, height: 32, format: 'png' });
    expect(mediaRequests(b, 'thumbnail')).toHaveLength(1);
    expect((await downloadOn(b, bob.accessToken, mxc2, '?width=32&height=32&method=crop')).bytes).toEqual(thumb.bytes);
    expect(mediaRequests(b, 'thumbnail')).toHaveLength(1);

    // The second image pushes the first out of B's cache, which stays within its bound.
    expect((await downloadOn(b, bob.accessToken, mxc2)).bytes).toEqual(other);
    expect(await b.homeserver.services.media.remoteCacheSize()).toBeLessThanOrEqual(limit);
    expect((await downloadOn(b, bob.accessToken, mxc)).bytes).toEqual(png);
    expect(mediaRequests(b, 'download')).toHaveLength(3);

    // Unknown remote media: A's 404 is B's.
    const unknown = await downloadOn(b, bob.accessToken, `mxc://${a.serverName}/doesNotExist`);
    expect(unknown.status).toBe(404);
  });
});

describe('media on the Node host', () => {
  it('keeps uploads in files under the data folder across a restart', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'hearth-media-'));
    directories.push(dir);
    const png = await image(64, 64);
    const first = await startNodeHost({ dataDir: dir, port: 0, rateLimits: false });
    const alice = await register(first, 'alice');
    let mxc: string;
    try {
      const upload = await api(first, 'POST', '/_matrix/media/v3/upload?filename=kept.png', { token: alice.accessToken, rawBody: png, headers: { 'content-type': 'image/png' } });
      mxc = upload.body.content_uri;
      expect((await get(first, `/_matrix/client/v1/media/thumbnail/${mxc.slice(6)}?width=32&height=32&method=crop`, alice.accessToken)).status).toBe(200);
    } finally {
      await first.close();
    }
    // The bytes are files of their own (image and thumbnail), not in the database.
    const folders = await readdir(join(dir, 'media'));
    const files = (await Promise.all(folders.map((f) => readdir(join(dir, 'media', f))))).flat();
    expect(files.filter((f) => !f.endsWith('.tmp'))).toHaveLength(2);
    // What a crash could leave: a blob whose row never committed, and a put cut short.
    await mkdir(join(dir, 'media', 'zz'), { recursive: true });
    await writeFile(join(dir, 'media', 'zz', 'zzorphan'), 'orphan');
    await writeFile(join(dir, 'media', 'zz', 'zztorn.tmp'), 'torn');

    const second = await startNodeHost({ dataDir: dir, port: 0, rateLimits: false });
    try {
      // The start-up sweep removed both, and only them.
      expect(await readdir(join(dir, 'media', 'zz'))).toEqual([]);
      const kept = (await Promise.all(folders.map((f) => readdir(join(dir, 'media', f))))).flat();
      expect(kept.sort()).toEqual(files.filter((f) => !f.endsWith('.tmp')).sort());
      const response = await get(second, `/_matrix/client/v1/media/download/${mxc.slice(6)}`, alice.accessToken);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-disposition')).toBe('inline; filename="kept.png"');
      expect(new Uint8Array(await response.arrayBuffer())).toEqual(png);
    } finally {
      await second.close();
    }
  });

  it('carries a 6 MiB file between two hosts over libp2p (more than the default 4 MiB answer bound)', async () => {
    const host = async (listen: string[], bootstrap: string[] = []) => {
      const dir = await mkdtemp(join(tmpdir(), 'hearth-media-p2p-'));
      directories.push(dir);
      const started = await startNodeHost({ dataDir: dir, port: 0, listen, bootstrap, rateLimits: false });
      closers.push(() => started.close());
      return started;
    };
    const a = await host(['/ip4/127.0.0.1/tcp/0']);
    const b = await host([], [a.p2p.multiaddrs()[0]!]);
    const alice = await register(a, 'alice');
    const bob = await register(b, 'bob');
    const bytes = new Uint8Array(6 * 1024 * 1024) as Uint8Array<ArrayBuffer>;
    for (let i = 0; i < bytes.length; i += 65536) crypto.getRandomValues(bytes.subarray(i, i + 65536));
    const upload = await api(a, 'POST', '/_matrix/media/v3/upload?filename=big.bin', { token: alice.accessToken, rawBody: bytes, headers: { 'content-type': 'application/octet-stream' } });
    expect(upload.status).toBe(200);
    const response = await get(b, `/_matrix/client/v1/media/download/${upload.body.content_uri.slice(6)}`, bob.accessToken);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-disposition')).toBe('attachment; filename="big.bin"');
    // Compared as buffers: a deep toEqual of 6 million elements takes vitest half a minute.
    expect(Buffer.from(await response.arrayBuffer()).equals(Buffer.from(bytes))).toBe(true);
  });
});

void sdk;
