// Issue 12: the browser homeserver and a Node peer over WebSockets (the leader tab's libp2p node).
// Page open → the page's node connected to its bootstrap peer (from /hearth-config.json), and
// message delivery both ways: a send on one homeserver → the other's /sync returns it.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildPage } from '../scripts/build.ts';
import { serveStatic } from '../scripts/static-server.ts';
import { startNodeHost } from '../src/node/node-host.ts';
import { launchChromium } from '../test/e2e/chromium.ts';
import { clientRequest, pageRequest, percentile, report, type Row } from './harness.ts';

const OPEN_ROUNDS = 8;
const SAMPLES = 30;



const has = (sync: any, roomId: string, text: string) => (sync.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.content?.body === text);

export async function run(): Promise<void> {
  const dist = await mkdtemp(join(tmpdir(), 'hearth-bench-peer-'));
  const data = await mkdtemp(join(tmpdir(), 'hearth-bench-peer-data-'));
  await buildPage(dist, { quiet: true });
  const peer = await startNodeHost({ dataDir: data, port: 0, listen: ['/ip4/127.0.0.1/tcp/0/ws'], rateLimits: false });
  /** A client request to the Node peer over HTTP, as its own client makes it. */
  const nodeRequest = (method: string, path: string, token?: string, body?: unknown) => clientRequest((request) => fetch(request), peer.url + path, method, token, body);
  const server = await serveStatic(dist, 0, '127.0.0.1', { config: { bootstrap: peer.p2p.multiaddrs(), iceServers: [], allowPrivateAddresses: true } });
  const browser = await launchChromium();
  const url = server.url + '/';
  try {
    // Page open → connected, each in a fresh context (first visit: service worker install, core start, new identity).
    const opens: { connected: number; versions: number }[] = [];
    for (let i = 0; i < OPEN_ROUNDS; i++) {
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(url);
      await page.waitForFunction(() => performance.getEntriesByName('hearth-p2p-first-peer').length > 0, undefined, { timeout: 60_000 });
      await page.waitForFunction(() => performance.getEntriesByName('hearth-versions-answered').length > 0, undefined, { timeout: 60_000 });
      opens.push(await page.evaluate(() => ({ connected: performance.getEntriesByName('hearth-p2p-first-peer')[0]!.startTime, versions: performance.getEntriesByName('hearth-versions-answered')[0]!.startTime })));
      await context.close();
    }
    const connected = opens.map((o) => o.connected).sort((a, b) => a - b);
    const versions = opens.map((o) => o.versions).sort((a, b) => a - b);

    // Delivery: alice in the page, bob on the Node peer, in one room.
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(url);
    await page.waitForFunction(() => document.body.dataset.p2p === 'running', undefined, { timeout: 60_000 });
    await page.waitForFunction(() => (globalThis as any).hearthP2P.node.peers().length > 0, undefined, { timeout: 60_000 });
    const alice = await pageRequest(page, 'POST', '/_matrix/client/v3/register', undefined, { username: 'alice', password: 'alice password', auth: { type: 'm.login.dummy' } });
    const bob = await nodeRequest('POST', '/_matrix/client/v3/register', undefined, { username: 'bob', password: 'bob password', auth: { type: 'm.login.dummy' } });
    const roomId = (await pageRequest(page, 'POST', '/_matrix/client/v3/createRoom', alice.access_token, { invite: [bob.user_id] })).room_id as string;
    await nodeRequest('POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}`, bob.access_token, {});
    const room = `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}`;
    let aliceSince = (await pageRequest(page, 'GET', '/_matrix/client/v3/sync?timeout=0', alice.access_token)).next_batch as string;
    let bobSince = (await nodeRequest('GET', '/_matrix/client/v3/sync?timeout=0', bob.access_token)).next_batch as string;

    const toBrowser: number[] = [];
    const toNode: number[] = [];
    for (let i = 0; i < SAMPLES; i++) {
      // Node → browser: the page long-polls /sync (through its service worker) until the message is there.
      const text = `to the browser ${i}`;
      const seen = page.evaluate(
        async ({ token, since, roomId, text }) => {
          for (;;) {
            const sync = await (await fetch(`/_matrix/client/v3/sync?timeout=10000&since=${encodeURIComponent(since)}`, { headers: { authorization: `Bearer ${token}` } })).json();
            since = sync.next_batch;
            if ((sync.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.content?.body === text)) return { at: performance.timeOrigin + performance.now(), since };
          }
        },
        { token: alice.access_token, since: aliceSince, roomId, text },
      );
      const sentAt = Date.now();
      await nodeRequest('PUT', `${room}/send/m.room.message/n${i}`, bob.access_token, { msgtype: 'm.text', body: text });
      const got = await seen;
      toBrowser.push(got.at - sentAt);
      aliceSince = got.since;

      // Browser → Node: bob long-polls the Node peer's /sync.
      const back = `to the Node peer ${i}`;
      const started = Date.now();
      const sending = pageRequest(page, 'PUT', `${room}/send/m.room.message/b${i}`, alice.access_token, { msgtype: 'm.text', body: back });
      for (;;) {
        const sync = await nodeRequest('GET', `/_matrix/client/v3/sync?timeout=10000&since=${encodeURIComponent(bobSince)}`, bob.access_token);
        bobSince = sync.next_batch;
        if (has(sync, roomId, back)) break;
      }
      toNode.push(Date.now() - started);
      await sending;
    }
    toBrowser.sort((a, b) => a - b);
    toNode.sort((a, b) => a - b);
    await context.close();

    const rows: Row[] = [
      ['page open → connected to the Node peer, p50', percentile(connected, 50), 'ms', `${OPEN_ROUNDS} first visits; /versions answered at p50 ${percentile(versions, 50).toFixed(0)} ms`],
      ['page open → connected to the Node peer, max', connected.at(-1)!, 'ms'],
      ['send on the Node peer → the page’s /sync has it, p50', percentile(toBrowser, 50), 'ms', `${SAMPLES} sends`],
      ['send on the Node peer → the page’s /sync has it, p95', percentile(toBrowser, 95), 'ms'],
      ['send in the page → the Node peer’s /sync has it, p50', percentile(toNode, 50), 'ms', `${SAMPLES} sends; includes Playwright’s call into the page`],
      ['send in the page → the Node peer’s /sync has it, p95', percentile(toNode, 95), 'ms'],
    ];
    report('browser ↔ Node peer over WebSockets', `Chromium ${browser.version()}, headless; Node peer in the bench process`, rows);
  } finally {
    await browser.close();
    await server.close();
    await peer.close();
    await rm(dist, { recursive: true, force: true });
    await rm(data, { recursive: true, force: true });
  }
}
