import type { MatrixClient } from 'matrix-js-sdk';
import { CryptoEvent, VerificationPhase, VerificationRequestEvent, VerifierEvent, type ShowSasCallbacks, type VerificationRequest } from 'matrix-js-sdk/lib/crypto-api/index.js';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startClient } from '../integration/sdk.ts';
import { pageFetch, registerThroughUi, signOutThroughUi, storedSession } from './hearth-page.ts';
import { startEncryptedDm, startPagePair, waitUntilReachable, type PagePair } from './page-pair.ts';

// Issue 38, verifying people by emoji (SAS, matrix-js-sdk's verification API on its Rust crypto), through
// the UI: two browser homeservers, Ana and Ben in an encrypted DM. One asks from the other's profile card,
// the other accepts; both pages show the same 7 emoji with their names. "They don't match" cancels and
// verifies nothing; "They match" on both verifies each to the other, which their cards say, also after a
// reload. Then Ben signs in anew (a new device he has not verified): Ana's room warns of it, until Ben
// verifies that device with his recovery key. Last, Ana's own devices verify each other by emoji: a second
// device of hers (matrix-js-sdk with its Rust crypto in Node, its requests sent through her page, as her
// homeserver runs in that page) is verified from her page, and then a new sign-in of the page is verified
// from that device, instead of with the recovery key.

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

let anaElsewhere: MatrixClient | undefined;

afterAll(async () => {
  anaElsewhere?.stopClient();
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

  it('Decline ends it on both pages: the one who asked is told', async () => {
    await (await openCard(pageA, 'ben')).getByRole('button', { name: 'Verify' }).click();
    await dialog(pageB).getByText('ana wants to verify you').waitFor({ timeout: 60_000 });
    await dialog(pageB).getByRole('button', { name: 'Decline' }).click();
    await dialog(pageA).getByRole('heading', { name: 'Verification cancelled' }).waitFor({ timeout: 30_000 });
    expect(await dialog(pageA).getByRole('status').textContent()).toBe('ben cancelled it: nothing was verified.');
    await dialog(pageB).getByRole('heading', { name: 'Verification cancelled' }).waitFor();
    expect(await dialog(pageB).getByRole('status').textContent()).toBe('You cancelled it: nothing was verified.');
    // Escape closes what is over.
    for (const page of [pageA, pageB]) {
      await page.keyboard.press('Escape');
      await dialog(page).waitFor({ state: 'detached' });
    }
  }, 90_000);

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
    // Each request shows in the room as a notice (this is Ana's second); its steps do not.
    await pageB.locator('.timeline .notice', { hasText: 'ana asked ben to verify' }).nth(1).waitFor();
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
    await signOutThroughUi(pageB);
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

/** A fetch that sends each request from inside `page` (through its service worker, to the homeserver the page runs). */
function fetchThrough(page: () => Page): typeof fetch {
  return (async (input: RequestInfo | URL, init: RequestInit = {}) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    const body = typeof init.body === 'string' ? init.body : undefined;
    const answer = await page().evaluate(
      async ({ url, method, headers, body }) => {
        const response = await fetch(url, { method, headers, body });
        return { status: response.status, headers: [...response.headers.entries()], text: await response.text() };
      },
      { url, method: init.method ?? 'GET', headers, body },
    );
    return new Response(answer.status === 204 ? null : answer.text, { status: answer.status, headers: answer.headers });
  }) as typeof fetch;
}

/** Resolves once `request` is in `phase`. */
function phaseOf(request: VerificationRequest, phase: VerificationPhase): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (request.phase !== phase) return;
      request.off(VerificationRequestEvent.Change, check);
      resolve();
    };
    request.on(VerificationRequestEvent.Change, check);
    check();
  });
}

/** Follows the SAS of `request` on the Node device: resolves with its callbacks (the emoji) once shown; `done` when verified. */
function followSas(request: VerificationRequest, start: boolean): { shown: Promise<ShowSasCallbacks>; done: Promise<void> } {
  let done!: Promise<void>;
  const shown = new Promise<ShowSasCallbacks>((resolve, reject) => {
    const verifier = start ? request.startVerification('m.sas.v1') : phaseOf(request, VerificationPhase.Started).then(() => request.verifier!);
    done = verifier.then((v) => {
      v.on(VerifierEvent.ShowSas, resolve);
      return v.verify();
    });
    done.catch(reject);
  });
  return { shown, done };
}

/** Until the Node device of Ana knows her device `deviceId` (its /keys/query after a device-list change). */
async function untilKnown(client: MatrixClient, deviceId: string): Promise<void> {
  const userId = client.getUserId()!;
  await expect.poll(async () => (await client.getCrypto()!.getUserDeviceInfo([userId])).get(userId)?.has(deviceId), { timeout: 30_000 }).toBe(true);
}

/** Until Ana's page knows her device `deviceId`: her own card lists it (the list is fetched each time the card opens). */
async function untilPageKnows(page: Page, deviceId: string): Promise<void> {
  const card = (await openCard(page, 'ana')).locator('.member-devices');
  const list = card.getByRole('list', { name: /^Devices of / });
  await expect.poll(async () => {
    await card.locator('summary').click();
    if (!(await card.evaluate((details: HTMLDetailsElement) => details.open))) await card.locator('summary').click();
    await list.getByText('Loading\u2026').waitFor({ state: 'detached' });
    return list.textContent();
  }, { timeout: 30_000 }).toContain(deviceId);
}

const names = (sas: ShowSasCallbacks) => sas.sas.emoji!.map(([symbol, name]) => `${symbol} ${name}`);

describe('one’s own devices verify each other by emoji', () => {
  it('a new device of Ana asks; her page is asked to verify it, both show the same emoji, and her page signs it', async () => {
    const siteUrl = pair.site.server.url;
    const login = await pageFetch(pageA, 'POST', '/_matrix/client/v3/login', { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'ana' }, password: PASSWORD, initial_device_display_name: 'Ana elsewhere' } });
    expect(login.status, JSON.stringify(login.body)).toBe(200);
    anaElsewhere = await startClient(siteUrl, { userId: login.body.user_id, accessToken: login.body.access_token, deviceId: login.body.device_id }, { crypto: true, fetchFn: fetchThrough(() => pageA) });
    const crypto = anaElsewhere.getCrypto()!;
    // Each side ignores a request from a device it does not know yet (the Rust crypto's "Could not retrieve the
    // device data for the incoming verification request"), as a person would not click Verify in the first second.
    await untilKnown(anaElsewhere, (await storedSession(pageA)).deviceId);
    await untilPageKnows(pageA, login.body.device_id);
    const request = await crypto.requestOwnUserVerification();

    const asked = dialog(pageA);
    await asked.getByRole('heading', { name: 'Verify your new sign-in' }).waitFor({ timeout: 60_000 });
    expect(await asked.textContent()).toContain(login.body.device_id);
    await asked.getByRole('button', { name: 'Accept' }).click();
    await phaseOf(request, VerificationPhase.Ready);
    const sas = followSas(request, true);
    const [onPage, elsewhere] = await Promise.all([shownEmoji(pageA), sas.shown]);
    expect(onPage).toHaveLength(7);
    expect(onPage).toEqual(names(elsewhere));
    await elsewhere.confirm();
    await asked.getByRole('button', { name: 'They match' }).click();
    await sas.done;
    await asked.getByRole('heading', { name: 'Verified' }).waitFor({ timeout: 30_000 });
    await asked.getByRole('button', { name: 'Done' }).click();
    await asked.waitFor({ state: 'detached' });
    // The page signed the new device with Ana's self-signing key, on her homeserver.
    const { accessToken } = await storedSession(pageA);
    const keys = await pageFetch(pageA, 'POST', '/_matrix/client/v3/keys/query', { token: accessToken, body: { device_keys: { [login.body.user_id]: [login.body.device_id] } } });
    const selfSigningKeyId = Object.keys(keys.body.self_signing_keys[login.body.user_id].keys)[0]!;
    expect(keys.body.device_keys[login.body.user_id][login.body.device_id].signatures[login.body.user_id][selfSigningKeyId]).toBeTruthy();
  }, 120_000);

  it('a new sign-in of the page is offered "Verify with another device": the other device accepts, the emoji match, and the page is verified', async () => {
    const elsewhere = anaElsewhere!;
    // Verified, that device was given Ana's cross-signing keys by her page (secret sharing): it can sign the next one.
    await expect.poll(async () => (await elsewhere.getCrypto()!.getCrossSigningStatus()).privateKeysCachedLocally.selfSigningKey, { timeout: 60_000 }).toBe(true);
    const incoming = new Promise<VerificationRequest>((resolve) => elsewhere.on(CryptoEvent.VerificationRequestReceived, resolve));

    await signOutThroughUi(pageA);
    // The signed-out device's crypto store goes. After a verification it stayed open until the garbage collector
    // freed the crypto's objects (21 s), and the sign-in below waited that long to start its encryption.
    const databases = () => pageA.evaluate(async () => (await indexedDB.databases()).map((database) => database.name));
    await expect.poll(databases, { timeout: 10_000 }).not.toContain('matrix-js-sdk::matrix-sdk-crypto');
    await pageA.getByLabel('Username').fill('ana');
    await pageA.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await pageA.getByRole('button', { name: 'Sign in', exact: true }).click();
    await pageA.getByLabel('New room name').waitFor();
    const panel = pageA.getByRole('region', { name: 'Encryption' });
    await untilKnown(elsewhere, (await storedSession(pageA)).deviceId);
    await panel.getByRole('button', { name: 'Verify with another device' }).click();
    await dialog(pageA).getByText('Waiting for your other device to accept').waitFor({ timeout: 30_000 });

    const request = await incoming;
    expect(request.isSelfVerification).toBe(true);
    await request.accept();
    const sas = followSas(request, false);
    const [onPage, shownElsewhere] = await Promise.all([shownEmoji(pageA), sas.shown]);
    expect(onPage).toHaveLength(7);
    expect(onPage).toEqual(names(shownElsewhere));
    await dialog(pageA).getByRole('button', { name: 'They match' }).click();
    await shownElsewhere.confirm();
    await sas.done;
    await dialog(pageA).getByRole('heading', { name: 'Verified' }).waitFor({ timeout: 30_000 });
    await dialog(pageA).getByRole('button', { name: 'Done' }).click();
    // This device is cross-signed now: the recovery key is no longer asked for.
    await pageA.getByRole('heading', { name: 'Verify this device' }).waitFor({ state: 'detached', timeout: 30_000 });
    const session = await storedSession(pageA);
    const keys = await pageFetch(pageA, 'POST', '/_matrix/client/v3/keys/query', { token: session.accessToken, body: { device_keys: { [session.userId]: [session.deviceId] } } });
    const selfSigningKeyId = Object.keys(keys.body.self_signing_keys[session.userId].keys)[0]!;
    expect(keys.body.device_keys[session.userId][session.deviceId].signatures[session.userId][selfSigningKeyId]).toBeTruthy();
  }, 150_000);
});
