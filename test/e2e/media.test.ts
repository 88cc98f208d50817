import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openHearth, registerThroughUi, startSite, storedSession, type HearthSite } from './hearth-page.ts';

// Media in the browser host (issue 14): an image uploaded through the page's fetch
// (so through the service worker to the core in the Worker) is served back, with a
// thumbnail made by OffscreenCanvas, after a reload; its bytes are a Blob in the
// hearth-media IndexedDB database and nowhere in the SQLite image or its redo log.

let site: HearthSite;
let context: BrowserContext;
let page: Page;

beforeAll(async () => {
  site = await startSite(inject('hearthDist'));
  context = await site.browser.newContext();
  page = await openHearth(context, site.server.url + '/');
  await registerThroughUi(page, 'dana');
});

afterAll(async () => {
  await context?.close();
  await site?.close();
});

interface Uploaded {
  contentUri: string;
  /** Hex SHA-256 of the uploaded bytes. */
  sha256: string;
  /** 32 bytes from the middle of the upload, hex: what the SQLite image must not contain. */
  needle: string;
  size: number;
}

/** Draws a 300 × 200 image with random pixels in the page, uploads it through fetch. */
function uploadFromPage(page: Page, token: string): Promise<Uploaded> {
  return page.evaluate(async (token) => {
    const canvas = new OffscreenCanvas(300, 200);
    const context = canvas.getContext('2d')!;
    const pixels = context.createImageData(300, 200);
    for (let i = 0; i < pixels.data.length; i += 65536) crypto.getRandomValues(pixels.data.subarray(i, i + 65536));
    for (let i = 3; i < pixels.data.length; i += 4) pixels.data[i] = 255;
    context.putImageData(pixels, 0, 0);
    const bytes = new Uint8Array(await (await canvas.convertToBlob({ type: 'image/png' })).arrayBuffer());
    const response = await fetch('/_matrix/media/v3/upload?filename=noise.png', { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'image/png' }, body: bytes });
    if (response.status !== 200) throw new Error(`upload: ${response.status} ${await response.text()}`);
    const hex = (b: Uint8Array) => [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
    const middle = Math.floor(bytes.length / 2);
    return {
      contentUri: ((await response.json()) as { content_uri: string }).content_uri,
      sha256: hex(new Uint8Array(await crypto.subtle.digest('SHA-256', bytes))),
      needle: hex(bytes.subarray(middle, middle + 32)),
      size: bytes.length,
    };
  }, token);
}

/** Downloads through the page: status, headers, hash of the bytes, and the image's size when it is one. */
function downloadFromPage(page: Page, path: string, token: string) {
  return page.evaluate(
    async ({ path, token }) => {
      const response = await fetch(path, { headers: { authorization: `Bearer ${token}` } });
      const blob = await response.blob();
      const bytes = new Uint8Array(await blob.arrayBuffer());
      const sha256 = [...new Uint8Array(await crypto.subtle.digest('SHA-256', bytes))].map((x) => x.toString(16).padStart(2, '0')).join('');
      let width: number | undefined;
      let height: number | undefined;
      if (response.ok && blob.type.startsWith('image/')) {
        const bitmap = await createImageBitmap(blob);
        width = bitmap.width;
        height = bitmap.height;
      }
      return { status: response.status, contentType: response.headers.get('content-type'), disposition: response.headers.get('content-disposition'), sha256, width, height };
    },
    { path, token },
  );
}

/** What IndexedDB holds: the blob count and sizes in hearth-media, and whether any other database has the needle. */
function inspectIndexedDb(page: Page, needle: string) {
  return page.evaluate(async (needleHex) => {
    const needle = new Uint8Array(needleHex.match(/../g)!.map((h) => parseInt(h, 16)));
    const open = (name: string) =>
      new Promise<IDBDatabase>((resolve, reject) => {
        const request = indexedDB.open(name);
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => reject(request.error);
      });
    const all = (db: IDBDatabase, store: string) =>
      new Promise<unknown[]>((resolve, reject) => {
        const request = db.transaction(store).objectStore(store).getAll();
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => reject(request.error);
      });
    const contains = (bytes: Uint8Array) => {
      outer: for (let i = 0; i + needle.length <= bytes.length; i++) {
        for (let j = 0; j < needle.length; j++) if (bytes[i + j] !== needle[j]) continue outer;
        return true;
      }
      return false;
    };
    const holds = async (value: unknown): Promise<boolean> => {
      if (value instanceof Blob) return contains(new Uint8Array(await value.arrayBuffer()));
      if (value instanceof ArrayBuffer) return contains(new Uint8Array(value));
      if (ArrayBuffer.isView(value)) return contains(new Uint8Array(value.buffer, value.byteOffset, value.byteLength));
      if (typeof value === 'object' && value !== null) {
        for (const inner of Object.values(value)) if (await holds(inner)) return true;
      }
      return false;
    };
    const media = await open('hearth-media');
    const blobs = await all(media, 'blobs');
    media.close();
    const elsewhere: string[] = [];
    for (const { name } of await indexedDB.databases()) {
      if (!name || name === 'hearth-media') continue;
      const db = await open(name);
      for (const store of db.objectStoreNames) for (const value of await all(db, store)) if (await holds(value)) elsewhere.push(`${name}/${store}`);
      db.close();
    }
    return {
      databases: (await indexedDB.databases()).map((d) => d.name),
      blobSizes: blobs.map((b) => (b instanceof Blob ? b.size : -1)),
      mediaHasNeedle: (await Promise.all(blobs.map(holds))).some(Boolean),
      elsewhere,
    };
  }, needle);
}

describe('media in the browser', () => {
  it('serves an image uploaded through the page back after a reload, from its own IndexedDB blob store', async () => {
    const { accessToken } = await storedSession(page);
    const uploaded = await uploadFromPage(page, accessToken);
    const path = uploaded.contentUri.slice('mxc://'.length);

    const download = await downloadFromPage(page, `/_matrix/client/v1/media/download/${path}`, accessToken);
    expect(download).toMatchObject({ status: 200, contentType: 'image/png', disposition: 'inline; filename="noise.png"', sha256: uploaded.sha256, width: 300, height: 200 });
    const thumbnail = await downloadFromPage(page, `/_matrix/client/v1/media/thumbnail/${path}?width=96&height=96&method=crop`, accessToken);
    expect(thumbnail).toMatchObject({ status: 200, contentType: 'image/png', width: 96, height: 96 });

    await page.reload();
    await page.waitForFunction(() => document.body.dataset.homeserver === 'ready');
    const after = await downloadFromPage(page, `/_matrix/client/v1/media/download/${path}`, accessToken);
    expect(after).toMatchObject({ status: 200, contentType: 'image/png', sha256: uploaded.sha256 });
    // The thumbnail was kept, not made again: the same bytes.
    const thumbnailAfter = await downloadFromPage(page, `/_matrix/client/v1/media/thumbnail/${path}?width=96&height=96&method=crop`, accessToken);
    expect(thumbnailAfter.sha256).toBe(thumbnail.sha256);

    const stored = await inspectIndexedDb(page, uploaded.needle);
    expect(stored.databases).toContain('hearth');
    // The image and its thumbnail, as blobs of their own; the image's bytes nowhere else.
    expect(stored.blobSizes).toHaveLength(2);
    expect(stored.blobSizes).toContain(uploaded.size);
    expect(stored.mediaHasNeedle).toBe(true);
    expect(stored.elsewhere).toEqual([]);
  });

  it('refuses a body over the service worker bound with 413 M_TOO_LARGE', async () => {
    const { accessToken } = await storedSession(page);
    const result = await page.evaluate(async (token) => {
      const response = await fetch('/_matrix/media/v3/upload', { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' }, body: new Uint8Array(8 * 1024 * 1024 + 1) });
      return { status: response.status, body: await response.json() };
    }, accessToken);
    expect(result.status).toBe(413);
    expect(result.body.errcode).toBe('M_TOO_LARGE');
  });
});
