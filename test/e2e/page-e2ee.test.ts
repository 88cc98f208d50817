import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openHearth, pageFetch, registerThroughUi, saveRecoveryKey, sendThroughUi, signOutThroughUi, storedSession } from './hearth-page.ts';
import { startEncryptedDm, startPagePair, waitUntilReachable, type PagePair } from './page-pair.ts';

// Issue 25, end-to-end encryption in the page (matrix-js-sdk and its Rust crypto), through the UI as a
// person uses it: two browser contexts, each its own homeserver, meet through a Node relay. Ana and Ben
// create accounts (each is shown a recovery key once), Ana starts a direct message with Ben, both read
// each other, and both homeservers hold only m.room.encrypted events. Then Ana signs in again as a new
// device, which cannot read what came before until it is verified with the recovery key; verified, it
// reads the backup and new messages. Last, Ben's page closes: what Ana sends meanwhile is marked pending
// until he is back (the relay is no mailbox here, so the message waits in Ana's outbox).

const PASSWORD = 'correct horse battery staple';
let pair: PagePair;
let pageA: Page;
let pageB: Page;
let ana: string;
let ben: string;
let anaRecoveryKey: string;
let roomId: string;

beforeAll(async () => {
  pair = await startPagePair(inject('hearthDist'), 'e2ee');
  ({ pageA, pageB, ana, ben } = pair);
}, 60_000);

afterAll(async () => {
  await pair?.close();
});

/** Every event of the room that the homeserver in `page` stores, read with the raw token (no client decrypts it). */
async function storedEvents(page: Page): Promise<any[]> {
  const { accessToken } = await storedSession(page);
  const { status, body } = await pageFetch(page, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=100`, { token: accessToken });
  expect(status, JSON.stringify(body)).toBe(200);
  return body.chunk;
}

const messageBody = (page: Page, text: string) => page.locator('.event:not(.pending) .body', { hasText: text });

describe('an encrypted direct message between two browser homeservers', () => {
  it('both create accounts; saving the recovery key is its last step, a dialog that says why, with copy and download', async () => {
    await pageA.getByLabel('Username').fill('ana');
    await pageA.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await pageA.getByLabel('Confirm password').fill(PASSWORD);
    await pageA.getByRole('button', { name: 'Create account' }).click();
    // The dialog opens with the chat screen, while the keys are made: nothing comes later to push the page down.
    const chatShown = pageA.getByLabel('New room name').waitFor().then(async () => pageA.getByRole('dialog').isVisible());
    expect(await chatShown).toBe(true);
    const dialog = pageA.getByRole('dialog', { name: 'Save your recovery key' });
    const keyText = dialog.getByLabel('Your recovery key');
    await keyText.waitFor({ timeout: 60_000 });
    expect(await dialog.textContent()).toMatch(/end-to-end encrypted.*new device.*Without it they are lost/);
    anaRecoveryKey = (await keyText.textContent())!;
    expect(anaRecoveryKey).toMatch(/^[1-9A-Za-z]{4}( [1-9A-Za-z]{4}){11}$/);
    // Modal: the page behind it takes no clicks, and Escape does not close it with the key unsaved.
    expect(await pageA.evaluate(() => document.querySelector('dialog.recovery-dialog')!.matches(':modal'))).toBe(true);
    await pageA.keyboard.press('Escape');
    expect(await dialog.isVisible()).toBe(true);
    // Copy puts the key on the clipboard; Download saves a file that holds it.
    await pair.contexts[0]!.grantPermissions(['clipboard-read', 'clipboard-write']);
    await dialog.getByRole('button', { name: 'Copy' }).click();
    await dialog.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await pageA.evaluate(() => navigator.clipboard.readText())).toBe(anaRecoveryKey);
    const download = pageA.waitForEvent('download');
    await dialog.getByRole('button', { name: 'Download' }).click();
    const saved = await download;
    expect(saved.suggestedFilename()).toBe('hearth-recovery-key.txt');
    const chunks: Buffer[] = [];
    for await (const chunk of (await saved.createReadStream())!) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).toString()).toContain(anaRecoveryKey);
    // A reload before it is confirmed shows the same key again.
    await pageA.reload();
    await pageA.getByRole('dialog', { name: 'Save your recovery key' }).getByText(anaRecoveryKey).waitFor({ timeout: 30_000 });
    expect(await saveRecoveryKey(pageA)).toBe(anaRecoveryKey);
    expect(await pageA.getByRole('dialog').count()).toBe(0);
    expect(await registerThroughUi(pageB, 'ben', PASSWORD)).toMatch(/^[1-9A-Za-z]{4}( [1-9A-Za-z]{4}){11}$/);
    // Cross-signing was set up with the account: the homeserver has Ana's master key.
    const { accessToken } = await storedSession(pageA);
    const keys = await pageFetch(pageA, 'POST', '/_matrix/client/v3/keys/query', { token: accessToken, body: { device_keys: { [ana]: [] } } });
    expect(keys.body.master_keys?.[ana]?.usage).toEqual(['master']);
    // Each homeserver knows the other by server name (through the relay) before they talk.
    await waitUntilReachable(pair);
  }, 120_000);

  it('Ana starts a direct message with Ben; it is encrypted and listed apart from rooms', async () => {
    roomId = await startEncryptedDm(pair);
  }, 90_000);

  it('both read each other, and both homeservers hold only m.room.encrypted', async () => {
    await sendThroughUi(pageA, 'Hello Ben, only we can read this');
    await messageBody(pageB, 'Hello Ben, only we can read this').waitFor({ timeout: 30_000 });
    await sendThroughUi(pageB, 'Hello Ana, same here');
    await messageBody(pageA, 'Hello Ana, same here').waitFor({ timeout: 30_000 });
    for (const page of [pageA, pageB]) {
      const events = await storedEvents(page);
      const messages = events.filter((e) => !e.state_key && e.state_key !== '' && e.type !== 'm.room.member');
      // Ana's homeserver got Ben's message over federation, and Ben's got Ana's: what each stores is what came on the wire.
      expect(messages.filter((e) => e.sender === ana).length, JSON.stringify(events)).toBeGreaterThanOrEqual(1);
      expect(messages.filter((e) => e.sender === ben).length).toBeGreaterThanOrEqual(1);
      for (const event of messages) expect(event.type).toBe('m.room.encrypted');
      expect(messages.every((e) => e.content.algorithm === 'm.megolm.v1.aes-sha2' && typeof e.content.ciphertext === 'string')).toBe(true);
      const stored = JSON.stringify(events);
      expect(stored).not.toContain('only we can read this');
      expect(stored).not.toContain('same here');
    }
  }, 90_000);

  it('replies, reactions, edits, deletes, markdown and /me, as the other side shows them', async () => {
    // The message itself, not the reply that quotes it.
    const ananMessage = pageB.locator('.event[data-event-id]:not(:has(.reply-quote))', { hasText: 'Hello Ben, only we can read this' });
    // Ben answers Ana's message, and reacts to it.
    await ananMessage.getByRole('button', { name: 'Reply', exact: true }).click();
    await pageB.locator('.composer-context', { hasText: 'Replying to ana' }).waitFor();
    await sendThroughUi(pageB, 'A reply to you');
    const reply = pageA.locator('.event[data-event-id]', { hasText: 'A reply to you' });
    await reply.locator('.reply-quote', { hasText: 'In reply to ana' }).waitFor({ timeout: 30_000 });
    expect(await reply.locator('.reply-quote .quoted').textContent()).toBe('Hello Ben, only we can read this');
    await ananMessage.locator('.react-picker summary').click();
    await ananMessage.getByRole('button', { name: 'React \u{1F44D}' }).click();
    const mine = pageA.locator('.event[data-event-id]:not(:has(.reply-quote))', { hasText: 'Hello Ben, only we can read this' });
    await mine.locator('.reaction', { hasText: '\u{1F44D} 1' }).waitFor({ timeout: 30_000 });
    // Ana adds hers to the same: two.
    await mine.locator('.reaction', { hasText: '\u{1F44D} 1' }).click();
    await ananMessage.locator('.reaction', { hasText: '\u{1F44D} 2' }).waitFor({ timeout: 30_000 });

    // Markdown goes as formatted_body; Ben's page shows it as markup, sanitized.
    await pageA.getByLabel('Message').fill('**bold** and _italic_ and `code` and [a link](https://example.org/) <img src=x onerror=alert(1)>');
    await pageA.getByRole('button', { name: 'Send' }).click();
    const formatted = pageB.locator('.event[data-event-id] .formatted', { hasText: 'bold' });
    await formatted.waitFor({ timeout: 30_000 });
    expect(await formatted.locator('strong').textContent()).toBe('bold');
    expect(await formatted.locator('em').textContent()).toBe('italic');
    expect(await formatted.locator('code').textContent()).toBe('code');
    expect(await formatted.locator('a').getAttribute('href')).toBe('https://example.org/');
    expect(await formatted.locator('img').count()).toBe(0);
    // /me is an action.
    await pageA.getByLabel('Message').fill('/me waves');
    await pageA.getByRole('button', { name: 'Send' }).click();
    await pageB.locator('.event .body.emote', { hasText: '* ana waves' }).waitFor({ timeout: 30_000 });

    // Ana edits a message of hers, then deletes another.
    await sendThroughUi(pageA, 'A typo hree');
    await pageB.locator('.event .body', { hasText: 'A typo hree' }).waitFor({ timeout: 30_000 });
    await pageA.locator('.event[data-event-id]', { hasText: 'A typo hree' }).getByRole('button', { name: 'Edit' }).click();
    expect(await pageA.getByLabel('Message').inputValue()).toBe('A typo hree');
    await pageA.getByLabel('Message').fill('A typo here');
    await pageA.getByRole('button', { name: 'Send' }).click();
    const edited = pageB.locator('.event[data-event-id]', { hasText: 'A typo here' });
    await edited.locator('.edited').waitFor({ timeout: 30_000 });
    expect(await pageB.locator('.event .body', { hasText: 'A typo hree' }).count()).toBe(0);
    await sendThroughUi(pageA, 'Never mind this one');
    await pageB.locator('.event .body', { hasText: 'Never mind this one' }).waitFor({ timeout: 30_000 });
    await pageA.locator('.event[data-event-id]', { hasText: 'Never mind this one' }).getByRole('button', { name: 'Delete' }).click();
    await pageB.locator('.event .body', { hasText: 'Never mind this one' }).waitFor({ state: 'detached', timeout: 30_000 });
    await pageB.locator('.event.redacted', { hasText: 'Message deleted' }).waitFor();
  }, 120_000);

  it('with another room open, Ben sees an unread badge on the DM and in the tab title; opening it clears them', async () => {
    await pageB.getByLabel('New room name').fill('Elsewhere');
    await pageB.getByRole('button', { name: 'Create', exact: true }).click();
    await pageB.locator('.room-title', { hasText: 'Elsewhere' }).waitFor();
    await sendThroughUi(pageA, 'Are you there?');
    const dm = pageB.getByRole('list', { name: 'Direct chats' }).locator('.room-item');
    await dm.locator('.unread-badge', { hasText: '1' }).waitFor({ timeout: 30_000 });
    await expect.poll(() => pageB.title()).toMatch(/^\(1!?\) Hearth$/);
    await dm.click();
    await messageBody(pageB, 'Are you there?').waitFor();
    await dm.locator('.unread-badge').waitFor({ state: 'detached' });
    await expect.poll(() => pageB.title(), { timeout: 30_000 }).toBe('Hearth');
  }, 90_000);

  it('Ben sees Ana\u2019s full ID on her card and her device verified by her, and leaves the other room', async () => {
    await pageB.locator('.member-details').evaluate((details: HTMLDetailsElement) => (details.open = true));
    const anaItem = pageB.locator('.member-list li', { hasText: 'ana' });
    await anaItem.locator('.member-devices summary', { hasText: 'Profile' }).click();
    // The full Matrix ID is on the card, not only in a tooltip.
    expect(await anaItem.locator('.member-id').textContent()).toBe(ana);
    const device = anaItem.locator('.device');
    await device.waitFor({ timeout: 30_000 });
    expect(await device.count()).toBe(1);
    expect(await device.getAttribute('class')).toContain('verified');
    expect(await device.textContent()).toContain((await storedSession(pageA)).deviceId);

    await pageB.locator('.room-item', { hasText: 'Elsewhere' }).click();
    await pageB.locator('.room-title', { hasText: 'Elsewhere' }).waitFor();
    await pageB.getByRole('button', { name: 'Leave room' }).click();
    await pageB.locator('.room-item', { hasText: 'Elsewhere' }).waitFor({ state: 'detached', timeout: 30_000 });
  }, 60_000);

  it('a new sign-in of Ana cannot read the past until verified with the recovery key; then it reads the backup and new messages', async () => {
    // Both room keys (Ana's session and Ben's) are in her key backup before this device goes.
    const first = await storedSession(pageA);
    await expect
      .poll(async () => (await pageFetch(pageA, 'GET', '/_matrix/client/v3/room_keys/version', { token: first.accessToken })).body.count ?? 0, { timeout: 60_000 })
      .toBeGreaterThanOrEqual(2);
    await signOutThroughUi(pageA);
    await pageA.getByLabel('Username').fill('ana');
    await pageA.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await pageA.getByRole('button', { name: 'Sign in', exact: true }).click();
    await pageA.getByLabel('New room name').waitFor();
    const second = await storedSession(pageA);
    expect(second.deviceId).not.toBe(first.deviceId);
    await pageA.getByRole('list', { name: 'Direct chats' }).locator('.room-item').click({ timeout: 30_000 });
    // What came before this device cannot be read yet, and the page says why.
    await pageA.locator('.event.undecryptable .body', { hasText: 'Unable to decrypt this message' }).first().waitFor({ timeout: 30_000 });
    expect(await pageA.locator('.event.undecryptable .body').first().textContent()).toMatch(/before this device was signed in/);

    await pageA.getByLabel('Recovery key').fill('EsT1 nota real key');
    await pageA.getByRole('region', { name: 'Encryption' }).getByRole('button', { name: 'Verify', exact: true }).click();
    await pageA.locator('.encryption-panel .error', { hasText: 'not a recovery key' }).waitFor();
    await pageA.getByLabel('Recovery key').fill(anaRecoveryKey);
    await pageA.getByRole('region', { name: 'Encryption' }).getByRole('button', { name: 'Verify', exact: true }).click();
    await pageA.getByRole('heading', { name: 'Verify this device' }).waitFor({ state: 'detached', timeout: 30_000 });
    // Cross-signed now: the homeserver has this device signed by Ana's self-signing key.
    const keys = await pageFetch(pageA, 'POST', '/_matrix/client/v3/keys/query', { token: second.accessToken, body: { device_keys: { [ana]: [second.deviceId] } } });
    const selfSigningKeyId = Object.keys(keys.body.self_signing_keys[ana].keys)[0]!;
    expect(keys.body.device_keys[ana][second.deviceId].signatures[ana][selfSigningKeyId]).toBeTruthy();
    // The backup's keys open the past.
    await messageBody(pageA, 'Hello Ana, same here').waitFor({ timeout: 30_000 });
    await messageBody(pageA, 'Hello Ben, only we can read this').waitFor({ timeout: 30_000 });
    // And what Ben sends now reaches this device.
    await sendThroughUi(pageB, 'Welcome back, Ana');
    await messageBody(pageA, 'Welcome back, Ana').waitFor({ timeout: 30_000 });
  }, 150_000);

  it('sent while the other page is closed: marked pending until it is back, then read there', async () => {
    await pageB.close();
    const name = ana.split(':')[1];
    await pageA.waitForFunction((other) => !(globalThis as any).hearthP2P.node.peers().some((p: { server_name: string }) => p.server_name === other), ben.split(':')[1], { timeout: 30_000 });
    await sendThroughUi(pageA, 'While your page was closed');
    const message = pageA.locator('.event[data-event-id]', { hasText: 'While your page was closed' });
    await message.locator('.pending-mark', { hasText: 'pending: waiting for 1 peer' }).waitFor({ timeout: 30_000 });
    expect(await message.locator('.pending-mark').getAttribute('title')).toContain(ben.split(':')[1]);
    pageB = await openHearth(pair.contexts[1]!, pair.site.server.url + '/');
    await pageB.waitForFunction((other) => (globalThis as any).hearthP2P?.reachable.has(other), name, { timeout: 60_000 });
    await message.locator('.pending-mark').waitFor({ state: 'detached', timeout: 60_000 });
    await pageB.getByRole('list', { name: 'Direct chats' }).locator('.room-item').click();
    await messageBody(pageB, 'While your page was closed').waitFor({ timeout: 30_000 });
  }, 180_000);
});
