import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startNodeHost, type NodeHost } from '../../src/node/node-host.ts';
import { openHearth, pageServerName, startSite, type HearthSite } from './hearth-page.ts';

// Copy, not move: one browser's export imported into a second browser while the first stays
// open. The relay both pages use sees one identity connected twice, and both pages say that
// federation is paused and why (src/p2p/twin.ts).

let dir: string;
let relay: NodeHost;
let site: HearthSite;
const contexts: BrowserContext[] = [];
const PASSPHRASE = 'two of a kind';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hearth-e2e-twin-'));
  relay = await startNodeHost({ dataDir: join(dir, 'relay'), port: 0, listen: ['/ip4/127.0.0.1/tcp/0/ws'], relay: true, detectTwins: true, rateLimits: false });
  site = await startSite(inject('hearthDist'), { config: { bootstrap: relay.p2p.multiaddrs(), iceServers: [], allowPrivateAddresses: true, detectTwins: true } });
});
afterAll(async () => {
  for (const context of contexts) await context.close();
  await site?.close();
  await relay?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function freshPage(): Promise<Page> {
  const context = await site.browser.newContext();
  contexts.push(context);
  return openHearth(context, site.server.url + '/');
}

describe('two copies of one homeserver online', () => {
  it('both pages pause federation and say why', async () => {
    const original = await freshPage();
    const serverName = await pageServerName(original);
    await original.locator('button.storage').click();
    const panel = original.getByRole('dialog', { name: 'Storage and backup' });
    await panel.getByLabel('Export passphrase').fill(PASSPHRASE);
    await panel.getByLabel('Repeat the passphrase').fill(PASSPHRASE);
    const download = original.waitForEvent('download');
    await panel.getByRole('button', { name: 'Export', exact: true }).click();
    const file = join(dir, 'copy.hearth');
    await (await download).saveAs(file);
    await panel.getByRole('button', { name: 'Close' }).click();
    await expect.poll(() => relay.p2p.peers().map((p) => p.server_name)).toContain(serverName);

    const copy = await freshPage();
    const card = copy.locator('form.keep-import');
    await card.getByLabel('Homeserver file').setInputFiles(file);
    await card.getByLabel('Archive passphrase').fill(PASSPHRASE);
    await card.getByRole('button', { name: 'Import' }).click();
    await copy.waitForFunction((name) => (globalThis as any).hearthHost?.state.serverName === name && document.body.dataset.homeserver === 'ready', serverName, { timeout: 60_000 });

    for (const page of [original, copy]) {
      await page.locator('.status[data-state="twin"]', { hasText: 'Federation paused: another copy of this homeserver is online' }).waitFor({ timeout: 60_000 });
      expect(await page.locator('.status').getAttribute('title')).toMatch(new RegExp(`^Another copy of this homeserver \\(the same identity\\) is online: ${relay.p2p.peerId} sees it connected from /ip4/127\\.0\\.0\\.1/`));
    }
  }, 180_000);
});
