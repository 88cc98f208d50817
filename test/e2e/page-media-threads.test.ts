import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sendThroughUi, storedSession } from './hearth-page.ts';
import { meetInEncryptedDm, startPagePair, type PagePair } from './page-pair.ts';
import { png } from './png.ts';

// Issue 25, attachments and threads in the page, through the UI: two browser homeservers meet through a
// Node relay, Ana starts an encrypted DM with Ben. Ana sends an image and a file: Ben sees the image
// (decrypted, drawn) and downloads the file as it was, while the media repositories hold only ciphertext.
// In a public room the image goes as it is, thumbnailed by the homeserver. An upload shows a progress
// bar; a file over the upload limit says so, with Retry. Then a thread: Ana opens one on a message and
// replies, Ben sees its summary under the root, opens it and replies, and Ana's summary counts two.
// Last, at 390 px: the composer's attach button works, its preview fits the screen (a large image goes
// with a thumbnail the page made) and the thread pane takes the room's place, with Back. Each file goes
// through the preview (page-image-compose.test.ts tests it and its captions), sent here with none.

let pair: PagePair;
let pageA: Page;
let pageB: Page;

const IMAGE = await png(6, 4);
const NOTES = Buffer.from('Meeting notes: bring the kettle.\n'.repeat(20));

/** Picks files the way a person does: the composer's attach button opens the file chooser; the preview opens (issue 38). */
async function pick(page: Page, files: { name: string; mimeType: string; buffer: Buffer }[]): Promise<ReturnType<Page['getByRole']>> {
  const chooser = page.waitForEvent('filechooser');
  await page.getByRole('button', { name: 'Attach a file' }).click();
  await (await chooser).setFiles(files);
  const preview = page.getByRole('dialog', { name: /^Send / });
  await preview.waitFor();
  return preview;
}

/** Attaches files: picked, and sent from the preview with no caption. */
async function attach(page: Page, files: { name: string; mimeType: string; buffer: Buffer }[]): Promise<void> {
  const preview = await pick(page, files);
  await preview.getByRole('button', { name: 'Send' }).click();
  await preview.waitFor({ state: 'detached' });
}

/** The bytes the homeserver in `page` serves for an mxc URI, fetched raw with the access token (nothing decrypts them). */
async function rawMedia(page: Page, mxc: string): Promise<{ bytes: Buffer; disposition: string | null }> {
  const { accessToken } = await storedSession(page);
  const [server, mediaId] = mxc.replace('mxc://', '').split('/');
  const result = await page.evaluate(
    async ({ path, token }) => {
      const response = await fetch(path, { headers: { authorization: `Bearer ${token}` } });
      if (!response.ok) throw new Error(`download: ${response.status} ${await response.text()}`);
      return { bytes: [...new Uint8Array(await response.arrayBuffer())], disposition: response.headers.get('content-disposition') };
    },
    { path: `/_matrix/client/v1/media/download/${server}/${mediaId}`, token: accessToken },
  );
  return { bytes: Buffer.from(result.bytes), disposition: result.disposition };
}

const naturalWidth = (image: ReturnType<Page['locator']>) => image.evaluate((img: HTMLImageElement) => (img.complete ? img.naturalWidth : 0));

/** The image `name` is drawn in `page` as a thumbnail `thumbnailWidth` wide; a click opens it `fullWidth` wide, and Close shuts it. */
async function expectImage(page: Page, name: string, thumbnailWidth: number, fullWidth: number): Promise<void> {
  const image = page.locator(`.event[data-event-id] img.attachment-thumbnail[alt="${name}"]`);
  await image.waitFor({ timeout: 30_000 });
  await expect.poll(() => naturalWidth(image)).toBe(thumbnailWidth);
  await page.getByRole('button', { name: `Open image ${name}` }).click();
  await expect.poll(() => naturalWidth(page.locator('dialog.lightbox img'))).toBe(fullWidth);
  await page.locator('dialog.lightbox').getByRole('button', { name: 'Close' }).click();
  await page.locator('dialog.lightbox').waitFor({ state: 'detached' });
}

beforeAll(async () => {
  pair = await startPagePair(inject('hearthDist'), 'media');
  ({ pageA, pageB } = pair);
  await meetInEncryptedDm(pair);
}, 180_000);

afterAll(async () => {
  await pair?.close();
});

describe('attachments', () => {
  it('in an encrypted DM: Ben sees the image and downloads the file; the media repositories hold ciphertext', async () => {
    await attach(pageA, [
      { name: 'kettle.png', mimeType: 'image/png', buffer: IMAGE },
      { name: 'notes.txt', mimeType: 'text/plain', buffer: NOTES },
    ]);
    // Ben's page: the image decrypted and drawn inline (small: no thumbnail of its own); a click opens the full image.
    await expectImage(pageB, 'kettle.png', 6, 6);

    // The file, with its name and size, downloads as it was sent.
    const file = pageB.locator('.event[data-event-id] .attachment-file', { hasText: 'notes.txt' });
    await file.waitFor({ timeout: 30_000 });
    expect(await file.locator('.attachment-size').textContent()).toBe(' (660 B)');
    const download = pageB.waitForEvent('download');
    await file.getByRole('button', { name: 'Download notes.txt' }).click();
    const saved = await download;
    expect(saved.suggestedFilename()).toBe('notes.txt');
    expect(await readFile((await saved.path())!)).toEqual(NOTES);

    // What Ana's homeserver stores, and Ben's fetched over federation, is ciphertext of the same length, with no file name.
    const imageMxc = (await pageB.locator('.attachment[data-mxc]:has(img[alt="kettle.png"])').getAttribute('data-mxc'))!;
    const fileMxc = (await file.getAttribute('data-mxc'))!;
    expect(imageMxc).toMatch(/^mxc:\/\//);
    for (const page of [pageA, pageB]) {
      const storedImage = await rawMedia(page, imageMxc);
      expect(storedImage.bytes.length).toBe(IMAGE.length);
      expect(storedImage.bytes.equals(IMAGE)).toBe(false);
      expect(storedImage.bytes.subarray(0, 8).equals(IMAGE.subarray(0, 8))).toBe(false);
      expect(storedImage.disposition ?? '').not.toContain('kettle');
      const storedFile = await rawMedia(page, fileMxc);
      expect(storedFile.bytes.length).toBe(NOTES.length);
      expect(storedFile.bytes.equals(NOTES)).toBe(false);
      expect(storedFile.bytes.toString()).not.toContain('kettle');
    }
  }, 120_000);

  it('in a public room the image goes as it is, shown by the homeserver\u2019s thumbnail', async () => {
    await pageA.getByLabel('New room name').fill('Open kitchen');
    await pageA.getByLabel('Public room (not encrypted)').check();
    await pageA.getByRole('button', { name: 'Create', exact: true }).click();
    await pageA.locator('.room-encryption', { hasText: 'Public room: not encrypted' }).waitFor();
    const photo = await png(1000, 700);
    await attach(pageA, [{ name: 'open.png', mimeType: 'image/png', buffer: photo }]);
    // Shown by the homeserver's thumbnail (scaled into 800 × 600), the full image on a click.
    await expectImage(pageA, 'open.png', 800, 1000);
    const mxc = (await pageA.locator('.attachment[data-mxc]:has(img[alt="open.png"])').getAttribute('data-mxc'))!;
    const stored = await rawMedia(pageA, mxc);
    expect(stored.bytes.equals(photo)).toBe(true);
    expect(stored.disposition).toContain('open.png');
  }, 60_000);

  it('an upload shows a progress bar that goes through its percentages to 100 % until the message is sent', async () => {
    // The upload's bars as the page draws them (every redraw replaces it), watched as they come: label and value (none: indeterminate).
    await pageA.evaluate(() => {
      const seen: { label: string; value: string | null }[] = ((globalThis as any).progressSeen = []);
      new MutationObserver(() => {
        for (const bar of document.querySelectorAll<HTMLProgressElement>('progress.upload-progress')) seen.push({ label: bar.getAttribute('aria-label') ?? '', value: bar.getAttribute('value') });
      }).observe(document.body, { childList: true, subtree: true });
    });
    // 6 MiB no two 256 KiB chunks of which are alike.
    const big = Buffer.alloc(6 * 1024 * 1024);
    for (let i = 0; i < big.length; i += 4) big.writeUInt32LE((i * 2654435761) >>> 0, i);
    await attach(pageA, [{ name: 'big.bin', mimeType: 'application/octet-stream', buffer: big }]);
    const sent = pageA.locator('.event[data-event-id] .attachment-file', { hasText: 'big.bin' });
    await sent.waitFor({ timeout: 60_000 });
    expect(await sent.locator('.attachment-size').textContent()).toBe(' (6.0 MB)');
    await pageA.locator('progress.upload-progress').waitFor({ state: 'detached' });
    const seen: { label: string; value: string | null }[] = await pageA.evaluate(() => (globalThis as any).progressSeen);
    expect(new Set(seen.map((s) => s.label))).toEqual(new Set(['Uploading big.bin']));
    // The page's homeserver is its own tab's core: the bar is determinate, rising through values between 0 and 100, to 100.
    // The page draws once a frame, so how many of the 24 chunks' values show depends on how fast the machine takes them.
    const values = [...new Set(seen.flatMap((s) => (s.value === null ? [] : [Number(s.value)])))];
    expect(values).toEqual([...values].sort((a, b) => a - b));
    expect(values.filter((v) => v > 0 && v < 100).length).toBeGreaterThanOrEqual(2);
    expect(values.at(-1)).toBe(100);
    // What the homeserver stores is the file as it was (a public room: not encrypted).
    const [server, mediaId] = (await sent.getAttribute('data-mxc'))!.replace('mxc://', '').split('/');
    const { accessToken } = await storedSession(pageA);
    const stored = await pageA.evaluate(
      async ({ path, token }) => {
        const response = await fetch(path, { headers: { authorization: `Bearer ${token}` } });
        const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', await response.arrayBuffer()));
        return { status: response.status, sha256: [...digest].map((b) => b.toString(16).padStart(2, '0')).join(''), disposition: response.headers.get('content-disposition') };
      },
      { path: `/_matrix/client/v1/media/download/${server}/${mediaId}`, token: accessToken },
    );
    expect(stored).toEqual({ status: 200, sha256: createHash('sha256').update(big).digest('hex'), disposition: expect.stringContaining('big.bin') });
  }, 90_000);

  it('the host\u2019s upload to its core answers as POST /upload does: the token checked, the limit kept', async () => {
    const { accessToken } = await storedSession(pageA);
    const results = await pageA.evaluate(async (token) => {
      const host = (globalThis as any).hearthPageHost;
      const upload = (accessToken: string, size: number) => host.uploadMedia({ data: new Blob([new Uint8Array(size)]), accessToken, contentType: 'application/octet-stream' }, () => {});
      // Over 8 MiB, which the service worker's bound would refuse before the core: here the core's own limit must.
      return [await upload('not-a-token', 10), await upload(token, 8 * 1024 * 1024 + 1), await upload(token, 10)];
    }, accessToken);
    expect(results[0]).toEqual({ status: 401, body: { errcode: 'M_UNKNOWN_TOKEN', error: expect.any(String), soft_logout: false } });
    expect(results[1]).toEqual({ status: 413, body: { errcode: 'M_TOO_LARGE', error: 'uploads are limited to 8388608 bytes' } });
    expect(results[2]).toEqual({ status: 200, body: { content_uri: expect.stringMatching(/^mxc:\/\//) } });
  }, 60_000);

  it('a file over the upload limit says the limit, with Retry and Delete', async () => {
    await attach(pageA, [{ name: 'huge.bin', mimeType: 'application/octet-stream', buffer: Buffer.alloc(8 * 1024 * 1024 + 1) }]);
    const failed = pageA.locator('.event.upload.failed', { hasText: 'huge.bin' });
    await failed.waitFor({ timeout: 30_000 });
    expect(await failed.getByRole('alert').textContent()).toBe('File too large: it is 8.0 MB, and your homeserver takes files of at most 8.0 MB.');
    await failed.getByRole('button', { name: 'Retry' }).click();
    await pageA.locator('.event.upload.failed', { hasText: 'huge.bin' }).getByRole('alert').waitFor();
    await failed.getByRole('button', { name: 'Delete' }).click();
    await failed.waitFor({ state: 'detached' });
    // Back to the DM for what follows.
    await pageA.getByRole('list', { name: 'Direct chats' }).locator('.room-item').click();
    await pageA.locator('.room-encryption', { hasText: /^Encrypted$/ }).waitFor();
  }, 60_000);
});

describe('threads', () => {
  it('Ana opens a thread and replies; Ben sees the summary, opens it and replies; Ana\u2019s summary counts two', async () => {
    await sendThroughUi(pageA, 'Who brings the cups?');
    const rootOnA = pageA.locator('.room .event[data-event-id]', { hasText: 'Who brings the cups?' });
    await rootOnA.getByRole('button', { name: 'Reply in thread' }).click();
    const threadA = pageA.getByRole('region', { name: 'Thread' });
    await threadA.locator('.thread-root', { hasText: 'Who brings the cups?' }).waitFor();
    await threadA.getByLabel('Thread reply').fill('I can bring four');
    await threadA.getByRole('button', { name: 'Send' }).click();
    await threadA.locator('.event:not(.pending) .body', { hasText: 'I can bring four' }).waitFor({ timeout: 30_000 });
    await rootOnA.locator('.thread-summary .thread-count', { hasText: /^1 reply$/ }).waitFor({ timeout: 30_000 });

    // Ben: the summary under the root, the reply not in the main timeline.
    const rootOnB = pageB.locator('.room .event[data-event-id]', { hasText: 'Who brings the cups?' });
    const summaryB = rootOnB.locator('.thread-summary');
    await summaryB.locator('.thread-count', { hasText: /^1 reply$/ }).waitFor({ timeout: 30_000 });
    await summaryB.locator('.thread-latest', { hasText: /^ana: I can bring four$/ }).waitFor({ timeout: 30_000 });
    expect(await pageB.locator('.room .timeline .body', { hasText: 'I can bring four' }).count()).toBe(0);
    await summaryB.click();
    const threadB = pageB.getByRole('region', { name: 'Thread' });
    await threadB.locator('.thread-root', { hasText: 'Who brings the cups?' }).waitFor();
    await threadB.locator('.event:not(.pending) .body', { hasText: 'I can bring four' }).waitFor({ timeout: 30_000 });
    await threadB.getByLabel('Thread reply').fill('And I the milk');
    await threadB.getByRole('button', { name: 'Send' }).click();
    await threadB.locator('.event:not(.pending) .body', { hasText: 'And I the milk' }).waitFor({ timeout: 30_000 });

    await rootOnA.locator('.thread-summary .thread-count', { hasText: /^2 replies$/ }).waitFor({ timeout: 30_000 });
    await rootOnA.locator('.thread-latest', { hasText: /^ben: And I the milk$/ }).waitFor({ timeout: 30_000 });
    await threadA.locator('.event:not(.pending) .body', { hasText: 'And I the milk' }).waitFor({ timeout: 30_000 });
    expect(await pageA.locator('.room .timeline .body', { hasText: /I can bring four|And I the milk/ }).count()).toBe(0);
    // Closed, the pane goes and the members are back.
    await threadB.getByRole('button', { name: 'Back' }).click();
    await threadB.waitFor({ state: 'hidden' });
    await pageB.getByRole('complementary', { name: 'Members' }).waitFor();
  }, 120_000);

  it('after a reload, Ben lists the room’s threads, opens one from the list and goes Back to it', async () => {
    await pageB.reload();
    await pageB.getByRole('list', { name: 'Direct chats' }).locator('.room-item').click({ timeout: 60_000 });
    await pageB.getByRole('button', { name: 'Threads', exact: true }).click();
    const pane = pageB.getByRole('region', { name: 'Thread' });
    const list = pane.getByRole('list', { name: 'Threads' });
    const item = list.locator('.thread-list-item', { hasText: 'Who brings the cups?' });
    await item.locator('.thread-count', { hasText: /^2 replies$/ }).waitFor({ timeout: 30_000 });
    await item.locator('.thread-latest', { hasText: /^ben: And I the milk$/ }).waitFor({ timeout: 30_000 });
    // Only thread roots: the DM's other messages are not listed.
    expect(await list.locator('.thread-list-item').count()).toBe(1);
    await item.locator('.thread-summary').click();
    await pane.locator('.thread-root', { hasText: 'Who brings the cups?' }).waitFor();
    await pane.locator('.event:not(.pending) .body', { hasText: 'I can bring four' }).waitFor({ timeout: 30_000 });
    await pane.getByRole('button', { name: 'Back' }).click();
    await list.waitFor();
    await pane.getByRole('button', { name: 'Back' }).click();
    await pane.waitFor({ state: 'hidden' });
  }, 120_000);
});

describe('at 390 px', () => {
  it('the attach button sends an image, and the thread pane takes the room\u2019s place with Back', async () => {
    await pageB.setViewportSize({ width: 390, height: 844 });
    await pageB.getByRole('button', { name: 'Rooms', exact: true }).click();
    await pageB.getByRole('list', { name: 'Direct chats' }).locator('.room-item').click();
    const attachButton = pageB.getByRole('button', { name: 'Attach a file' });
    const box = (await attachButton.boundingBox())!;
    expect(box.x).toBeGreaterThanOrEqual(0);
    expect(box.x + box.width).toBeLessThanOrEqual(390);
    expect(box.y + box.height).toBeLessThanOrEqual(844);
    // A photo larger than a thumbnail: the page scales it (the homeserver cannot scale ciphertext) and sends both, encrypted.
    // Its preview fits the phone's screen, the picture scaled into it and Send in reach.
    const preview = await pick(pageB, [{ name: 'phone.png', mimeType: 'image/png', buffer: await png(1000, 700) }]);
    for (const part of [preview, preview.getByRole('img', { name: 'phone.png' }), preview.getByRole('button', { name: 'Send' })]) {
      const partBox = (await part.boundingBox())!;
      expect(partBox.x).toBeGreaterThanOrEqual(0);
      expect(partBox.x + partBox.width).toBeLessThanOrEqual(390);
      expect(partBox.y + partBox.height).toBeLessThanOrEqual(844);
    }
    await preview.getByRole('button', { name: 'Send' }).click();
    await preview.waitFor({ state: 'detached' });
    await expectImage(pageA, 'phone.png', 800, 1000);

    // The thread opens in the room's place.
    await pageB.locator('.room .event[data-event-id]', { hasText: 'Who brings the cups?' }).locator('.thread-summary').click();
    const thread = pageB.getByRole('region', { name: 'Thread' });
    await thread.locator('.thread-root', { hasText: 'Who brings the cups?' }).waitFor();
    expect(await pageB.locator('.room').isVisible()).toBe(false);
    const threadBox = (await thread.boundingBox())!;
    expect(threadBox.width).toBeLessThanOrEqual(390);
    expect(threadBox.height).toBeGreaterThan(844 / 2);
    await thread.getByLabel('Thread reply').fill('Sent from my phone');
    await thread.getByRole('button', { name: 'Send' }).click();
    await thread.locator('.event:not(.pending) .body', { hasText: 'Sent from my phone' }).waitFor({ timeout: 30_000 });
    await pageA.locator('.room .event[data-event-id]', { hasText: 'Who brings the cups?' }).locator('.thread-count', { hasText: /^3 replies$/ }).waitFor({ timeout: 30_000 });
    await thread.getByRole('button', { name: 'Back' }).click();
    await pageB.locator('.room').waitFor({ state: 'visible' });
    await thread.waitFor({ state: 'hidden' });
  }, 120_000);
});
