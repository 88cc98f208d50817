import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRoomThroughUi, openHearth, registerThroughUi, sendThroughUi, startSite, type HearthSite } from './hearth-page.ts';

// Issue 38: "Emoji show as empty boxes where the system has no emoji font; ship one, since the attach button's only
// label is an emoji." The page ships Twemoji as a COLR font (twemoji-colr-font), last in its font stacks, from its own
// origin and in the service worker's precache. Debian's Chromium here has no emoji font of its own (`fc-list | grep -i
// emoji` finds none): without the page's font the paperclip is DejaVu Sans's missing-glyph box. So it stays if the
// page lays it out while the font is still loading: Chromium never redraws the first text it laid out that way
// (emoji-font.ts), and the attach button is the first emoji the page shows. Which font drew a text is read from
// DevTools (CSS.getPlatformFontsForNode); a box has a width too, so a width alone proves nothing. The test itself
// loads no font: what it reads is what the page drew on its own.

/** The font's own family name (its name table), which DevTools reports; style.css's @font-face calls it Twemoji. */
const EMOJI_FONT = 'Twemoji Mozilla';
const PAPERCLIP = '\u{1F4CE}';
const THUMBS_UP = '\u{1F44D}';
const TEA = '\u{1F375}';
const MESSAGE = `Tea at four ${TEA}`;

let site: HearthSite;
let context: BrowserContext;
let page: Page;
let origin: string;
/** Every request the browser context saw leave the page's origin. */
const leftTheOrigin: string[] = [];
/** What the browser refused under the page's Content-Security-Policy: nothing, it must be. */
const refused: string[] = [];
/** The font files the build holds. */
let fontFiles: string[];

/**
 * The font families Chromium drew the text inside the element that `find` (a function of the document, run in the page)
 * returns, as DevTools reports them; first after a frame and the page's font loads, so a font still on its way counts.
 */
async function fontsDrawing(page: Page, find: string): Promise<string[]> {
  await page.evaluate(async () => {
    await new Promise(requestAnimationFrame);
    await document.fonts.ready;
    await new Promise(requestAnimationFrame);
  });
  const devtools = await page.context().newCDPSession(page);
  try {
    await devtools.send('DOM.enable');
    await devtools.send('CSS.enable');
    await devtools.send('DOM.getDocument', { depth: 0 });
    const { result } = await devtools.send('Runtime.evaluate', { expression: `(${find})(document)` });
    if (!result.objectId) throw new Error(`nothing found by ${find}`);
    const { nodeId } = await devtools.send('DOM.requestNode', { objectId: result.objectId });
    const { fonts } = await devtools.send('CSS.getPlatformFontsForNode', { nodeId });
    return fonts.map((font) => font.familyName).sort();
  } finally {
    await devtools.detach();
  }
}

beforeAll(async () => {
  const dist = inject('hearthDist');
  fontFiles = (await readdir(join(dist, 'assets'))).filter((file) => /\.woff2?$/.test(file));
  site = await startSite(dist);
  origin = new URL(site.server.url).origin;
  context = await site.browser.newContext();
  context.on('request', (request) => {
    if (/^(https?|wss?):/.test(request.url()) && new URL(request.url()).origin !== origin) leftTheOrigin.push(request.url());
  });
  context.on('console', (message) => void (/Content Security Policy/i.test(message.text()) && refused.push(message.text())));
  page = await openHearth(context, site.server.url + '/');
  await registerThroughUi(page, 'emma');
  await createRoomThroughUi(page, 'Emoji');
  await sendThroughUi(page, MESSAGE);
}, 180_000);

afterAll(async () => {
  await context?.close();
  await site?.close();
});

describe('emoji drawn by the page’s own font (issue 38)', () => {
  it('the attach button’s paperclip is drawn in it, not as a box', async () => {
    const attach = page.getByRole('button', { name: 'Attach a file' });
    expect(await attach.textContent()).toBe(PAPERCLIP);
    expect(await fontsDrawing(page, `(d) => d.querySelector('form.composer button.attach')`)).toEqual([EMOJI_FONT]);
  });

  it('an emoji in a message body is drawn in it, and the words around it in a text font', async () => {
    const fonts = await fontsDrawing(page, `(d) => [...d.querySelectorAll('.event:not(.pending) .body')].find((body) => body.textContent.includes(${JSON.stringify(TEA)}))`);
    expect(fonts).toContain(EMOJI_FONT);
    expect(fonts.filter((font) => font !== EMOJI_FONT)).not.toEqual([]);
  });

  it('the reaction picker and a reaction are drawn in it, the count beside it in a text font', async () => {
    const message = page.locator('.event[data-event-id]', { hasText: MESSAGE });
    await message.locator('.react-picker summary').click();
    const choice = message.getByRole('button', { name: `React ${THUMBS_UP}` });
    await choice.waitFor();
    expect(await fontsDrawing(page, `(d) => d.querySelector('.react-picker[open] button')`)).toEqual([EMOJI_FONT]);
    await choice.click();
    await message.locator('.reaction', { hasText: `${THUMBS_UP} 1` }).waitFor({ timeout: 30_000 });
    const fonts = await fontsDrawing(page, `(d) => d.querySelector('.event .reaction')`);
    expect(fonts).toContain(EMOJI_FONT);
    expect(fonts.filter((font) => font !== EMOJI_FONT)).not.toEqual([]);
  });

  it('the font comes from this origin, precached by the service worker, and nothing was refused or left the origin', async () => {
    expect(fontFiles).toHaveLength(1);
    const fetched = await page.evaluate(() => performance.getEntriesByType('resource').map((entry) => entry.name).filter((name) => /\.woff2(\?|$)/.test(name)));
    expect(fetched).toEqual([`${origin}/assets/${fontFiles[0]}`]);
    // In the service worker's cache since it installed, so it draws offline as the rest of the page does.
    const precached = await page.evaluate((url) => caches.match(url).then(async (hit) => hit && { type: hit.headers.get('content-type'), size: (await hit.arrayBuffer()).byteLength }), fetched[0]!);
    expect(precached).toEqual({ type: 'font/woff2', size: (await stat(join(inject('hearthDist'), 'assets', fontFiles[0]!))).size });
    expect(refused).toEqual([]);
    expect(leftTheOrigin).toEqual([]);
  });

  it('the sidebar credits the emoji art (CC BY 4.0) and links to the licences the build ships', async () => {
    const credits = page.locator('.sidebar .credits');
    expect(await credits.textContent()).toContain('Twemoji by Twitter');
    expect(await credits.getByRole('link', { name: 'CC BY 4.0' }).getAttribute('href')).toBe('https://creativecommons.org/licenses/by/4.0/');
    const licences = await credits.getByRole('link', { name: 'licences' }).evaluate((link: HTMLAnchorElement) => fetch(link.href).then(async (response) => ({ status: response.status, text: await response.text() })));
    expect(licences.status).toBe(200);
    expect(licences.text).toContain('SIL OPEN FONT LICENSE');
    expect(licences.text).toContain('CC-BY-4.0');
  });
});
