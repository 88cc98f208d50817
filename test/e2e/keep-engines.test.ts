import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { serveStatic, type StaticServer } from '../../scripts/static-server.ts';
import { launchEngine, type Engine, type EngineBrowser, type Profile, type Tab } from './browsers.ts';
import { backedUpKeys, createAccount, createRoom, exportThroughUi, importThroughUi, messageShown, openHearth, send, serverNameOf, signInAfterImport, storagePanelSays, storedSession, verifyWithRecoveryKey } from './page-flows.ts';

// Keep and move a browser homeserver (issue 22) in every engine (issue 39): one homeserver travels
// round the three engines through the page's own export and import, as a person would move it to
// another browser: made in Firefox, exported, imported into WebKit, exported from there, imported into
// Chromium, exported, and back into Firefox. So each engine both writes an archive and reads one
// another engine wrote. Each time the old copy goes before the new one starts (move, don't copy), and
// the new one must hold the account, the room, every message so far and an uploaded file. The room is
// encrypted: each new sign-in verifies itself with the recovery key made in the first engine, and reads
// the earlier messages from the key backup that moved with the homeserver. WebKit's ephemeral session
// keeps no Blob in IndexedDB: its import keeps the media as ArrayBuffers.
//
// Before each export the storage panel must say what it means that the data is not kept for good, as each
// engine answers navigator.storage.persist(): Chromium says no at once (it grants it by its own measure of the
// site), Firefox asks the person and answers when they have (never, in a test: the panel says it is asking),
// and WebKitGTK has no navigator.storage at all (nothing to ask). WebKit's user agent says Safari, so its page
// also tells the person, on the first screen and in the panel, to install it to the home screen.

/** How each engine answers the request to keep the data (see above), as the panel shows it after one click on Ask. */
const PERSISTENCE: Record<Engine, { before: string; afterAsking?: string; words: string }> = {
  chromium: { before: 'false', afterAsking: 'refused', words: 'The browser did not agree to keep this site’s data' },
  firefox: { before: 'false', afterAsking: 'asking', words: 'The browser is asking you whether this site may keep its data' },
  webkit: { before: 'unsupported', words: 'This browser cannot be asked to keep this site’s data' },
};

const PASSPHRASE = 'a suitcase of keys';
const NOTE = 'a note in the suitcase';
const ROUTE: Engine[] = ['firefox', 'webkit', 'chromium', 'firefox'];

let site: StaticServer;
let files: string;

beforeAll(async () => {
  site = await serveStatic(inject('hearthDist'), 0, '127.0.0.1', { config: { bootstrap: [], allowPrivateAddresses: true } });
  files = await mkdtemp(join(tmpdir(), 'hearth-e2e-keep-engines-'));
});

afterAll(async () => {
  await site?.close();
  if (files) await rm(files, { recursive: true, force: true });
});

describe('a homeserver moved round the engines through export and import', () => {
  let serverName: string;
  let mxc: string;
  let archive: string;
  let recoveryKey: string;
  const said: string[] = [];
  let open: { browser: EngineBrowser; profile: Profile; tab: Tab } | undefined;

  async function openIn(engine: Engine): Promise<Tab> {
    // A step that failed left its browser open: it goes first.
    await closeOpen();
    const browser = await launchEngine(engine);
    const profile = await browser.newProfile();
    const tab = await openHearth(profile, site.url + '/');
    open = { browser, profile, tab };
    return tab;
  }

  /** Moved, not copied: the old browser and its copy of the homeserver go. */
  async function closeOpen(): Promise<void> {
    await open?.profile.close();
    await open?.browser.close();
    open = undefined;
  }

  afterAll(closeOpen);

  /** Exports what `tab` holds into the next archive file. */
  /** The storage panel's sentence about keeping the data, before and after asking, and the Safari note where the user agent is Safari's. */
  async function checkStoragePanel(tab: Tab): Promise<void> {
    const expected = PERSISTENCE[tab.engine];
    await tab.click({ css: 'button.storage' });
    const before = await storagePanelSays(tab);
    expect(before).toMatchObject({ persisted: expected.before, canAsk: expected.afterAsking !== undefined, safariNote: tab.engine === 'webkit' });
    if (expected.afterAsking) {
      await tab.click({ button: 'Ask the browser to keep it', within: 'dialog.keep-panel' });
      await tab.waitFor({ css: `dialog.keep-panel .keep-persisted[data-asked="${expected.afterAsking}"]` });
    }
    expect((await storagePanelSays(tab)).text).toContain(expected.words);
    await tab.click({ button: 'Close', within: 'dialog.keep-panel' });
  }

  async function exportFrom(tab: Tab, step: number): Promise<void> {
    await checkStoragePanel(tab);
    // Every device's room key in the backup first (one a device: each sent one message), so the next one can read them all.
    await tab.waitForFunction(async (count) => {
      const { accessToken } = JSON.parse(localStorage.getItem('hearth-session')!);
      const response = await fetch('/_matrix/client/v3/room_keys/version', { headers: { authorization: `Bearer ${accessToken}` } });
      return ((await response.json()).count ?? 0) >= count;
    }, said.length, 60_000);
    expect(await backedUpKeys(tab)).toBe(said.length);
    const bytes = await exportThroughUi(tab, PASSPHRASE);
    expect(bytes.length).toBeGreaterThan(0);
    archive = join(files, `step-${step}-${tab.engine}.hearth`);
    await writeFile(archive, bytes);
  }

  /** What the moved homeserver must hold: the room, every message so far, the file. */
  async function expectEverything(tab: Tab): Promise<void> {
    // As openRoom waits: a moved homeserver's first sync, with its key backup restored, is slow on a loaded machine.
    await tab.click({ css: '.room-item .name', text: 'Suitcase' }, 60_000);
    for (const text of said) await messageShown(tab, text);
    const { accessToken } = await storedSession(tab);
    const note = await tab.evaluate(async ({ token, path }) => (await fetch(path, { headers: { authorization: `Bearer ${token}` } })).text(), { token: accessToken, path: `/_matrix/client/v1/media/download/${mxc.slice('mxc://'.length)}` });
    expect(note).toBe(NOTE);
  }

  it(`is made in ${ROUTE[0]}: an account, a room, a message and a file, exported`, async () => {
    const tab = await openIn(ROUTE[0]!);
    recoveryKey = await createAccount(tab, 'dana');
    serverName = await serverNameOf(tab);
    await createRoom(tab, 'Suitcase');
    said.push(`packed in ${tab.engine}`);
    await send(tab, said.at(-1)!);
    const { accessToken } = await storedSession(tab);
    mxc = await tab.evaluate(async ({ token, note }) => {
      const response = await fetch('/_matrix/media/v3/upload?filename=note.txt', { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' }, body: note });
      return ((await response.json()) as { content_uri: string }).content_uri;
    }, { token: accessToken, note: NOTE });
    expect(mxc).toMatch(/^mxc:\/\//);
    await exportFrom(tab, 0);
    await closeOpen();
  }, 240_000);

  for (let step = 1; step < ROUTE.length; step++) {
    const engine = ROUTE[step]!;
    const last = step === ROUTE.length - 1;
    it(`imports into ${engine} what ${ROUTE[step - 1]} exported${step === 1 ? ' (a wrong passphrase refused first)' : ''}; everything is there${last ? '' : ', and it exports again'}`, async () => {
      const tab = await openIn(engine);
      expect(await serverNameOf(tab)).not.toBe(serverName);
      // The first screen tells Safari users (WebKit's user agent says Safari) to install the page, and no one else.
      await tab.waitFor({ label: 'Username' });
      expect(await tab.evaluate(() => document.querySelector('.safari-note')?.textContent ?? null)).toEqual(engine === 'webkit' ? expect.stringContaining('Safari deletes a site’s data after seven days without a visit') : null);
      await tab.waitFor({ css: 'form.keep-import', text: 'Move, don’t copy' });
      if (step === 1) {
        await importThroughUi(tab, archive, 'not the passphrase');
        await tab.waitFor({ css: 'form.keep-import [role=alert]', text: 'The passphrase is wrong' }, { timeoutMs: 60_000 });
      }
      await importThroughUi(tab, archive, PASSPHRASE);
      await signInAfterImport(tab, serverName, 'dana');
      await verifyWithRecoveryKey(tab, recoveryKey);
      await expectEverything(tab);
      said.push(`unpacked in ${engine}`);
      await send(tab, said.at(-1)!);
      if (!last) await exportFrom(tab, step);
      else await expectEverything(tab);
      await closeOpen();
    }, 240_000);
  }
});
