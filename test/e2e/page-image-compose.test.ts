import { readFile } from 'node:fs/promises';
import type { Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { pageFetch, sendThroughUi, storedSession } from './hearth-page.ts';
import { meetInEncryptedDm, startPagePair, type PagePair } from './page-pair.ts';
import { png } from './png.ts';

// Issue 38: "a picked image is sent at once, with no preview or caption: add both, plus paste and
// drag-and-drop." Two browser homeservers meet through a Node relay and Ana starts an encrypted DM with
// Ben. A file Ana picks (the attach button), pastes into the composer or drops on the room opens a
// preview first: the image itself (from a blob: URL, under the page's Content-Security-Policy), its name
// and size, a caption field, Send and Cancel. Send uploads it (encrypted, in the DM) and Ben sees it with
// the caption under it; Cancel, or Escape, sends nothing. A file that is not an image gets the same
// preview without a picture. On the wire (a public room, read back raw) the caption follows Matrix v1.10:
// `body` the caption, `format`/`formatted_body` its markdown, `filename` the name; no caption, both the name.

let pair: PagePair;
let pageA: Page;
let pageB: Page;
let dmId: string;

const IMAGE = await png(6, 4);
const NOTES = Buffer.from('Minutes: the kettle is descaled; tea at four.\n'.repeat(12));
/** What the browser refused under the page's Content-Security-Policy while the pages ran: nothing, it must be. */
const refused: string[] = [];

const preview = (page: Page): Locator => page.getByRole('dialog', { name: /^Send (an image|a file|\d+ files)$/ });
const timeline = (page: Page): Locator => page.getByRole('list', { name: 'Timeline' });
/** A sent message (it has an event ID) that carries the file `name`. */
const sentFile = (page: Page, name: string): Locator =>
  timeline(page).locator('.event[data-event-id]').filter({ has: page.locator(`.attachment img[alt="${name}"], .attachment button[aria-label="Download ${name}"]`) });
const drawnWidth = (image: Locator): Promise<number> => image.evaluate((img: HTMLImageElement) => (img.complete ? img.naturalWidth : 0));

/** Picks files the way a person does: the composer's attach button opens the file chooser. */
async function pick(page: Page, files: { name: string; mimeType: string; buffer: Buffer }[]): Promise<void> {
  const chooser = page.waitForEvent('filechooser');
  await page.getByRole('button', { name: 'Attach a file' }).click();
  await (await chooser).setFiles(files);
}

/** Dispatches a file drag onto `target` (dragenter, dragover, drop, as a browser does): whether each was cancelled, and whether the room was outlined meanwhile. */
function dropFiles(target: Locator, files: { name: string; type: string; bytes: number[] }[]): Promise<{ enter: boolean; over: boolean; outlined: boolean; drop: boolean; outlinedAfter: boolean }> {
  return target.evaluate((element, files) => {
    const data = new DataTransfer();
    for (const { name, type, bytes } of files) data.items.add(new File([new Uint8Array(bytes)], name, { type }));
    // dispatchEvent answers false when a listener cancelled it: a browser drops only where dragover was cancelled.
    const fire = (type: string): boolean => !element.dispatchEvent(new DragEvent(type, { dataTransfer: data, bubbles: true, cancelable: true }));
    const room = element.closest('.room')!;
    const enter = fire('dragenter');
    const over = fire('dragover');
    const outlined = room.classList.contains('drop-target');
    return { enter, over, outlined, drop: fire('drop'), outlinedAfter: room.classList.contains('drop-target') };
  }, files);
}

beforeAll(async () => {
  pair = await startPagePair(inject('hearthDist'), 'compose');
  ({ pageA, pageB } = pair);
  for (const page of [pageA, pageB]) page.on('console', (message) => void (/Content Security Policy/i.test(message.text()) && refused.push(message.text())));
  dmId = await meetInEncryptedDm(pair);
}, 180_000);

afterAll(async () => {
  await pair?.close();
});

describe('an image is previewed, captioned and sent only on Send', () => {
  it('picked: the preview shows it, its name and size; its caption reaches Ben under the image, encrypted', async () => {
    await pick(pageA, [{ name: 'kettle.png', mimeType: 'image/png', buffer: IMAGE }]);
    const dialog = preview(pageA);
    await dialog.getByRole('heading', { name: 'Send an image' }).waitFor();
    // The image itself, drawn from the file before anything is uploaded, with its name and size.
    const shown = dialog.getByRole('img', { name: 'kettle.png' });
    expect(await shown.getAttribute('src')).toMatch(/^blob:/);
    await expect.poll(() => drawnWidth(shown)).toBe(6);
    await dialog.getByText('kettle.png', { exact: true }).waitFor();
    await dialog.getByText(`${IMAGE.length} B`, { exact: true }).waitFor();
    expect(await timeline(pageA).locator('.event.upload').count()).toBe(0);
    // The caption field has the focus: the person can type at once.
    const caption = dialog.getByRole('textbox', { name: 'Caption' });
    expect(await caption.evaluate((field) => field === document.activeElement)).toBe(true);
    await caption.fill('Freshly **descaled**, ready for tea');
    await dialog.getByRole('button', { name: 'Send' }).click();
    await dialog.waitFor({ state: 'detached' });

    // Both pages: the image drawn (decrypted), the caption under it, its markdown formatted.
    for (const page of [pageA, pageB]) {
      const figure = sentFile(page, 'kettle.png').getByRole('figure', { name: 'Freshly descaled, ready for tea' });
      await figure.waitFor({ timeout: 30_000 });
      await expect.poll(() => drawnWidth(figure.getByRole('img', { name: 'kettle.png' })), { timeout: 30_000 }).toBe(6);
      expect(await figure.locator('figcaption strong').textContent()).toBe('descaled');
    }
    // What Ana's homeserver holds is ciphertext: neither the caption nor the name is readable there.
    const eventId = (await sentFile(pageA, 'kettle.png').getAttribute('data-event-id'))!;
    const { accessToken } = await storedSession(pageA);
    const stored = await pageFetch(pageA, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(dmId)}/event/${encodeURIComponent(eventId)}`, { token: accessToken });
    expect(stored.status).toBe(200);
    expect((stored.body as { type: string }).type).toBe('m.room.encrypted');
    expect(JSON.stringify(stored.body)).not.toMatch(/descaled|kettle/);
  }, 120_000);

  it('Cancel, or Escape, sends nothing', async () => {
    await pick(pageA, [{ name: 'not-this.png', mimeType: 'image/png', buffer: IMAGE }]);
    await preview(pageA).getByRole('textbox', { name: 'Caption' }).fill('Never sent');
    await preview(pageA).getByRole('button', { name: 'Cancel' }).click();
    await preview(pageA).waitFor({ state: 'detached' });
    await pick(pageA, [{ name: 'not-this.png', mimeType: 'image/png', buffer: IMAGE }]);
    await preview(pageA).getByRole('heading', { name: 'Send an image' }).waitFor();
    await pageA.keyboard.press('Escape');
    await preview(pageA).waitFor({ state: 'detached' });
    // A message sent after: once Ben has it, an upload started before it would show on Ana's page (and in time on Ben's).
    await sendThroughUi(pageA, 'Nothing attached');
    await timeline(pageB).locator('.event[data-event-id]', { hasText: 'Nothing attached' }).waitFor({ timeout: 30_000 });
    for (const page of [pageA, pageB]) {
      expect(await timeline(page).getByText(/not-this\.png|Never sent/).count()).toBe(0);
      expect(await timeline(page).locator('img[alt="not-this.png"]').count()).toBe(0);
    }
    expect(await timeline(pageA).locator('.event.upload').count()).toBe(0);
  }, 60_000);

  it('pasted into the composer: the same preview, and its caption goes with it', async () => {
    const composer = pageA.getByRole('textbox', { name: 'Message' });
    await composer.focus();
    // A paste as a browser makes it when an image is on the clipboard: the page takes it (cancels the paste).
    const taken = await composer.evaluate((field, bytes) => {
      const data = new DataTransfer();
      data.items.add(new File([new Uint8Array(bytes)], 'image.png', { type: 'image/png' }));
      return !field.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));
    }, [...IMAGE]);
    expect(taken).toBe(true);
    const dialog = preview(pageA);
    await expect.poll(() => drawnWidth(dialog.getByRole('img', { name: 'image.png' }))).toBe(6);
    await dialog.getByRole('textbox', { name: 'Caption' }).fill('From the clipboard');
    await dialog.getByRole('textbox', { name: 'Caption' }).press('Enter');
    await dialog.waitFor({ state: 'detached' });
    const figure = sentFile(pageB, 'image.png').getByRole('figure', { name: 'From the clipboard' });
    await figure.waitFor({ timeout: 30_000 });
    await expect.poll(() => drawnWidth(figure.getByRole('img', { name: 'image.png' })), { timeout: 30_000 }).toBe(6);
  }, 60_000);

  it('dropped on the timeline: a file that is not an image gets the preview without a picture, and downloads as it was', async () => {
    const dropped = await dropFiles(timeline(pageA), [{ name: 'notes.txt', type: 'text/plain', bytes: [...NOTES] }]);
    expect(dropped).toEqual({ enter: true, over: true, outlined: true, drop: true, outlinedAfter: false });
    const dialog = preview(pageA);
    await dialog.getByRole('heading', { name: 'Send a file' }).waitFor();
    await dialog.getByText('notes.txt', { exact: true }).waitFor();
    await dialog.getByText('552 B', { exact: true }).waitFor();
    expect(await dialog.getByRole('img').count()).toBe(0);
    await dialog.getByRole('textbox', { name: 'Caption' }).fill('Minutes of Tuesday');
    await dialog.getByRole('button', { name: 'Send' }).click();
    await dialog.waitFor({ state: 'detached' });

    const figure = sentFile(pageB, 'notes.txt').getByRole('figure', { name: 'Minutes of Tuesday' });
    await figure.waitFor({ timeout: 30_000 });
    const download = pageB.waitForEvent('download');
    await figure.getByRole('button', { name: 'Download notes.txt' }).click();
    const saved = await download;
    expect(saved.suggestedFilename()).toBe('notes.txt');
    expect(await readFile((await saved.path())!)).toEqual(NOTES);
  }, 60_000);

  it('dropped on the composer, two at once: one caption each, and a file left without one shows none', async () => {
    const dropped = await dropFiles(pageA.getByRole('textbox', { name: 'Message' }), [
      { name: 'cups.png', type: 'image/png', bytes: [...IMAGE] },
      { name: 'list.txt', type: 'text/plain', bytes: [...Buffer.from('four cups\n')] },
    ]);
    expect(dropped).toMatchObject({ over: true, drop: true });
    const dialog = preview(pageA);
    await dialog.getByRole('heading', { name: 'Send 2 files' }).waitFor();
    await expect.poll(() => drawnWidth(dialog.getByRole('img', { name: 'cups.png' }))).toBe(6);
    await dialog.getByRole('textbox', { name: 'Caption for cups.png' }).fill('Four of these');
    await dialog.getByRole('textbox', { name: 'Caption for list.txt' }).waitFor();
    await dialog.getByRole('button', { name: 'Send' }).click();
    await dialog.waitFor({ state: 'detached' });

    await sentFile(pageB, 'cups.png').getByRole('figure', { name: 'Four of these' }).waitFor({ timeout: 30_000 });
    const list = sentFile(pageB, 'list.txt');
    await list.waitFor({ timeout: 30_000 });
    expect(await list.locator('figcaption').count()).toBe(0);
  }, 60_000);
});

describe('on the wire', () => {
  it('in a public room, read back raw: body is the caption (and its markdown), filename the name; without one, both the name', async () => {
    await pageA.getByLabel('New room name').fill('Kitchen notices');
    await pageA.getByLabel('Public room (not encrypted)').check();
    await pageA.getByRole('button', { name: 'Create', exact: true }).click();
    await pageA.locator('.room-encryption', { hasText: 'Public room: not encrypted' }).waitFor();
    const roomId = (await pageA.locator('.room-id').getAttribute('data-room-id'))!;
    const { accessToken } = await storedSession(pageA);
    const content = async (name: string): Promise<Record<string, unknown>> => {
      await sentFile(pageA, name).waitFor({ timeout: 30_000 });
      const eventId = (await sentFile(pageA, name).getAttribute('data-event-id'))!;
      const { status, body } = await pageFetch(pageA, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/event/${encodeURIComponent(eventId)}`, { token: accessToken });
      expect(status).toBe(200);
      return (body as { content: Record<string, unknown> }).content;
    };

    await pick(pageA, [{ name: 'tea.png', mimeType: 'image/png', buffer: IMAGE }]);
    await preview(pageA).getByRole('textbox', { name: 'Caption' }).fill('Tea at **four**');
    await preview(pageA).getByRole('button', { name: 'Send' }).click();
    expect(await content('tea.png')).toEqual({
      msgtype: 'm.image',
      body: 'Tea at **four**',
      format: 'org.matrix.custom.html',
      formatted_body: 'Tea at <strong>four</strong>',
      filename: 'tea.png',
      info: { mimetype: 'image/png', size: IMAGE.length, w: 6, h: 4 },
      url: expect.stringMatching(/^mxc:\/\//),
    });

    await pick(pageA, [{ name: 'plain.png', mimeType: 'image/png', buffer: IMAGE }]);
    await preview(pageA).getByRole('button', { name: 'Send' }).click();
    expect(await content('plain.png')).toEqual({ msgtype: 'm.image', body: 'plain.png', filename: 'plain.png', info: { mimetype: 'image/png', size: IMAGE.length, w: 6, h: 4 }, url: expect.stringMatching(/^mxc:\/\//) });
    expect(await sentFile(pageA, 'plain.png').locator('figcaption').count()).toBe(0);
  }, 60_000);

  it('the previews (blob: images) and all the rest ran under the page\u2019s Content-Security-Policy with nothing refused', () => {
    expect(refused).toEqual([]);
  });
});
