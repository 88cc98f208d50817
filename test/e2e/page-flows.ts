import type { Profile, Tab } from './browsers.ts';

// What a person does with the page, written once against `Tab` (browsers.ts) so that it runs in every
// engine (issue 39). The Chromium-only suites keep their Playwright helpers (hearth-page.ts,
// page-pair.ts); these are the same steps, for the tests that run across engines.

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

const DIRECT_CHATS = 'ul[aria-label="Direct chats"]';

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
