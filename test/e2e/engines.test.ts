import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { serveStatic, type StaticServer } from '../../scripts/static-server.ts';
import { startNodeHost, type NodeHost } from '../../src/node/node-host.ts';
import { launchEngine, type Engine, type EngineBrowser, type Profile, type Tab } from './browsers.ts';
import { createAccount, createRoom, messageShown, openHearth, openPeersView, pageFetch, send, serverNameOf, startEncryptedDm, storedSession, waitUntilReady, waitUntilReachable } from './page-flows.ts';

// Issue 39: the page in engines other than Chromium, for real. The flows of page-flows.ts (the same
// steps the Chromium suites take through Playwright) run in Debian's Firefox ESR over WebDriver BiDi and
// in WebKitGTK's MiniBrowser over WebDriver: an account with its recovery key, a room, a message, a
// reload; requests with a body through the service worker (Firefox's Request has no body stream); an
// upload handed to the core chunk by chunk (Firefox cannot send a stream as a request body; WebKit's
// ephemeral session keeps no Blob in IndexedDB). Then encrypted direct messages across engines, each page
// its own homeserver, meeting through a Node relay: Firefox and Chromium link directly over WebRTC;
// WebKit, which has no WebRTC here, reaches Firefox through the relay and says so.

let dir: string;
let relay: NodeHost;
let site: StaticServer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hearth-e2e-engines-'));
  relay = await startNodeHost({ dataDir: dir, port: 0, listen: ['/ip4/127.0.0.1/tcp/0/ws'], relay: true, rateLimits: false });
  site = await serveStatic(inject('hearthDist'), 0, '127.0.0.1', { config: { bootstrap: relay.p2p.multiaddrs(), iceServers: [], allowPrivateAddresses: true } });
}, 60_000);

afterAll(async () => {
  await site?.close();
  await relay?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const ENGINE_NAMES: Record<Engine, string> = { chromium: 'Chromium', firefox: 'Firefox', webkit: 'WebKit' };

/** The engines the single-page flows run in here; Chromium runs them in its own suites (browser-host, persistence, page-e2ee…). */
const ENGINES: Engine[] = ['firefox', 'webkit'];

for (const engine of ENGINES) describe(`the page in ${ENGINE_NAMES[engine]}`, () => {
  let browser: EngineBrowser;
  let profile: Profile;
  let tab: Tab;
  let recoveryKey: string;

  beforeAll(async () => {
    browser = await launchEngine(engine);
    profile = await browser.newProfile();
    tab = await openHearth(profile, site.url + '/');
  }, 120_000);

  afterAll(async () => {
    await profile?.close();
    await browser?.close();
  });

  it('the service worker answers the API, requests with a body included, within its bound', async () => {
    expect(await tab.evaluate(() => navigator.serviceWorker.controller?.scriptURL)).toBe(site.url + '/sw.js');
    expect((await pageFetch(tab, 'GET', '/_matrix/client/versions')).status).toBe(200);
    // A body reaches the core whole: a wrong password is the core's 403, bad JSON its 400.
    const login = await pageFetch(tab, 'POST', '/_matrix/client/v3/login', { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'nobody' }, password: 'wrong' } });
    expect(login).toMatchObject({ status: 403, body: { errcode: 'M_FORBIDDEN' } });
    const notJson = await tab.evaluate(async () => {
      const response = await fetch('/_matrix/client/v3/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"type": "m.login.password",' });
      return { status: response.status, body: await response.json() };
    });
    expect(notJson).toMatchObject({ status: 400, body: { errcode: 'M_NOT_JSON' } });
    // Past 8 MiB the service worker refuses it before the core sees it.
    const tooLarge = await tab.evaluate(async () => {
      const response = await fetch('/_matrix/client/v3/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: new Uint8Array(8 * 1024 * 1024 + 1) });
      return { status: response.status, body: await response.json() };
    });
    expect(tooLarge).toMatchObject({ status: 413, body: { errcode: 'M_TOO_LARGE' } });
  }, 60_000);

  it('creates an account, shown a recovery key once', async () => {
    recoveryKey = await createAccount(tab, 'ada');
    expect(recoveryKey).toMatch(/^[1-9A-Za-z]{4}( [1-9A-Za-z]{4}){11}$/);
    const session = await storedSession(tab);
    expect(session.userId).toBe(`@ada:${await serverNameOf(tab)}`);
    // Cross-signing came with the account: the homeserver has Ada's master key.
    const keys = await pageFetch(tab, 'POST', '/_matrix/client/v3/keys/query', { token: session.accessToken, body: { device_keys: { [session.userId]: [] } } });
    expect(keys.body.master_keys?.[session.userId]?.usage).toEqual(['master']);
  }, 120_000);

  it('creates a room and sends a message', async () => {
    await createRoom(tab, 'Fireside');
    await send(tab, `Hello from ${engine}`);
  }, 60_000);

  it('reloads: the core starts again from IndexedDB, with the room and the message', async () => {
    await tab.reload();
    await waitUntilReady(tab);
    await tab.waitFor({ css: '.room-item .name', text: 'Fireside' });
    await messageShown(tab, `Hello from ${engine}`);
    await send(tab, 'and after the reload');
  }, 60_000);

  it('an upload handed to the core arrives whole, and downloads as the same bytes', async () => {
    const { accessToken } = await storedSession(tab);
    const result = await tab.evaluate(async (token) => {
      // Three chunks and a bit: the page hands them over 256 KiB at a time.
      const bytes = new Uint8Array(3 * 256 * 1024 + 1000);
      for (let offset = 0; offset < bytes.length; offset += 65_536) crypto.getRandomValues(bytes.subarray(offset, offset + 65_536));
      const digest = async (data: BufferSource) => [...new Uint8Array(await crypto.subtle.digest('SHA-256', data))].map((b) => b.toString(16).padStart(2, '0')).join('');
      let progress = 0;
      const upload = await (globalThis as any).hearthPageHost.uploadMedia({ data: new Blob([bytes]), accessToken: token, contentType: 'application/octet-stream', fileName: 'noise.bin' }, (loaded: number) => (progress = loaded));
      const mxc = upload.body.content_uri as string | undefined;
      if (!mxc) return { upload };
      const download = await fetch(`/_matrix/client/v1/media/download/${mxc.slice('mxc://'.length)}`, { headers: { authorization: `Bearer ${token}` } });
      return { upload, progress, sent: await digest(bytes), size: bytes.length, status: download.status, received: await digest(await download.arrayBuffer()) };
    }, accessToken);
    expect(result.upload.status, JSON.stringify(result.upload)).toBe(200);
    expect(result.status).toBe(200);
    expect(result.received).toBe(result.sent);
    expect(result.progress).toBe(result.size);
  }, 60_000);
});

/** Two engines, each page its own homeserver; `webrtc` whether both have WebRTC, so that they link directly. */
const PAIRS: { first: Engine; second: Engine; webrtc: boolean }[] = [
  { first: 'firefox', second: 'chromium', webrtc: true },
  // WebKitGTK as Debian builds it has no RTCPeerConnection: its page reaches the other through the relay alone.
  { first: 'webkit', second: 'firefox', webrtc: false },
];

for (const { first, second, webrtc } of PAIRS) describe(`an encrypted direct message between a ${ENGINE_NAMES[first]} page and a ${ENGINE_NAMES[second]} page`, () => {
  type Side = { engine: Engine; name: string; browser?: EngineBrowser; profile?: Profile; tab?: Tab; userId?: string; serverName?: string };
  const sides: [Side, Side] = [
    { engine: first, name: `${first}-ana` },
    { engine: second, name: `${second}-ben` },
  ];
  const [ana, ben] = sides;
  const tabOf = (side: Side) => side.tab!;

  beforeAll(async () => {
    for (const side of sides) {
      side.browser = await launchEngine(side.engine);
      side.profile = await side.browser.newProfile();
      side.tab = await openHearth(side.profile, site.url + '/');
      side.serverName = await serverNameOf(side.tab);
    }
  }, 120_000);

  afterAll(async () => {
    for (const side of sides) {
      await side.profile?.close();
      await side.browser?.close();
    }
  });

  it('each creates an account with a recovery key, and reaches the other through the relay', async () => {
    for (const side of sides) {
      await createAccount(tabOf(side), side.name);
      side.userId = (await storedSession(tabOf(side))).userId;
    }
    await waitUntilReachable(tabOf(ana), ben.serverName!);
    await waitUntilReachable(tabOf(ben), ana.serverName!);
  }, 180_000);

  it(`the ${ENGINE_NAMES[first]} page starts an encrypted DM with the ${ENGINE_NAMES[second]} page; both read each other, and both homeservers hold only ciphertext`, async () => {
    const roomId = await startEncryptedDm(tabOf(ana), tabOf(ben), ben.userId!);
    await send(tabOf(ana), `Hello from ${first}`);
    await messageShown(tabOf(ben), `Hello from ${first}`, 60_000);
    await send(tabOf(ben), `Hello from ${second}`);
    await messageShown(tabOf(ana), `Hello from ${second}`, 60_000);
    for (const side of sides) {
      const { accessToken } = await storedSession(tabOf(side));
      const { status, body } = await pageFetch(tabOf(side), 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=100`, { token: accessToken });
      expect(status).toBe(200);
      const messages = (body.chunk as any[]).filter((event) => event.state_key === undefined && event.type !== 'm.room.member');
      expect(messages.map((event) => event.sender)).toEqual(expect.arrayContaining([ana.userId, ben.userId]));
      for (const event of messages) expect(event.type).toBe('m.room.encrypted');
      expect(JSON.stringify(body)).not.toContain(`from ${first}`);
      expect(JSON.stringify(body)).not.toContain(`from ${second}`);
    }
  }, 180_000);

  if (webrtc) {
    it('the two engines link directly over WebRTC, the relay only signalling it', async () => {
      // Generous, as in browser-to-browser.test.ts: a WebRTC dial on a loaded machine takes seconds, and a failed one is tried again.
      for (const [side, other] of [[ana, ben], [ben, ana]] as const) {
        await openPeersView(tabOf(side));
        await tabOf(side).waitFor({ css: `.peer-list .peer[data-server-name="${other.serverName}"][data-via="direct"]` }, { timeoutMs: 80_000 });
        const direct = (name: string) => (globalThis as any).hearthP2P.node.peers().some((peer: any) => peer.server_name === name && peer.multiaddrs.some((address: string) => address.includes('/webrtc')));
        expect(await tabOf(side).evaluate(direct, other.serverName!)).toBe(true);
        await tabOf(side).waitFor({ css: '.no-webrtc' }, { gone: true });
      }
    }, 180_000);
  } else {
    it(`the ${ENGINE_NAMES[first]} page, which has no WebRTC, says so in its peers panel, and both reach each other through the relay`, async () => {
      expect(await tabOf(ana).evaluate(() => typeof RTCPeerConnection)).toBe('undefined');
      for (const side of sides) await openPeersView(tabOf(side));
      await tabOf(ana).waitFor({ css: '.p2p-panel .no-webrtc', text: 'This browser has no WebRTC' });
      // Neither listens for WebRTC where one cannot: no /webrtc address in its own list.
      expect(await tabOf(ana).evaluate(() => (globalThis as any).hearthP2P.node.multiaddrs().some((address: string) => address.includes('/webrtc')))).toBe(false);
      for (const [side, other] of [[ana, ben], [ben, ana]] as const) {
        await tabOf(side).waitFor({ css: `.peer-list .peer[data-server-name="${other.serverName}"][data-via="relayed"]` });
      }
      await tabOf(ben).waitFor({ css: '.no-webrtc' }, { gone: true });
    }, 60_000);
  }
});
