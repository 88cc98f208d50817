import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { closeView, createRoomThroughUi, openSettingsView, pageFetch, sendThroughUi, storedSession } from './hearth-page.ts';
import { meetInEncryptedDm, startPagePair, type PagePair } from './page-pair.ts';

// Issue 38, notifications: Ben's page shows a browser notification for Ana's messages while his tab is
// hidden, as his push rules say (a muted room stays quiet, a keyword still speaks), with her name and
// the text, or only "New message" once he chooses privacy. Permission is asked after the first message
// he receives, not at load; clicking a notification opens its room.
//
// Ben's context has the notification permission, and an init script that records each Notification
// made (the real one is still made) and each permission request, reports "default" until the page asks
// (a first visit), and lets the test say the tab is hidden (document.visibilityState and its event).

let pair: PagePair;
let pageA: Page;
let pageB: Page;
let roomId: string;

interface Shown {
  title: string;
  body: string | undefined;
  tag: string | undefined;
}

function recordNotifications(): void {
  const real = window.Notification;
  const shown: Array<{ title: string; body?: string; tag?: string; instance: Notification }> = [];
  let asked = false;
  let hidden = false;
  class Recorded extends real {
    constructor(title: string, options?: NotificationOptions) {
      super(title, options);
      shown.push({ title, body: options?.body, tag: options?.tag, instance: this });
    }
    static override get permission(): NotificationPermission {
      return asked ? real.permission : 'default';
    }
    static override requestPermission(): Promise<NotificationPermission> {
      (globalThis as any).testPermissionAsks++;
      asked = true;
      return real.requestPermission();
    }
  }
  Object.assign(globalThis, {
    Notification: Recorded,
    testNotifications: shown,
    testPermissionAsks: 0,
    testSetHidden(value: boolean) {
      hidden = value;
      document.dispatchEvent(new Event('visibilitychange'));
    },
  });
  Object.defineProperty(Document.prototype, 'visibilityState', { configurable: true, get: () => (hidden ? 'hidden' : 'visible') });
  Object.defineProperty(Document.prototype, 'hidden', { configurable: true, get: () => hidden });
}

const shown = (page: Page): Promise<Shown[]> => page.evaluate(() => (globalThis as any).testNotifications.map(({ title, body, tag }: Shown) => ({ title, body, tag })));
const permissionAsks = (page: Page): Promise<number> => page.evaluate(() => (globalThis as any).testPermissionAsks);
const setHidden = (page: Page, hidden: boolean) => page.evaluate((value) => (globalThis as any).testSetHidden(value), hidden);

beforeAll(async () => {
  pair = await startPagePair(inject('hearthDist'), 'notify');
  ({ pageA, pageB } = pair);
  const contextB = pair.contexts[1]!;
  await contextB.addInitScript(recordNotifications);
  await contextB.grantPermissions(['notifications'], { origin: pair.site.server.url });
  await pageB.reload();
  roomId = await meetInEncryptedDm(pair);
}, 180_000);

afterAll(async () => {
  await pair?.close();
});

describe('browser notifications', () => {
  it('permission is asked after the first message received, not at load; nothing shows while the tab is visible', async () => {
    expect(await permissionAsks(pageB)).toBe(0);
    await sendThroughUi(pageA, 'First words');
    await pageB.locator('.event .body', { hasText: 'First words' }).waitFor({ timeout: 30_000 });
    await expect.poll(() => permissionAsks(pageB)).toBe(1);
    expect(await shown(pageB)).toEqual([]);
  });

  it('while the tab is hidden a message shows with its sender and text; clicking it opens the room', async () => {
    // Another room open, so the click has somewhere to take him from.
    await createRoomThroughUi(pageB, 'Elsewhere');
    await setHidden(pageB, true);
    await sendThroughUi(pageA, 'Are you there?');
    await expect.poll(() => shown(pageB), { timeout: 30_000 }).toEqual([{ title: 'ana', body: 'Are you there?', tag: roomId }]);
    expect(await permissionAsks(pageB)).toBe(1);
    await pageB.evaluate(() => (globalThis as any).testNotifications.at(-1).instance.dispatchEvent(new Event('click')));
    await pageB.locator(`.room-id[data-room-id="${roomId}"]`).waitFor();
    await pageB.locator('.event .body', { hasText: 'Are you there?' }).waitFor();
  });

  it('with privacy chosen, a notification says only "New message"', async () => {
    await setHidden(pageB, false);
    // In Settings, opened from the top bar.
    await (await openSettingsView(pageB)).getByLabel('Private notifications (no sender, no text)').check();
    await setHidden(pageB, true);
    await sendThroughUi(pageA, 'Secret plans');
    await expect.poll(async () => (await shown(pageB)).length, { timeout: 30_000 }).toBe(2);
    expect((await shown(pageB))[1]).toEqual({ title: 'Hearth', body: 'New message', tag: roomId });
    await pageB.getByLabel('Private notifications (no sender, no text)').uncheck();
    await closeView(pageB);
  });

  it('push rules decide: a muted room stays quiet, a keyword in it still notifies', async () => {
    const { accessToken } = await storedSession(pageB);
    const rule = (path: string, body: unknown) => pageFetch(pageB, 'PUT', `/_matrix/client/v3/pushrules/global/${path}`, { token: accessToken, body });
    expect((await rule(`room/${encodeURIComponent(roomId)}`, { actions: [] })).status).toBe(200);
    expect((await rule('content/pineapple', { pattern: 'pineapple', actions: ['notify'] })).status).toBe(200);
    await sendThroughUi(pageA, 'Nothing to see here');
    await sendThroughUi(pageA, 'pineapple pizza tonight?');
    await expect.poll(async () => (await shown(pageB)).length, { timeout: 30_000 }).toBe(3);
    expect((await shown(pageB))[2]).toEqual({ title: 'ana', body: 'pineapple pizza tonight?', tag: roomId });
    // The muted message arrived before it, and made none.
    expect(await pageB.locator('.event .body', { hasText: 'Nothing to see here' }).count()).toBe(1);
  });
});
