import type { BrowserContext, Page } from 'playwright-core';
import { pageServerName, registerThroughUi, startRelayedPages, type HearthSite } from './hearth-page.ts';

// Two browser homeservers, each in its own browser context, that meet through a Node relay: what the
// page's two-person end-to-end tests start from, most of them from an encrypted DM (meetInEncryptedDm).

export interface PagePair {
  site: HearthSite;
  contexts: BrowserContext[];
  pageA: Page;
  pageB: Page;
  /** @ana and @ben on the two pages' server names (accounts not made yet). */
  ana: string;
  ben: string;
  close(): Promise<void>;
}

export async function startPagePair(dist: string, name: string): Promise<PagePair> {
  const relayed = await startRelayedPages(dist, name);
  try {
    const [pageA, pageB] = relayed.pages as [Page, Page];
    return { site: relayed.site, contexts: relayed.contexts, pageA, pageB, ana: `@ana:${await pageServerName(pageA)}`, ben: `@ben:${await pageServerName(pageB)}`, close: relayed.close };
  } catch (error) {
    await relayed.close();
    throw error;
  }
}

/** Waits until each page's homeserver knows the other by server name (through the relay). */
export async function waitUntilReachable(pair: PagePair): Promise<void> {
  await pair.pageA.waitForFunction((name) => (globalThis as any).hearthP2P.reachable.has(name), pair.ben.split(':')[1], { timeout: 30_000 });
  await pair.pageB.waitForFunction((name) => (globalThis as any).hearthP2P.reachable.has(name), pair.ana.split(':')[1], { timeout: 30_000 });
}

/** Ana starts an encrypted direct message with Ben through the UI, and Ben accepts it; returns its room ID. */
export async function startEncryptedDm(pair: PagePair): Promise<string> {
  const { pageA, pageB, ben } = pair;
  await pageA.getByLabel('Start a direct chat with').fill(ben);
  await pageA.getByRole('button', { name: 'Start chat' }).click();
  await pageA.locator('.room-encryption', { hasText: /^Encrypted$/ }).waitFor();
  await pageA.getByRole('list', { name: 'Direct chats' }).locator('.room-item').waitFor();
  const roomId = (await pageA.locator('.room-id').getAttribute('data-room-id'))!;
  // Ben is invited, in his direct messages; he accepts.
  const invite = pageB.getByRole('list', { name: 'Direct chats' }).locator('.invite');
  await invite.waitFor({ timeout: 30_000 });
  await invite.getByRole('button', { name: 'Accept' }).click();
  await pageB.locator(`.room-id[data-room-id="${roomId}"]`).waitFor({ timeout: 30_000 });
  await pageB.locator('.room-encryption', { hasText: /^Encrypted$/ }).waitFor();
  await pageB.getByRole('list', { name: 'Direct chats' }).locator('.room-item').waitFor();
  await pageA.locator('.timeline .notice', { hasText: 'ben joined' }).waitFor({ timeout: 30_000 });
  return roomId;
}

/** What most of the page's two-person tests start from: Ana and Ben create accounts, meet, and share an encrypted DM; returns its room ID. */
export async function meetInEncryptedDm(pair: PagePair): Promise<string> {
  await registerThroughUi(pair.pageA, 'ana');
  await registerThroughUi(pair.pageB, 'ben');
  await waitUntilReachable(pair);
  return startEncryptedDm(pair);
}
