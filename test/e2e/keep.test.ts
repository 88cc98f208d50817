import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startNodeHost } from '../../src/node/node-host.ts';
import { exportNodeHomeserver, importNodeHomeserver } from '../../src/node/portable.ts';
import { serveStatic, type StaticServer } from '../../scripts/static-server.ts';
import { api, register } from '../integration/harness.ts';
import { crossSigningSet, deviceKeys } from '../support/e2ee-keys.ts';
import { startNodePeer, type NodePeer } from '../support/node-peer.ts';
import { httpSyncer, longPollUntil, timelineHas } from '../support/sync-until.ts';
import { createRoomThroughUi, openHearth, pageFetch, pageServerName, registerThroughUi, sendThroughUi, signOutThroughUi, startSite, storedSession, type HearthSite } from './hearth-page.ts';

// Keep, move and reset a browser homeserver (issue 22) through the page, as a person would:
// export from one browser profile, import into a fresh one, sign in, and the room is there;
// the same file imports into a Node host; reset asks twice and leaves a new, empty homeserver.
// The moves happen on an origin whose pages federate with a Node peer (`federated`), which shares
// a room with the moved homeserver and sees it go on; the quota warning runs on one without peers.

const PASSPHRASE = 'a suitcase of keys';
let site: HearthSite;
let peer: NodePeer;
let federated: StaticServer;
let files: string;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  site = await startSite(inject('hearthDist'));
  peer = await startNodePeer();
  federated = await serveStatic(inject('hearthDist'), 0, '127.0.0.1', { config: { bootstrap: peer.p2p.multiaddrs(), iceServers: [], allowPrivateAddresses: true } });
  files = await mkdtemp(join(tmpdir(), 'hearth-keep-e2e-'));
});
afterAll(async () => {
  for (const context of contexts) await context.close();
  await site?.close();
  await federated?.close();
  await peer?.close();
  await rm(files, { recursive: true, force: true });
});

/** A page in a new browser profile, by default on the origin that federates with the Node peer. */
async function freshPage(origin = federated.url): Promise<Page> {
  const context = await site.browser.newContext();
  contexts.push(context);
  return openHearth(context, origin + '/');
}

/** Closes the page's browser profile: that copy of the homeserver is gone (move, don't copy). */
async function closeProfile(page: Page): Promise<void> {
  const context = page.context();
  contexts.splice(contexts.indexOf(context), 1);
  await context.close();
}

/** Whether the Node peer is connected to the homeserver of this name. */
const peerSees = (serverName: string): boolean => peer.p2p.peers().some((p) => p.server_name === serverName);

async function exportThroughUi(page: Page, path: string): Promise<void> {
  await page.locator('button.storage').click();
  const panel = page.getByRole('dialog', { name: 'Storage and backup' });
  await panel.getByText(/Your homeserver’s database, media and keys use/).waitFor();
  await panel.getByLabel('Export passphrase').fill(PASSPHRASE);
  await panel.getByLabel('Repeat the passphrase').fill(PASSPHRASE);
  const download = page.waitForEvent('download');
  await panel.getByRole('button', { name: 'Export', exact: true }).click();
  await (await download).saveAs(path);
  await panel.getByText(/Exported .* Keep the file and its passphrase/).waitFor();
  await panel.getByRole('button', { name: 'Close' }).click();
}

async function importThroughUi(page: Page, path: string, passphrase: string): Promise<void> {
  const card = page.locator('form.keep-import');
  await card.getByLabel('Homeserver file').setInputFiles(path);
  await card.getByLabel('Archive passphrase').fill(passphrase);
  await card.getByRole('button', { name: 'Import' }).click();
}

/** After an import the page reloads onto the archive's homeserver (signed out): sign in there with the old password. */
async function signInAfterImport(page: Page, serverName: string): Promise<void> {
  await page.waitForFunction((name) => (globalThis as any).hearthHost?.state.serverName === name && document.body.dataset.homeserver === 'ready', serverName, { timeout: 60_000 });
  await page.getByRole('button', { name: 'I already have an account here' }).click();
  await page.getByLabel('Username').fill('dana');
  await page.getByLabel('Password', { exact: true }).fill('correct horse battery staple');
  await page.getByRole('button', { name: 'Sign in' }).click();
}

describe('keep, move and reset a browser homeserver', () => {
  let archive: string;
  let serverName: string;
  let mxc: string;
  let e2ee: { deviceId: string; master: string; backupVersion: string };
  let fromNode: string;

  /** The user's E2EE keys as the server keeps them: the device's keys, cross-signing, the key backup. */
  async function keysOf(ask: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: any }>, userId: string) {
    const query = await ask('POST', '/_matrix/client/v3/keys/query', { device_keys: { [userId]: [] } });
    const backup = await ask('GET', '/_matrix/client/v3/room_keys/version');
    return {
      devices: Object.keys(query.body.device_keys?.[userId] ?? {}),
      master: Object.keys(query.body.master_keys?.[userId]?.keys ?? {})[0],
      selfSigning: Object.keys(query.body.self_signing_keys?.[userId]?.keys ?? {})[0],
      backupVersion: backup.body.version as string | undefined,
    };
  }

  it('exports from one browser profile and imports into a fresh one; the room, its messages and media are there, and a Node peer in the room sees it go on', async () => {
    const a = await freshPage();
    await registerThroughUi(a, 'dana');
    // Not encrypted: Bob, on the Node peer, reads with a plain client.
    await a.getByLabel('Public room (not encrypted)').check();
    await createRoomThroughUi(a, 'Suitcase');
    const { accessToken } = await storedSession(a);
    serverName = await pageServerName(a);
    // Bob, on the Node peer, shares the room.
    await expect.poll(() => peerSees(serverName), { timeout: 30_000 }).toBe(true);
    const bob = await register(peer, 'bob');
    const roomId = (await pageFetch(a, 'GET', '/_matrix/client/v3/joined_rooms', { token: accessToken })).body.joined_rooms[0] as string;
    const invited = await pageFetch(a, 'POST', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/invite`, { token: accessToken, body: { user_id: bob.userId } });
    expect(invited.status, JSON.stringify(invited.body)).toBe(200);
    const bobSync = httpSyncer(peer, bob.accessToken);
    await longPollUntil(bobSync, (s) => !!s.rooms?.invite?.[roomId], { timeoutMs: 30_000, who: 'bob' });
    const joined = await api(peer, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}`, { token: bob.accessToken, body: {} });
    expect(joined.status, JSON.stringify(joined.body)).toBe(200);
    await sendThroughUi(a, 'packed and ready');
    const bobSince = (await longPollUntil(bobSync, timelineHas(roomId, 'packed and ready'), { timeoutMs: 30_000, who: 'bob' })).next_batch;
    mxc = await a.evaluate(async (token) => {
      const r = await fetch('/_matrix/media/v3/upload?filename=note.txt', { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' }, body: 'a note in the suitcase' });
      return ((await r.json()) as { content_uri: string }).content_uri;
    }, accessToken);
    // E2EE keys kept on the server: the device's keys, cross-signing, a key backup.
    const session = await storedSession(a);
    const device = await deviceKeys(session);
    const cross = await crossSigningSet(session.userId);
    expect((await pageFetch(a, 'POST', '/_matrix/client/v3/keys/upload', { token: accessToken, body: { device_keys: device.signed } })).status).toBe(200);
    const crossKeys = { master_key: cross.master.object, self_signing_key: cross.selfSigning.object, user_signing_key: cross.userSigning.object };
    // The page's own client may have set up cross-signing by now: replacing it asks for the password (user-interactive auth).
    let crossUpload = await pageFetch(a, 'POST', '/_matrix/client/v3/keys/device_signing/upload', { token: accessToken, body: crossKeys });
    if (crossUpload.status === 401) {
      const auth = { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'dana' }, password: 'correct horse battery staple', session: crossUpload.body.session };
      crossUpload = await pageFetch(a, 'POST', '/_matrix/client/v3/keys/device_signing/upload', { token: accessToken, body: { ...crossKeys, auth } });
    }
    expect(crossUpload.status, JSON.stringify(crossUpload.body)).toBe(200);
    const backup = await pageFetch(a, 'POST', '/_matrix/client/v3/room_keys/version', { token: accessToken, body: { algorithm: 'm.megolm_backup.v1.curve25519-aes-sha2', auth_data: { public_key: 'hearthbackupkey' } } });
    expect(backup.status, JSON.stringify(backup.body)).toBe(200);
    e2ee = { deviceId: session.deviceId, master: `ed25519:${cross.master.pub}`, backupVersion: backup.body.version };
    // The top bar says what the figure is.
    expect(await a.locator('button.storage').getAttribute('title')).toMatch(/your homeserver’s database, media and keys/);
    archive = join(files, 'dana.hearth');
    await exportThroughUi(a, archive);

    // A homeserver with an account refuses an import (here: signed out, the account remains).
    await signOutThroughUi(a);
    await importThroughUi(a, archive, PASSPHRASE);
    await a.locator('form.keep-import [role=alert]', { hasText: 'already holds a homeserver with an account' }).waitFor();
    // Moved, not copied: the first profile is gone before the second one imports.
    await closeProfile(a);
    await expect.poll(() => peerSees(serverName), { timeout: 30_000 }).toBe(false);
    // Bob writes while the homeserver is away: the Node peer holds the event for it.
    const whileAway = await api(peer, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/away`, { token: bob.accessToken, body: { msgtype: 'm.text', body: 'written while you moved' } });
    expect(whileAway.status, JSON.stringify(whileAway.body)).toBe(200);

    const b = await freshPage();
    expect(await pageServerName(b)).not.toBe(serverName);
    await b.getByText('Move, don’t copy').waitFor();
    await importThroughUi(b, archive, 'not the passphrase');
    await b.locator('form.keep-import [role=alert]', { hasText: 'The passphrase is wrong' }).waitFor();
    await importThroughUi(b, archive, PASSPHRASE);
    await signInAfterImport(b, serverName);
    await b.locator('.room-item .name', { hasText: 'Suitcase' }).waitFor();
    await b.locator('.room-item .name', { hasText: 'Suitcase' }).click();
    await b.locator('.event .body', { hasText: 'packed and ready' }).waitFor();
    const token = (await storedSession(b)).accessToken;
    const media = await b.evaluate(async ({ token, path }) => (await fetch(path, { headers: { authorization: `Bearer ${token}` } })).text(), { token, path: `/_matrix/client/v1/media/download/${mxc.slice(6)}` });
    expect(media).toBe('a note in the suitcase');
    // Federation goes on from the new place: Bob's message from while it moved arrives, and Bob sees the reply.
    await expect.poll(() => peerSees(serverName), { timeout: 30_000 }).toBe(true);
    await b.locator('.event .body', { hasText: 'written while you moved' }).waitFor({ timeout: 60_000 });
    await sendThroughUi(b, 'unpacked in a new browser');
    await longPollUntil(bobSync, timelineHas(roomId, 'unpacked in a new browser'), { since: bobSince, timeoutMs: 60_000, who: 'bob' });
    const keys = await keysOf((method, path, body) => pageFetch(b, method, path, { token, body }), session.userId);
    expect(keys).toMatchObject({ master: e2ee.master, backupVersion: e2ee.backupVersion });
    expect(keys.devices).toContain(e2ee.deviceId);
    // Next it moves to a Node host: this copy goes.
    await closeProfile(b);
  }, 180_000);

  it('the browser’s file imports into a Node host: same server, same password, same room, media and E2EE keys', async () => {
    const dataDir = join(files, 'node-home');
    const manifest = await importNodeHomeserver({ dataDir, input: archive, passphrase: PASSPHRASE });
    expect(manifest).toMatchObject({ serverName, createdBy: 'browser' });
    const host = await startNodeHost({ dataDir, port: 0, rateLimits: false });
    try {
      expect(host.homeserver.serverName).toBe(serverName);
      const login = await fetch(`${host.url}/_matrix/client/v3/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'm.login.password', identifier: { type: 'm.id.user', user: 'dana' }, password: 'correct horse battery staple' }) });
      expect(login.status).toBe(200);
      const { access_token } = (await login.json()) as { access_token: string };
      const rooms = (await (await fetch(`${host.url}/_matrix/client/v3/joined_rooms`, { headers: { authorization: `Bearer ${access_token}` } })).json()) as { joined_rooms: string[] };
      expect(rooms.joined_rooms).toHaveLength(1);
      const sent = await fetch(`${host.url}/_matrix/client/v3/rooms/${encodeURIComponent(rooms.joined_rooms[0]!)}/send/m.room.message/on-node`, { method: 'PUT', headers: { authorization: `Bearer ${access_token}`, 'content-type': 'application/json' }, body: JSON.stringify({ msgtype: 'm.text', body: 'written on the Node host' }) });
      expect(sent.status).toBe(200);
      const media = await fetch(`${host.url}/_matrix/client/v1/media/download/${mxc.slice(6)}`, { headers: { authorization: `Bearer ${access_token}` } });
      expect(await media.text()).toBe('a note in the suitcase');
      const ask = async (method: string, path: string, body?: unknown) => {
        const r = await fetch(host.url + path, { method, headers: { authorization: `Bearer ${access_token}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
        return { status: r.status, body: await r.json() };
      };
      const keys = await keysOf(ask, `@dana:${serverName}`);
      expect(keys).toMatchObject({ master: e2ee.master, backupVersion: e2ee.backupVersion });
      expect(keys.devices).toContain(e2ee.deviceId);
    } finally {
      await host.close();
    }
    // And back out of Node, for the next browser.
    fromNode = join(files, 'from-node.hearth');
    expect((await exportNodeHomeserver({ dataDir, out: fromNode, passphrase: PASSPHRASE })).manifest.createdBy).toBe('node');
  }, 60_000);

  it('and the Node host’s file imports into another fresh browser, keys and all', async () => {
    const c = await freshPage();
    await importThroughUi(c, fromNode, PASSPHRASE);
    await signInAfterImport(c, serverName);
    await c.locator('.room-item .name', { hasText: 'Suitcase' }).click();
    const token = (await storedSession(c)).accessToken;
    await c.locator('.event .body', { hasText: 'written on the Node host' }).waitFor();
    const keys = await keysOf((method, path, body) => pageFetch(c, method, path, { token, body }), `@dana:${serverName}`);
    expect(keys).toMatchObject({ master: e2ee.master, backupVersion: e2ee.backupVersion });
    expect(keys.devices).toContain(e2ee.deviceId);
  }, 120_000);

  it('reset asks twice, offers an export first, and leaves a new empty homeserver', async () => {
    const page = await freshPage();
    await registerThroughUi(page, 'erin');
    const before = await pageServerName(page);
    await page.locator('button.storage').click();
    const panel = page.getByRole('dialog', { name: 'Storage and backup' });
    await panel.getByRole('button', { name: 'Reset…' }).click();
    await panel.getByText('Export it first if you may want it back').waitFor();
    await panel.getByRole('button', { name: 'Export first' }).click();
    expect(await panel.getByLabel('Export passphrase').evaluate((e) => e === document.activeElement)).toBe(true);
    await panel.getByRole('button', { name: 'Reset…' }).click();
    await panel.getByRole('button', { name: 'Continue to reset' }).click();
    await panel.getByText('This cannot be undone.').waitFor();
    await panel.getByRole('button', { name: 'Delete this homeserver' }).click();
    await page.waitForFunction((old) => { const name = (globalThis as any).hearthHost?.state.serverName; return !!name && name !== old && document.body.dataset.homeserver === 'ready'; }, before, { timeout: 60_000 });
    await page.getByRole('button', { name: 'Create account' }).waitFor();
    const login = await pageFetch(page, 'POST', '/_matrix/client/v3/login', { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'erin' }, password: 'correct horse battery staple' } });
    expect(login.status).toBe(403);
  }, 120_000);
});

describe('an import cut short', () => {
  it('a tab closed midway leaves no half-imported homeserver: the next start removes what was written, says so on the import card, and the file imports again', async () => {
    const a = await freshPage(site.server.url);
    await registerThroughUi(a, 'gil');
    const { accessToken } = await storedSession(a);
    // Mostly media, so that the import spends most of its time writing it, one file at a time.
    const uploads = await a.evaluate(async (token) => {
      const uris: string[] = [];
      for (let i = 0; i < 24; i++) {
        const bytes = new Uint8Array(1024 * 1024);
        for (let at = 0; at < bytes.length; at += 65_536) crypto.getRandomValues(bytes.subarray(at, at + 65_536));
        const r = await fetch(`/_matrix/media/v3/upload?filename=part${i}.bin`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' }, body: bytes });
        uris.push(((await r.json()) as { content_uri: string }).content_uri);
      }
      return uris;
    }, accessToken);
    const file = join(files, 'gil.hearth');
    await exportThroughUi(a, file);
    await closeProfile(a);

    let b = await freshPage(site.server.url);
    const context = b.context();
    const ownName = await pageServerName(b);
    await importThroughUi(b, file, PASSPHRASE);
    // Past the check (the first half of the bar) and a fifth into the writing, where media is written: the tab goes.
    await b.waitForFunction(() => (document.querySelector('form.keep-import progress') as HTMLProgressElement | null)?.value! >= 0.6, undefined, { polling: 'raf', timeout: 120_000 });
    await b.close();

    b = await openHearth(context, site.server.url + '/');
    await b.locator('form.keep-import [role=alert]', { hasText: 'The last import stopped before it finished' }).waitFor();
    // This origin's own (empty) homeserver, as before the import; nothing of the archive's.
    expect(await pageServerName(b)).toBe(ownName);
    const login = await pageFetch(b, 'POST', '/_matrix/client/v3/login', { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'gil' }, password: 'correct horse battery staple' } });
    expect(login.status).toBe(403);
    const mediaKeys = await b.evaluate(() => new Promise<number>((resolve, reject) => {
      const open = indexedDB.open('hearth-media');
      open.onsuccess = () => { const count = open.result.transaction('blobs').objectStore('blobs').count(); count.onsuccess = () => (resolve(count.result), open.result.close()); };
      open.onerror = () => reject(open.error);
    }));
    expect(mediaKeys).toBe(0);

    // Again, to the end this time.
    await importThroughUi(b, file, PASSPHRASE);
    await b.waitForFunction((name) => (globalThis as any).hearthHost?.state.serverName !== name && document.body.dataset.homeserver === 'ready', ownName, { timeout: 120_000 });
    expect(await b.locator('form.keep-import [role=alert]').textContent()).toBe('');
    const again = await pageFetch(b, 'POST', '/_matrix/client/v3/login', { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'gil' }, password: 'correct horse battery staple' } });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    const sizes = await b.evaluate(async ({ token, uris }) => Promise.all(uris.map(async (uri) => (await (await fetch(`/_matrix/client/v1/media/download/${uri.slice(6)}`, { headers: { authorization: `Bearer ${token}` } })).arrayBuffer()).byteLength)), { token: again.body.access_token as string, uris: uploads });
    expect(sizes).toEqual(uploads.map(() => 1024 * 1024));
  }, 300_000);
});

// The full quota itself, for real, is keep-quota.test.ts (a tmpfs profile).
describe('a quota nearly full', () => {
  it('warns from 80 % of the quota, in the top bar and the storage panel', async () => {
    const page = await freshPage(site.server.url);
    // What the browser would say of an origin near its quota (estimate() does not follow DevTools' override).
    await page.evaluate(() => Object.defineProperty(navigator.storage, 'estimate', { value: async () => ({ usage: 850 * 1024 * 1024, quota: 1000 * 1024 * 1024 }) }));
    await page.locator('button.storage').click();
    const panel = page.getByRole('dialog', { name: 'Storage and backup' });
    await panel.getByText('use 850 MB of the 1000 MB this browser allows this site (85 %).').waitFor();
    await panel.getByText(/^Storage is 85 % full\. When it is full the homeserver refuses new messages and uploads\. Export your homeserver/).waitFor();
    await panel.getByRole('button', { name: 'Close' }).click();
    await expect.poll(() => page.locator('button.storage').textContent()).toBe('Storage 85 % full');
    expect(await page.locator('button.storage').getAttribute('class')).toContain('warn');
  }, 60_000);
});
