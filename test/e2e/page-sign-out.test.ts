import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRoomThroughUi, openHearth, pageFetch, sendThroughUi, signOutThroughUi, startSite, storedSession, type HearthSite } from './hearth-page.ts';

// Issue 38: Sign out asks first, every time, saying what signing out does to this page's keys; Cancel
// keeps you signed in. While the recovery key is unsaved it warns instead, and that warning is reachable:
// the recovery key dialog is modal, so it covers the top bar's Sign out and offers its own. A message sent
// just before signing out is read again after signing in with the recovery key: the sign-out first saves
// its room key to the key backup, which the SDK uploads only up to 10 s after the key is made.

const PASSWORD = 'correct horse battery staple';

let site: HearthSite;
let context: BrowserContext;
let page: Page;
/** Ana's recovery key, shown when her account was made. */
let anaKey: string;

/** Creates an account through the form and waits for its recovery key, left unsaved; returns the key. */
async function createAccount(username: string): Promise<string> {
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
  await page.getByLabel('Confirm password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Create account' }).click();
  const key = page.getByRole('dialog', { name: 'Save your recovery key' }).getByLabel('Your recovery key');
  await key.waitFor({ timeout: 60_000 });
  return (await key.textContent())!;
}

/** Whether the homeserver still takes the token (whoami), asked from inside the page. */
const whoamiStatus = async (accessToken: string): Promise<number> => (await pageFetch(page, 'GET', '/_matrix/client/v3/account/whoami', { token: accessToken })).status;

beforeAll(async () => {
  site = await startSite(inject('hearthDist'));
  context = await site.browser.newContext();
  page = await openHearth(context, site.server.url + '/');
});

afterAll(async () => {
  await context?.close();
  await site?.close();
});

describe('Sign out asks first', () => {
  it('with the recovery key unsaved, the key dialog offers to sign out, which warns; Cancel goes back to the key', async () => {
    const key = (anaKey = await createAccount('ana'));
    const keyDialog = page.getByRole('dialog', { name: 'Save your recovery key' });
    await keyDialog.getByRole('button', { name: 'Sign out without saving it' }).click();

    const warning = page.getByRole('dialog', { name: 'Sign out without your recovery key?' });
    await warning.waitFor();
    expect(await warning.textContent()).toMatch(/recovery key is not saved yet.*deletes this device’s encryption keys.*no later sign-in can read your encrypted messages/);
    await warning.getByRole('button', { name: 'Cancel' }).click();
    await warning.waitFor({ state: 'detached' });

    // Still signed in, the same key still waiting to be saved.
    expect(await keyDialog.getByLabel('Your recovery key').textContent()).toBe(key);
    expect(await whoamiStatus((await storedSession(page)).accessToken)).toBe(200);
    await keyDialog.getByRole('button', { name: 'I have saved my recovery key' }).click();
    await keyDialog.waitFor({ state: 'detached' });
  }, 120_000);

  it('the top bar’s Sign out says what it means; Cancel and Escape keep the session; Sign out shows the sign-in form', async () => {
    const session = await storedSession(page);
    const signOut = page.getByRole('banner').getByRole('button', { name: 'Sign out' });
    const asked = page.getByRole('dialog', { name: 'Sign out?' });

    await signOut.click();
    await asked.waitFor();
    expect(await asked.textContent()).toMatch(/deletes this device’s encryption keys from this browser.*account, rooms and messages stay on your homeserver.*recovery key/);
    await asked.getByRole('button', { name: 'Cancel' }).click();
    await asked.waitFor({ state: 'detached' });
    // Cancelled: the same session, still taken by the homeserver, and the client still at work.
    expect((await storedSession(page)).accessToken).toBe(session.accessToken);
    expect(await whoamiStatus(session.accessToken)).toBe(200);
    await createRoomThroughUi(page, 'Still signed in');

    await signOut.click();
    await asked.waitFor();
    await page.keyboard.press('Escape');
    await asked.waitFor({ state: 'detached' });
    expect(await page.getByRole('banner').getByText(/^@ana:/).count()).toBe(1);

    // A new room's first message: its room key is new, and not in the key backup yet when Sign out is clicked (most runs).
    await sendThroughUi(page, 'Sent just before signing out');
    await signOut.click();
    await asked.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expect(await page.evaluate(() => localStorage.getItem('hearth-session'))).toBeNull();
    // The token is revoked just after the form shows.
    await expect.poll(() => whoamiStatus(session.accessToken), { timeout: 30_000 }).toBe(401);
  }, 120_000);

  it('signed in again and verified with the recovery key, the message sent just before signing out reads: its key was saved to the backup first', async () => {
    await page.getByLabel('Username').fill('ana');
    await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByLabel('Recovery key').fill(anaKey);
    await page.getByRole('region', { name: 'Encryption' }).getByRole('button', { name: 'Verify', exact: true }).click();
    await page.getByRole('heading', { name: 'Verify this device' }).waitFor({ state: 'detached', timeout: 30_000 });
    await page.locator('.room-item', { hasText: 'Still signed in' }).click();
    await page.locator('.event:not(.pending) .body', { hasText: 'Sent just before signing out' }).waitFor({ timeout: 60_000 });
    await signOutThroughUi(page);
  }, 120_000);

  it('with the recovery key unsaved, "Sign out anyway" signs out, and the unsaved key goes with the session', async () => {
    await page.getByRole('button', { name: 'Create a new account instead' }).click();
    await createAccount('ben');
    const keyDialog = page.getByRole('dialog', { name: 'Save your recovery key' });
    await keyDialog.getByRole('button', { name: 'Sign out without saving it' }).click();
    await page.getByRole('dialog', { name: 'Sign out without your recovery key?' }).getByRole('button', { name: 'Sign out anyway' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expect(await page.getByRole('dialog').count()).toBe(0);
    expect(await page.evaluate(() => localStorage.getItem('hearth-unsaved-recovery-key'))).toBeNull();
  }, 120_000);
});
