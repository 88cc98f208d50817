import sharp from 'sharp';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { api, register } from '../integration/harness.ts';
import { startNodePeer, type NodePeer } from '../support/node-peer.ts';
import { openHearth, pageFetch, pageServerName, startSite, type HearthSite } from './hearth-page.ts';

// Media across a browser peer and a Node peer (issue 14): each side's upload is fetched by
// the other on first use over /_matrix/federation/v1/media/*, through the page's libp2p node
// and the page ↔ Worker bridge, multipart/mixed bytes intact.

let peer: NodePeer;
let site: HearthSite;
let context: BrowserContext;
let page: Page;
let browserServerName: string;

beforeAll(async () => {
  peer = await startNodePeer();
  site = await startSite(inject('hearthDist'), { config: { bootstrap: peer.p2p.multiaddrs(), iceServers: [], allowPrivateAddresses: true } });
  context = await site.browser.newContext();
  page = await openHearth(context, site.server.url + '/');
  browserServerName = await pageServerName(page);
});

afterAll(async () => {
  await context?.close();
  await site?.close();
  await peer?.close();
});

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

describe('media between a browser peer and a Node peer', () => {
  it('an image uploaded on the Node peer downloads in the page, and one uploaded in the page downloads on the Node peer', async () => {
    // The page's node has dialled its bootstrap peer.
    await expect.poll(() => peer.p2p.peers().map((p) => p.server_name), { timeout: 20_000 }).toContain(browserServerName);
    const registered = await pageFetch(page, 'POST', '/_matrix/client/v3/register', { body: { username: 'erin', password: 'erins password', auth: { type: 'm.login.dummy' } } });
    expect(registered.status).toBe(200);
    const token = registered.body.access_token as string;
    const frank = await register(peer, 'frank');

    // Node → page.
    const png = new Uint8Array(await sharp({ create: { width: 120, height: 80, channels: 3, background: '#00aa44' } }).png().toBuffer()) as Uint8Array<ArrayBuffer>;
    const uploaded = await api(peer, 'POST', '/_matrix/media/v3/upload?filename=green.png', { token: frank.accessToken, rawBody: png, headers: { 'content-type': 'image/png' } });
    const nodePath = (uploaded.body.content_uri as string).slice('mxc://'.length);
    const inPage = await page.evaluate(
      async ({ path, token }) => {
        const fetchHex = async (url: string) => {
          const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
          const bytes = new Uint8Array(await response.arrayBuffer());
          return { status: response.status, type: response.headers.get('content-type'), disposition: response.headers.get('content-disposition'), hex: [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('') };
        };
        const thumbnail = await fetch(`/_matrix/client/v1/media/thumbnail/${path}?width=32&height=32&method=crop`, { headers: { authorization: `Bearer ${token}` } });
        const bitmap = thumbnail.ok ? await createImageBitmap(await thumbnail.blob()) : undefined;
        return { download: await fetchHex(`/_matrix/client/v1/media/download/${path}`), thumbnail: { status: thumbnail.status, width: bitmap?.width, height: bitmap?.height } };
      },
      { path: nodePath, token },
    );
    expect(inPage.download).toEqual({ status: 200, type: 'image/png', disposition: 'inline; filename="green.png"', hex: hex(png) });
    expect(inPage.thumbnail).toEqual({ status: 200, width: 32, height: 32 });

    // Page → Node.
    const fromPage = await page.evaluate(async (token) => {
      const bytes = new TextEncoder().encode('notes from the browser '.repeat(1000));
      const response = await fetch('/_matrix/media/v3/upload?filename=notes.txt', { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' }, body: bytes });
      return { contentUri: ((await response.json()) as { content_uri: string }).content_uri, length: bytes.length };
    }, token);
    expect(fromPage.contentUri.startsWith(`mxc://${browserServerName}/`)).toBe(true);
    const onNode = await fetch(`${peer.url}/_matrix/client/v1/media/download/${fromPage.contentUri.slice('mxc://'.length)}`, { headers: { authorization: `Bearer ${frank.accessToken}` } });
    expect(onNode.status).toBe(200);
    expect(onNode.headers.get('content-type')).toBe('text/plain');
    expect(onNode.headers.get('content-disposition')).toBe('inline; filename="notes.txt"');
    expect(await onNode.text()).toBe('notes from the browser '.repeat(1000));
  });
});
