import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { registerThroughUi, storedSession } from './hearth-page.ts';
import { startEncryptedDm, startPagePair, waitUntilReachable, type PagePair } from './page-pair.ts';

// Issue 38, verifying people by emoji (SAS, matrix-js-sdk's verification API on its Rust crypto), through
// the UI: two browser homeservers, Ana and Ben in an encrypted DM. One asks from the other's profile card,
// the other accepts; both pages show the same 7 emoji with their names. "They don't match" cancels and
// verifies nothing; "They match" on both verifies each to the other, which their cards say, also after a
// reload. Then Ben signs in anew (a new device he has not verified): Ana's room warns of it, until Ben
// verifies that device with his recovery key.

const PASSWORD = 'correct horse battery staple';
let pair: PagePair;
let pageA: Page;
let pageB: Page;
let benRecoveryKey: string;

beforeAll(async () => {
  pair = await startPagePair(inject('hearthDist'), 'verify');
  ({ pageA, pageB } = pair);
  await registerThroughUi(pageA, 'ana', PASSWORD);
  benRecoveryKey = (await registerThroughUi(pageB, 'ben', PASSWORD))!;
  await waitUntilReachable(pair);
  await startEncryptedDm(pair);
}, 180_000);

afterAll(async () => {
  await pair?.close();
});

/** The members pane's entry of `name`, its profile card opened. */
async function openCard(page: Page, name: string) {
  await page.locator('.member-details').evaluate((details: HTMLDetailsElement) => (details.open = true));
  const item = page.getByRole('complementary', { name: 'Members' }).getByRole('listitem').filter({ has: page.locator('.name', { hasText: new RegExp(`^${name}$`) }) });
  const card = item.locator('.member-devices');
  if (!(await card.evaluate((details: HTMLDetailsElement) => details.open))) await card.locator('summary', { hasText: 'Profile' }).click();
  return item;
}

const dialog = (page: Page) => page.getByRole('dialog');

/** The emoji a page shows to compare, each as "symbol name", once all 7 are there. */
async function shownEmoji(page: Page): Promise<string[]> {
  const list = dialog(page).getByRole('list', { name: 'Emoji to compare' });
  await list.getByRole('listitem').nth(6).waitFor({ timeout: 60_000 });
  return list.getByRole('listitem').evaluateAll((items) => items.map((li) => `${li.querySelector('.sas-symbol')!.textContent} ${li.querySelector('.sas-name')!.textContent}`));
}

describe('emoji verification between two people', () => {
  it('their cards say they are not verified, with Verify', async () => {
    const benOnA = await openCard(pageA, 'ben');
    await benOnA.locator('.member-trust', { hasText: 'Not verified' }).waitFor({ timeout: 30_000 });
    expect(await benOnA.getByRole('button', { name: 'Verify' }).isVisible()).toBe(true);
    const anaOnB = await openCard(pageB, 'ana');
    await anaOnB.locator('.member-trust', { hasText: 'Not verified' }).waitFor({ timeout: 30_000 });
  }, 60_000);

  it('"They don\u2019t match" cancels on both pages, and nothing is verified', async () => {
    // Ben asks this time; Ana is asked.
    await (await openCard(pageB, 'ana')).getByRole('button', { name: 'Verify' }).click();
    await dialog(pageB).getByText('Waiting for ana to accept').waitFor({ timeout: 30_000 });
    const asked = dialog(pageA);
    await asked.getByText('ben wants to verify you').waitFor({ timeout: 60_000 });
    await asked.getByRole('button', { name: 'Accept' }).click();
    const [onA, onB] = await Promise.all([shownEmoji(pageA), shownEmoji(pageB)]);
    expect(onA).toHaveLength(7);
    expect(onA).toEqual(onB);
    await asked.getByRole('button', { name: 'They don\u2019t match' }).click();
    for (const page of [pageA, pageB]) {
      await dialog(page).getByRole('heading', { name: 'Verification cancelled' }).waitFor({ timeout: 30_000 });
      expect(await dialog(page).getByRole('status').textContent()).toContain('The emoji did not match: nothing was verified');
      await dialog(page).getByRole('button', { name: 'Close' }).click();
      await dialog(page).waitFor({ state: 'detached' });
    }
    expect(await (await openCard(pageA, 'ben')).locator('.member-trust').textContent()).toContain('Not verified');
    expect(await (await openCard(pageB, 'ana')).locator('.member-trust').textContent()).toContain('Not verified');
  }, 120_000);

  it('Ana asks from Ben\u2019s card, Ben accepts; both pages show the same 7 emoji with names; both confirm and both are verified', async () => {
    await (await openCard(pageA, 'ben')).getByRole('button', { name: 'Verify' }).click();
    const asked = dialog(pageB);
    await asked.getByText('ana wants to verify you').waitFor({ timeout: 60_000 });
    await asked.getByRole('button', { name: 'Accept' }).click();
    const [onA, onB] = await Promise.all([shownEmoji(pageA), shownEmoji(pageB)]);
    expect(onA).toHaveLength(7);
    expect(onA).toEqual(onB);
    // Each is an emoji and its name (the SAS's, in English).
    for (const shown of onA) expect(shown).toMatch(/^\p{Extended_Pictographic}\S* [A-Z][A-Za-z ]+$/u);
    // The request shows in the room as a notice; its steps do not.
    await pageB.locator('.timeline .notice', { hasText: 'ana asked ben to verify' }).waitFor();
    await dialog(pageB).getByRole('button', { name: 'They match' }).click();
    await dialog(pageB).getByText('Waiting for ana to confirm').waitFor();
    await dialog(pageA).getByRole('button', { name: 'They match' }).click();
    for (const page of [pageA, pageB]) {
      await dialog(page).getByRole('heading', { name: 'Verified' }).waitFor({ timeout: 30_000 });
      await dialog(page).getByRole('button', { name: 'Done' }).click();
      await dialog(page).waitFor({ state: 'detached' });
    }
    const benOnA = await openCard(pageA, 'ben');
    await benOnA.locator('.member-trust', { hasText: /^Verified$/ }).waitFor({ timeout: 30_000 });
    expect(await benOnA.getByRole('button', { name: 'Verify' }).count()).toBe(0);
    await benOnA.locator('.trust-badge.verified').waitFor();
    await (await openCard(pageB, 'ana')).locator('.member-trust', { hasText: /^Verified$/ }).waitFor({ timeout: 30_000 });
  }, 120_000);

  it('verified survives a reload', async () => {
    await pageA.reload();
    await pageA.getByLabel('New room name').waitFor({ timeout: 30_000 });
    await pageA.getByRole('list', { name: 'Direct chats' }).locator('.room-item').click({ timeout: 30_000 });
    await (await openCard(pageA, 'ben')).locator('.member-trust', { hasText: /^Verified$/ }).waitFor({ timeout: 30_000 });
    expect(await pageA.locator('.trust-warning').count()).toBe(0);
  }, 60_000);
});

describe('a verified person\u2019s new session', () => {
  it('Ben signs in anew without verifying that device: Ana\u2019s room warns of it; verified with his recovery key, the warning goes', async () => {
    const first = await storedSession(pageB);
    await pageB.getByRole('button', { name: 'Sign out' }).click();
    await pageB.getByRole('heading', { name: 'Sign in' }).waitFor();
    await pageB.getByLabel('Username').fill('ben');
    await pageB.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await pageB.getByRole('button', { name: 'Sign in', exact: true }).click();
    await pageB.getByLabel('New room name').waitFor();
    expect((await storedSession(pageB)).deviceId).not.toBe(first.deviceId);

    const warning = pageA.getByRole('alert').filter({ hasText: 'ben has a new session that is not verified' });
    await warning.waitFor({ timeout: 60_000 });
    // Still Ben, whom Ana verified: his identity did not change, one of his devices is not his verified one.
    const benOnA = await openCard(pageA, 'ben');
    await benOnA.locator('.trust-badge.warning', { hasText: 'new session not verified' }).waitFor();
    expect(await benOnA.locator('.member-trust').textContent()).toBe('Verified');

    await pageB.getByLabel('Recovery key').fill(benRecoveryKey);
    await pageB.getByRole('region', { name: 'Encryption' }).getByRole('button', { name: 'Verify', exact: true }).click();
    await pageB.getByRole('heading', { name: 'Verify this device' }).waitFor({ state: 'detached', timeout: 30_000 });
    await warning.waitFor({ state: 'detached', timeout: 60_000 });
    await benOnA.locator('.trust-badge.verified').waitFor();
  }, 150_000);
});
