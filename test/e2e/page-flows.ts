import type { Profile, Tab } from './browsers.ts';

// What a person does with the page, written once against `Tab` (browsers.ts) so that it runs in every
// engine (issue 39). The Chromium-only suites keep their Playwright helpers (hearth-page.ts,
// page-pair.ts); these are the same steps, for the tests that run across engines. (A Chromium suite
// cannot simply wrap its page as a Tab: Tab's waits are source strings, which the page's
// Content-Security-Policy refuses unless the context bypasses it, and most of those suites keep it.)

export const PASSWORD = 'correct horse battery staple';

/** Opens the page and waits until the service worker controls it and the core answers. */
export async function openHearth(profile: Profile, url: string): Promise<Tab> {
  const tab = await profile.newTab(url);
  await waitUntilReady(tab);
  return tab;
}

export const waitUntilReady = (tab: Tab): Promise<void> => tab.waitForFunction(() => document.body.dataset.homeserver === 'ready', undefined, 60_000);

export interface FetchResult {
  status: number;
  body: any;
}

/** fetch from inside the page, so the request goes through the service worker as a client's would. */
export function pageFetch(tab: Tab, method: string, path: string, options: { token?: string; body?: unknown } = {}): Promise<FetchResult> {
  return tab.evaluate(
    async ({ method, path, token, body }) => {
      const headers: Record<string, string> = {};
      if (token) headers['authorization'] = `Bearer ${token}`;
      if (body !== undefined) headers['content-type'] = 'application/json';
      const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await response.text();
      try {
        return { status: response.status, body: JSON.parse(text) };
      } catch {
        return { status: response.status, body: text };
      }
    },
    { method, path, token: options.token, body: options.body },
  );
}

export const serverNameOf = (tab: Tab): Promise<string> => tab.evaluate(() => (globalThis as any).hearthHost.state.serverName as string);

/** The session the built-in client stored after signing in. */
export async function storedSession(tab: Tab): Promise<{ userId: string; accessToken: string; deviceId: string }> {
  const raw = await tab.evaluate(() => localStorage.getItem('hearth-session'));
  if (!raw) throw new Error(`${tab.engine}: no session stored`);
  return JSON.parse(raw);
}

/** Creates the first account through the UI; the page shows a recovery key once, which is read, confirmed saved, and returned. */
export async function createAccount(tab: Tab, username: string, password = PASSWORD): Promise<string> {
  await tab.fill({ label: 'Username' }, username);
  await tab.fill({ label: 'Password' }, password);
  await tab.fill({ label: 'Confirm password' }, password);
  await tab.click({ button: 'Create account' });
  await tab.waitFor({ label: 'New room name' }, { timeoutMs: 60_000 });
  // Cross-signing, secret storage and key backup are set up with the account: that is what gives the key.
  const recoveryKey = await tab.textOf({ label: 'Your recovery key' }, 60_000);
  await tab.click({ button: 'I have saved my recovery key' });
  await tab.waitFor({ label: 'Your recovery key' }, { gone: true });
  return recoveryKey;
}

export async function createRoom(tab: Tab, name: string): Promise<void> {
  await tab.fill({ label: 'New room name' }, name);
  await tab.click({ button: 'Create' });
  await tab.waitFor({ css: '.room-title', text: name });
}

/** Sends through the composer and waits until the homeserver has it (no longer pending). */
export async function send(tab: Tab, text: string): Promise<void> {
  await tab.fill({ label: 'Message' }, text);
  await tab.click({ button: 'Send' });
  await messageShown(tab, text);
}

/** Waits until the open room's timeline shows a message the homeserver has (not one still pending). */
export const messageShown = (tab: Tab, text: string, timeoutMs = 30_000): Promise<void> => tab.waitFor({ css: '.event:not(.pending) .body', text }, { timeoutMs });

/** Waits until the page's homeserver knows `serverName` (its node learnt the address, through the relay). */
export const waitUntilReachable = (tab: Tab, serverName: string): Promise<void> =>
  tab.waitForFunction((name) => (globalThis as any).hearthP2P?.reachable.has(name), serverName, 60_000);

/**
 * Shows the Peers view (issue 38 item 7: the peer tools have a view of their own, in the room's place), if it is not
 * showing: from the top bar's "Peers · N connected", or on a phone from its Peers tab.
 */
export async function openPeersView(tab: Tab): Promise<void> {
  if (await tab.evaluate(() => document.getElementById('peers-view')?.hidden === false)) return;
  await tab.click({ css: '.peers-button, .phone-nav .tab[aria-controls="peers-view"]' });
  await tab.waitFor({ css: '#peers-view' });
}

/** Closes the Peers view with its Close button, if it is showing: the room it stood in front of shows again. */
export async function closePeersView(tab: Tab): Promise<void> {
  if (!(await tab.evaluate(() => document.getElementById('peers-view')?.hidden === false))) return;
  await tab.click({ css: '#peers-view .view-close' });
  await tab.waitForFunction(() => document.getElementById('peers-view')?.hidden === true, undefined);
}

export const DIRECT_CHATS = 'ul[aria-label="Direct chats"]';

/** `ana` starts an encrypted direct message with `benId` through the UI, and `ben` accepts it; returns its room ID. */
export async function startEncryptedDm(ana: Tab, ben: Tab, benId: string): Promise<string> {
  await ana.fill({ label: 'Start a direct chat with' }, benId);
  await ana.click({ button: 'Start chat' });
  await ana.waitFor({ css: '.room-encryption', exactText: 'Encrypted' });
  await ana.waitFor({ css: `${DIRECT_CHATS} .room-item` });
  await ana.waitFor({ css: '.room-id' });
  const roomId = (await ana.evaluate(() => (document.querySelector('.room-id') as HTMLElement).dataset.roomId)) as string;
  await ben.click({ button: 'Accept', within: `${DIRECT_CHATS} .invite` }, 60_000);
  await ben.waitFor({ css: `.room-id[data-room-id="${roomId}"]` }, { timeoutMs: 30_000 });
  await ben.waitFor({ css: '.room-encryption', exactText: 'Encrypted' });
  await ana.waitFor({ css: '.timeline .notice', text: `${benId.slice(1).split(':')[0]} joined` }, { timeoutMs: 60_000 });
  return roomId;
}

/** A tab opened while another runs the chat client: it says so, and "Use here" moves the chat to it (issue 25). */
export async function useHere(tab: Tab): Promise<void> {
  await tab.waitFor({ css: 'h1, h2, h3', exactText: 'Hearth is open in another tab' });
  await tab.click({ button: 'Use here' });
  await tab.waitFor({ label: 'New room name' });
}

/** Waits until the core is up again (after a reload) and the open room shows each message, as the homeserver has it. */
export async function expectMessages(tab: Tab, ...messages: string[]): Promise<void> {
  await waitUntilReady(tab);
  for (const message of messages) await messageShown(tab, message);
}

const STORAGE_PANEL = 'dialog.keep-panel';

/**
 * Exports the homeserver through the storage panel and returns the file's bytes. The page hands the browser
 * the archive as a Blob link it clicks; that click is caught in the page and the Blob read back, the one way
 * every driver here shares (only Playwright catches downloads, and a WebKit or Firefox download would land in
 * the user's Downloads folder).
 */
export async function exportThroughUi(tab: Tab, passphrase: string): Promise<Uint8Array> {
  await tab.evaluate(() => {
    // The Blob behind each link, read back without fetch: the page's policy keeps blob: out of connect-src.
    const blobs: Record<string, Blob> = ((globalThis as any).hearthBlobs ??= {});
    const createObjectURL = URL.createObjectURL.bind(URL);
    URL.createObjectURL = (object: Blob | MediaSource) => {
      const url = createObjectURL(object);
      if (object instanceof Blob) blobs[url] = object;
      return url;
    };
    const original = HTMLAnchorElement.prototype.click;
    HTMLAnchorElement.prototype.click = function (this: HTMLAnchorElement) {
      if (!this.download || !this.href.startsWith('blob:')) return original.call(this);
      (globalThis as any).hearthExported = { name: this.download, href: this.href };
    };
  });
  await tab.click({ css: 'button.storage' });
  // Its figures are in once it says whether the data is persistent (every engine's answer, even none).
  await tab.waitFor({ css: `${STORAGE_PANEL} .keep-persisted` });
  await tab.fill({ label: 'Export passphrase' }, passphrase);
  await tab.fill({ label: 'Repeat the passphrase' }, passphrase);
  await tab.click({ button: 'Export', within: 'form.keep-export' });
  await tab.waitFor({ css: 'form.keep-export [role=status]', text: 'Keep the file and its passphrase' }, { timeoutMs: 120_000 });
  const base64 = await tab.evaluate(async () => {
    const { href, name } = (globalThis as any).hearthExported as { href: string; name: string };
    if (!name.endsWith('.hearth')) throw new Error(`the archive is named ${name}`);
    const blob = ((globalThis as any).hearthBlobs as Record<string, Blob>)[href];
    if (!blob) throw new Error(`no Blob was made for ${href}`);
    const bytes = new Uint8Array(await blob.arrayBuffer());
    let binary = '';
    for (let at = 0; at < bytes.length; at += 0x8000) binary += String.fromCharCode(...bytes.subarray(at, at + 0x8000));
    return btoa(binary);
  });
  await tab.click({ button: 'Close', within: STORAGE_PANEL });
  return new Uint8Array(Buffer.from(base64, 'base64'));
}

/** Imports the file at `path` through the first-run card's *Import a homeserver*, with the driver's own file upload. */
export async function importThroughUi(tab: Tab, path: string, passphrase: string): Promise<void> {
  await tab.setInputFiles({ label: 'Homeserver file' }, path);
  await tab.fill({ label: 'Archive passphrase' }, passphrase);
  await tab.click({ button: 'Import', within: 'form.keep-import' });
}

/** After an import the page reloads onto the archive's homeserver (signed out): sign in there with the old password. */
export async function signInAfterImport(tab: Tab, serverName: string, username: string, password = PASSWORD): Promise<void> {
  await tab.waitForFunction((name) => (globalThis as any).hearthHost?.state.serverName === name && document.body.dataset.homeserver === 'ready', serverName, 120_000);
  await tab.click({ button: 'I already have an account here' });
  await signIn(tab, username, password);
}

/** Signs in through the sign-in form (shown after a sign-out), and waits for the rooms. */
export async function signIn(tab: Tab, username: string, password = PASSWORD): Promise<void> {
  await tab.fill({ label: 'Username' }, username);
  await tab.fill({ label: 'Password' }, password);
  await tab.click({ button: 'Sign in' });
  await tab.waitFor({ label: 'New room name' }, { timeoutMs: 60_000 });
}

export const SIGN_OUT_DIALOG = 'dialog.sign-out-dialog';

/** The top bar's Sign out, which asks first, every time (issue 38): waits for the "Sign out?" dialog. */
export async function askToSignOut(tab: Tab): Promise<void> {
  await tab.click({ button: 'Sign out', within: 'header.topbar' });
  await tab.waitFor({ css: `${SIGN_OUT_DIALOG} h2`, exactText: 'Sign out?' });
}

/**
 * Signs out from the top bar, confirming in the dialog that asks first, and waits for the sign-in form: through
 * "Saving your message keys" when some room key is not in the key backup yet (the SDK uploads one up to 10 s after it is made).
 */
export async function signOut(tab: Tab): Promise<void> {
  await askToSignOut(tab);
  await tab.click({ button: 'Sign out', within: SIGN_OUT_DIALOG });
  await tab.waitFor({ css: 'h1', exactText: 'Sign in' }, { timeoutMs: 60_000 });
}

/** The IndexedDB database of the Rust crypto (matrix-js-sdk's fixed name): a device's keys, deleted at sign-out. */
export const CRYPTO_STORE = 'matrix-js-sdk::matrix-sdk-crypto';

/** Whether the origin has the Rust crypto's store, as `indexedDB.databases()` lists it. */
export const hasCryptoStore = (tab: Tab): Promise<boolean> => tab.evaluate(async (name) => (await indexedDB.databases()).some((database) => database.name === name), CRYPTO_STORE);

/**
 * Waits until the signed-out device's crypto store is deleted. Bounded at 10 s, as page-verify.test.ts is: a store
 * left open would be deleted only once the garbage collector closed it (21 s in Chromium), which is what this checks.
 */
export const waitUntilCryptoStoreGone = (tab: Tab): Promise<void> =>
  tab.waitForFunction(async (name) => !(await indexedDB.databases()).some((database) => database.name === name), CRYPTO_STORE, 10_000);

/** Opens the room named `name` from the room list. */
export async function openRoom(tab: Tab, name: string): Promise<void> {
  await tab.click({ css: '.room-item .name', exactText: name }, 60_000);
  await tab.waitFor({ css: '.room-title', text: name });
}

/** The dialog that previews picked, pasted or dropped files, with a caption field each, before they are sent (issue 38). */
export const PREVIEW = 'dialog.attachment-preview';

/**
 * Chooses the file at `path` in the composer, with the driver's own file upload into its file input, as the
 * browser's file chooser does once the person picked it there (the Attach button opens that chooser, which
 * no driver answers); the page then previews it.
 */
export const pickFile = (tab: Tab, path: string): Promise<void> => tab.setInputFiles({ label: 'File to attach' }, path);

/** Picks the file at `path`, writes `caption` in the preview and sends it; waits until the preview is gone. */
export async function sendFile(tab: Tab, path: string, caption: string): Promise<void> {
  await pickFile(tab, path);
  await tab.fill({ label: 'Caption' }, caption);
  await tab.click({ button: 'Send', within: PREVIEW });
  await tab.waitFor({ css: PREVIEW }, { gone: true });
}

/** An image as the open room's timeline shows it: drawn (its width once loaded), its caption's text and bold part, its event. */
export interface ShownImage {
  eventId: string;
  width: number;
  caption: string | null;
  bold: string | null;
}

/**
 * Waits until the open room's timeline shows the image `name` in an event the homeserver has (decrypted first, in an
 * encrypted room), drawn, with the caption `caption` under it (whitespace collapsed); returns what it shows.
 */
export async function imageShown(tab: Tab, name: string, caption: string, timeoutMs = 60_000): Promise<ShownImage> {
  const find = ({ name, caption }: { name: string; caption: string }): ShownImage | null => {
    const norm = (text: string | null | undefined) => (text ?? '').replace(/\s+/g, ' ').trim();
    for (const figure of document.querySelectorAll('.timeline .event[data-event-id] figure.attachment')) {
      const image = [...figure.querySelectorAll('img')].find((img) => img.alt === name);
      const under = figure.querySelector('figcaption');
      if (!image || !image.complete || image.naturalWidth === 0 || norm(under?.textContent) !== caption) continue;
      const eventId = (figure.closest('.event') as HTMLElement).dataset.eventId!;
      return { eventId, width: image.naturalWidth, caption: norm(under?.textContent), bold: under?.querySelector('strong')?.textContent ?? null };
    }
    return null;
  };
  await tab.waitForFunction(find, { name, caption }, timeoutMs);
  return (await tab.evaluate(find, { name, caption }))!;
}

const MEMBERS = 'aside.members';

/** The members pane's entry of `userId` (CSS), its profile card opened; in an encrypted room the card says whether they are verified. */
export async function openCard(tab: Tab, userId: string): Promise<string> {
  const item = `${MEMBERS} li[title="${userId}"]`;
  if (!(await tab.evaluate(() => (document.querySelector('.member-details') as HTMLDetailsElement | null)?.open))) await tab.click({ css: '.member-details > summary' });
  await tab.waitFor({ css: item });
  const card = `${item} .member-devices`;
  if (!(await tab.evaluate((card) => (document.querySelector(card) as HTMLDetailsElement | null)?.open, card))) await tab.click({ css: `${card} > summary` });
  return item;
}

/** The dialog of the emoji verification going on (issue 38). */
export const VERIFICATION = 'dialog.verification-dialog';

/** The emoji the verification dialog shows to compare, each as "symbol name", once all 7 are there. */
export async function shownEmoji(tab: Tab): Promise<string[]> {
  await tab.waitFor({ css: `${VERIFICATION} ol.sas-emoji li:nth-child(7)` }, { timeoutMs: 60_000 });
  return tab.evaluate(() =>
    [...document.querySelectorAll('dialog.verification-dialog ol.sas-emoji li')].map((li) => `${li.querySelector('.sas-symbol')!.textContent} ${li.querySelector('.sas-name')!.textContent}`),
  );
}

/** A new sign-in of an account with cross-signing verifies itself with the recovery key: the key backup opens the past. */
export async function verifyWithRecoveryKey(tab: Tab, recoveryKey: string): Promise<void> {
  await tab.fill({ label: 'Recovery key' }, recoveryKey);
  await tab.click({ button: 'Verify', within: '.encryption-panel' });
  await tab.waitFor({ css: 'h1, h2, h3', exactText: 'Verify this device' }, { gone: true });
}

/** How many room keys the account's key backup holds, read through the page's homeserver. */
export async function backedUpKeys(tab: Tab): Promise<number> {
  const { accessToken } = await storedSession(tab);
  return (await pageFetch(tab, 'GET', '/_matrix/client/v3/room_keys/version', { token: accessToken })).body.count ?? 0;
}

/** What the storage panel says of keeping the data: its `data-persisted` and `data-asked`, its sentence, whether it offers to ask, and whether the Safari note is there. */
export async function storagePanelSays(tab: Tab): Promise<{ persisted: string; asked: string | null; text: string; canAsk: boolean; safariNote: boolean }> {
  await tab.waitFor({ css: `${STORAGE_PANEL} .keep-persisted` });
  return tab.evaluate(() => {
    const panel = document.querySelector('dialog.keep-panel')!;
    const line = panel.querySelector('.keep-persisted') as HTMLElement;
    return {
      persisted: line.dataset.persisted!,
      asked: line.dataset.asked ?? null,
      text: line.textContent!,
      canAsk: [...panel.querySelectorAll('button')].some((button) => button.textContent === 'Ask the browser to keep it'),
      safariNote: panel.querySelector('.safari-note') !== null,
    };
  });
}
