import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startNodeHost, type NodeHost } from '../../src/node/node-host.ts';
import { shortUserId } from '../../src/ui/ids.ts';
import { api, register, type Account } from '../integration/harness.ts';
import { restartablePort } from '../support/ports.ts';
import { httpSyncer, longPollUntil } from '../support/sync-until.ts';
import { closeView, createRoomThroughUi, openHearth, openPeersView, pageServerName, registerThroughUi, startSite, useHere, type HearthSite } from './hearth-page.ts';

// Issue 12, the page: the peers panel (the Peers view, opened from the top bar), your Matrix ID and invite link, inviting and the
// P2P demo room, the offline indicator, and messages shown as pending until every remote
// server has them. Node peers run in this process on 127.0.0.1 (OS-chosen ports):
// A is the page's bootstrap peer; C, found through A, is the server that goes away.

let dirA: string;
let dirC: string;
let peerA: NodeHost;
let peerAClosed = false;
let peerC: NodeHost | undefined;
let dirM: string | undefined;
let mailboxPeer: NodeHost | undefined;
let carolRoomId: string | undefined;
let site: HearthSite;
let context: BrowserContext;
let page: Page;
let aliceId: string;
let bob: Account;
let carol: Account;

const wsPortOf = (host: NodeHost) => Number(/\/tcp\/(\d+)\/ws/.exec(host.p2p.multiaddrs()[0]!)![1]);
const startC = (port: number, alsoBootstrap: string[] = []) =>
  startNodeHost({ dataDir: dirC, port: 0, listen: [`/ip4/127.0.0.1/tcp/${port}/ws`], bootstrap: [...peerA.p2p.multiaddrs(), ...alsoBootstrap], rateLimits: false });

/** Long-polls a Node user's /sync until `done` holds. */
const nodeSyncUntil = (host: NodeHost, account: Account, done: (body: any) => boolean): Promise<any> =>
  longPollUntil(httpSyncer(host, account.accessToken), done, { timeoutMs: 30_000, who: account.userId });

beforeAll(async () => {
  dirA = await mkdtemp(join(tmpdir(), 'hearth-e2e-ui-a-'));
  dirC = await mkdtemp(join(tmpdir(), 'hearth-e2e-ui-c-'));
  peerA = await startNodeHost({ dataDir: dirA, port: 0, listen: ['/ip4/127.0.0.1/tcp/0/ws'], rateLimits: false });
  site = await startSite(inject('hearthDist'), { config: { bootstrap: peerA.p2p.multiaddrs(), iceServers: [], allowPrivateAddresses: true } });
  context = await site.browser.newContext();
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: site.server.url });
  page = await openHearth(context, site.server.url + '/');
  await registerThroughUi(page, 'alice');
  const serverName = await pageServerName(page);
  aliceId = `@alice:${serverName}`;
  bob = await register(peerA, 'bob');
});

afterAll(async () => {
  await context?.close();
  await site?.close();
  await peerC?.close();
  await mailboxPeer?.close();
  if (peerA && !peerAClosed) await peerA.close();
  for (const dir of [dirA, dirC, dirM]) if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the page’s P2P controls', () => {
  it('the peers panel lists the Node peer, its server name shortened (the full one on hover), reached directly', async () => {
    await page.waitForFunction(() => document.body.dataset.p2p === 'running', undefined, { timeout: 30_000 });
    const name = peerA.homeserver.serverName;
    const row = (await openPeersView(page)).locator(`.peer[data-server-name="${name}"]`);
    await row.waitFor({ timeout: 20_000 });
    expect(await row.getAttribute('data-via')).toBe('direct');
    expect(await row.locator('.via').textContent()).toBe('direct');
    expect(await row.locator('.peer-name').textContent()).toBe(`${name.slice(0, 8)}\u2026${name.slice(-4)}`);
    expect(await row.locator('.peer-name').getAttribute('title')).toBe(name);
    expect(await page.locator('.p2p-state').textContent()).toBe('Node running');
    // Copying a peer copies its full name.
    await row.getByRole('button', { name: `Copy server name ${name}` }).click();
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(name);
  });

  it('IDs are whole where they are copied and short elsewhere, the room header holds no room ID, and no placeholder is cut', async () => {
    // Your Matrix ID (a 64-character server name) reads whole in the field it is copied from: nothing scrolled out of sight.
    const field = (await openPeersView(page)).getByLabel('Your Matrix ID');
    await field.scrollIntoViewIfNeeded();
    const fits = await field.evaluate((el) => el.scrollWidth <= el.clientWidth + 1 && el.scrollHeight <= el.clientHeight + 1);
    expect(fits).toBe(true);
    // The top bar shows it shortened, whole on hover, and copies it whole.
    expect(await page.locator('.topbar .user-id').textContent()).toBe(shortUserId(aliceId));
    expect(await page.locator('.topbar .user-id').getAttribute('title')).toBe(aliceId);
    await page.getByRole('button', { name: 'Copy user ID' }).click();
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(aliceId);
    // A room's header says its name, not its ID; "Copy room ID" copies that.
    await createRoomThroughUi(page, 'Header check');
    const roomId = (await page.locator('.room-id').getAttribute('data-room-id'))!;
    expect(roomId).toMatch(/^!.+:.+/);
    expect(await page.locator('.room-header').innerText()).not.toContain(roomId);
    await page.getByRole('button', { name: 'Copy room ID' }).click();
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(roomId);
    // Each field's placeholder fits its box, measured in the field's own font: the sidebar's, and the Peers view's.
    const cutIn = (where: ReturnType<Page['locator']>) => where.evaluate((area) => {
      const context = document.createElement('canvas').getContext('2d')!;
      return [...area.querySelectorAll<HTMLInputElement>('input[placeholder]')]
        .filter((input) => input.getClientRects().length > 0)
        .filter((input) => {
          const style = getComputedStyle(input);
          context.font = style.font;
          const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
          return context.measureText(input.placeholder).width > room;
        })
        .map((input) => input.placeholder);
    });
    expect(await cutIn(page.locator('.sidebar'))).toEqual([]);
    expect(await cutIn(await openPeersView(page))).toEqual([]);
  });

  it('shows your Matrix ID with a copy button and an invite link', async () => {
    await openPeersView(page);
    expect(await page.getByLabel('Your Matrix ID').inputValue()).toBe(aliceId);
    await page.getByRole('button', { name: 'Copy ID' }).click();
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(aliceId);
    const link = page.locator('a.invite-link');
    expect(await link.getAttribute('href')).toBe(`${site.server.url}/#invite=${aliceId}`);
    expect(await page.getByLabel('Your invite link').inputValue()).toBe(`${site.server.url}/#invite=${aliceId}`);
    await page.getByRole('button', { name: 'Copy link' }).click();
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(`${site.server.url}/#invite=${aliceId}`);

    // Where the clipboard is refused, the ID is selected for the person to copy.
    await page.locator('.my-id').evaluate(() => {
      const refuse = () => Promise.reject(new DOMException('refused', 'NotAllowedError'));
      Object.defineProperty(navigator.clipboard, 'writeText', { value: refuse, configurable: true });
    });
    await page.getByRole('button', { name: 'Copy ID' }).click();
    await page.getByRole('button', { name: 'Selected: press Ctrl+C' }).waitFor();
    const selected = await page.evaluate(() => {
      const field = document.activeElement as HTMLInputElement;
      return field.classList.contains('my-id') ? field.value.slice(field.selectionStart ?? 0, field.selectionEnd ?? 0) : '';
    });
    expect(selected).toBe(aliceId);
    await page.locator('.my-id').evaluate(() => delete (navigator.clipboard as { writeText?: unknown }).writeText);
  });

  it('an invite link asks once, then starts a direct chat that invites its owner; it pre-fills the invite forms too', async () => {
    const link = `${site.server.url}/#invite=${bob.userId}`;
    // A new tab, signed in already (it shares this browser's session): one question, and the forms come filled.
    const other = await openHearth(context, link);
    // The chat runs in one tab at a time (issue 25): the new tab takes it, and the first takes it back when it closes.
    await useHere(other);
    const asked = other.getByRole('dialog', { name: 'Start a direct chat?' });
    await asked.waitFor({ timeout: 20_000 });
    expect(await asked.textContent()).toContain(bob.userId);
    // Behind the question, the Peers view, where the demo room's form is, filled and saying so.
    expect(await other.getByRole('region', { name: 'Peers', exact: true }).isVisible()).toBe(true);
    expect(await other.getByLabel('Invite to the demo room').inputValue()).toBe(bob.userId);
    expect(await other.locator('.invite-notice').textContent()).toContain(shortUserId(bob.userId));
    // Not now: nothing is created, and the link is not asked again.
    await asked.getByRole('button', { name: 'Not now' }).click();
    await asked.waitFor({ state: 'detached' });
    expect(new URL(other.url()).hash).toBe('');
    expect(await other.getByRole('list', { name: 'Direct chats' }).locator('.room-item').count()).toBe(0);
    await other.close();
    // The open tab, with a room open, follows a link to itself (only the fragment changes): asked again, the
    // room's invite form filled too; confirmed, a direct chat with Bob starts and Bob is invited to it.
    await createRoomThroughUi(page, 'Lobby');
    await page.goto(link);
    const again = page.getByRole('dialog', { name: 'Start a direct chat?' });
    await again.waitFor();
    expect(await page.locator('#invite-user-id').inputValue()).toBe(bob.userId);
    await again.getByRole('button', { name: 'Start chat' }).click();
    await page.getByRole('list', { name: 'Direct chats' }).locator('.room-item').waitFor({ timeout: 20_000 });
    // The direct chat shows in the Peers view's place.
    await page.locator('.room-encryption', { hasText: /^Encrypted$/ }).waitFor();
    expect(await page.getByRole('region', { name: 'Peers', exact: true }).isVisible()).toBe(false);
    const sync = await nodeSyncUntil(peerA, bob, (s) => Object.keys(s.rooms?.invite ?? {}).length > 0);
    const [dmId, invite] = Object.entries<any>(sync.rooms.invite)[0]!;
    const member = invite.invite_state.events.find((e: any) => e.type === 'm.room.member' && e.state_key === bob.userId);
    expect(member.content.is_direct).toBe(true);
    expect(member.sender).toBe(aliceId);
    // Bob declines, so the next test's invite is the demo room's.
    expect((await api(peerA, 'POST', `/_matrix/client/v3/rooms/${encodeURIComponent(dmId)}/leave`, { token: bob.accessToken, body: {} })).status).toBe(200);
  });

  it('starts a P2P demo room inviting the Node peer’s user, who joins', async () => {
    await (await openPeersView(page)).getByRole('button', { name: 'Start', exact: true }).click();
    // Once the invite is sent, the room shows in the Peers view's place; the view says who was invited.
    await page.locator('.room-title', { hasText: 'P2P demo' }).waitFor({ timeout: 20_000 });
    expect(await page.locator('.invite-notice').textContent()).toBe(`Invited ${shortUserId(bob.userId)} to \u201cP2P demo\u201d.`);
    const sync = await nodeSyncUntil(peerA, bob, (s) => Object.keys(s.rooms?.invite ?? {}).length > 0);
    const roomId = Object.keys(sync.rooms.invite)[0]!;
    const joined = await api(peerA, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}`, { token: bob.accessToken, body: {} });
    expect(joined.status, JSON.stringify(joined.body)).toBe(200);
    await page.locator('.timeline .notice', { hasText: 'bob joined' }).waitFor({ timeout: 20_000 });
  });

  it('the offline indicator shows while the browser is offline, and clears after', async () => {
    await page.waitForFunction(() => document.body.dataset.offline === undefined, undefined, { timeout: 20_000 });
    expect(await page.locator('.offline').isHidden()).toBe(true);
    await context.setOffline(true);
    await page.waitForFunction(() => !navigator.onLine && document.body.dataset.offline === 'browser');
    expect(await page.locator('.offline').textContent()).toBe('Offline');
    expect(await page.locator('.offline').isVisible()).toBe(true);
    await context.setOffline(false);
    // Back online; the peer's connection may have to come back too before the indicator clears.
    await page.waitForFunction(() => navigator.onLine && document.body.dataset.offline === undefined, undefined, { timeout: 30_000 });
    expect(await page.locator('.offline').isHidden()).toBe(true);
  });

  it('a message for a server that is down shows as pending, and the mark clears when that server is back', async () => {
    // C comes back later at the same port: one no outgoing connection takes meanwhile.
    peerC = await startC(await restartablePort());
    carol = await register(peerC, 'carol');
    await page.waitForFunction((name) => (globalThis as any).hearthP2P.reachable.has(name), peerC.homeserver.serverName, { timeout: 20_000 });
    // A second demo room, with carol of server C.
    const peers = await openPeersView(page);
    await peers.getByLabel('Invite to the demo room').fill(carol.userId);
    await peers.getByRole('button', { name: 'Start', exact: true }).click();
    // Invited, the new room shows in the view's place; the view (hidden now) says who was invited.
    await page.locator('.invite-notice', { hasText: `Invited ${shortUserId(carol.userId)}` }).waitFor({ state: 'attached', timeout: 20_000 });
    await page.locator('.room-title', { hasText: 'P2P demo' }).waitFor();
    const sync = await nodeSyncUntil(peerC, carol, (s) => Object.keys(s.rooms?.invite ?? {}).length > 0);
    const roomId = Object.keys(sync.rooms.invite)[0]!;
    carolRoomId = roomId;
    expect((await api(peerC, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}`, { token: carol.accessToken, body: {} })).status).toBe(200);
    await page.locator('.timeline .notice', { hasText: 'carol joined' }).waitFor({ timeout: 20_000 });

    // Neither Node peer is a mailbox (startNodeHost holds mail only when asked), so the message waits in the page's outbox.
    const port = wsPortOf(peerC);
    await peerC.close();
    peerC = undefined;
    await page.getByLabel('Message').fill('While carol is away');
    await page.getByRole('button', { name: 'Send' }).click();
    const message = page.locator('.event[data-event-id]', { hasText: 'While carol is away' });
    await message.locator('.pending-mark', { hasText: 'pending: waiting for 1 peer' }).waitFor({ timeout: 20_000 });
    expect(await message.getAttribute('data-waiting-for')).toBe('1');

    // Inviting someone else of C now says plainly that their server cannot be reached.
    await page.locator('#invite-user-id').fill(`@dave:${carol.userId.split(':')[1]}`);
    await page.getByRole('button', { name: 'Invite', exact: true }).click();
    await page.locator('.members .error', { hasText: 'Could not reach' }).waitFor({ timeout: 30_000 });

    // C comes back (same identity, same address): the message goes, and the mark with it.
    peerC = await startC(port);
    await message.locator('.pending-mark').waitFor({ state: 'detached', timeout: 45_000 });
    expect(await message.getAttribute('class')).not.toContain('undelivered');
    // The demo room is encrypted (issue 25): C holds the event, as m.room.encrypted (carol has no device here to read it).
    const eventId = await message.getAttribute('data-event-id');
    await nodeSyncUntil(peerC, carol, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.event_id === eventId && e.type === 'm.room.encrypted'));
  });

  it('with a mailbox among the peers, the mark clears once the mailbox holds the message, before its server is back', async () => {
    dirM = await mkdtemp(join(tmpdir(), 'hearth-e2e-ui-m-'));
    mailboxPeer = await startNodeHost({ dataDir: dirM, port: 0, listen: ['/ip4/127.0.0.1/tcp/0/ws'], bootstrap: peerA.p2p.multiaddrs(), rateLimits: false, mailbox: true });
    await (await openPeersView(page)).locator(`.peer[data-server-name="${mailboxPeer.homeserver.serverName}"]`).waitFor({ timeout: 20_000 });
    await closeView(page);
    const port = wsPortOf(peerC!);
    await peerC!.close();
    peerC = undefined;
    await page.getByLabel('Message').fill('Left with the mailbox');
    await page.getByRole('button', { name: 'Send' }).click();
    const message = page.locator('.event[data-event-id]', { hasText: 'Left with the mailbox' });
    await message.waitFor();
    // Deposited (its outbox row gone): no longer pending, though C is still down.
    await page.waitForFunction(() => {
      const event = [...document.querySelectorAll('.event[data-event-id]')].find((e) => e.textContent?.includes('Left with the mailbox'));
      return event !== undefined && !event.querySelector('.pending-mark');
    }, undefined, { timeout: 45_000 });
    expect(peerC).toBeUndefined();
    // C comes back and collects it (told of the mailbox at start, so it need not wait for discovery).
    peerC = await startC(port, mailboxPeer.p2p.multiaddrs());
    const eventId = await message.getAttribute('data-event-id');
    await nodeSyncUntil(peerC, carol, (s) => (s.rooms?.join?.[carolRoomId!]?.timeline?.events ?? []).some((e: any) => e.event_id === eventId && e.type === 'm.room.encrypted'));
  });

  it('stays usable 390 px wide: nothing runs off the side, and the panel, composer and invite form are reachable', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForFunction(() => window.innerWidth === 390);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    for (const label of ['Message', 'User ID to invite']) expect(await page.getByLabel(label).isVisible(), label).toBe(true);
    // At phone width the Peers view is a tab of its own (issue 25): the Peers tab opens it.
    await page.getByRole('button', { name: 'Peers', exact: true }).click();
    await page.locator('.my-id').scrollIntoViewIfNeeded();
    expect(await page.locator('.my-id').isVisible()).toBe(true);
    const box = (await page.getByRole('region', { name: 'Peers', exact: true }).boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(390);
  });

  it('with every peer gone, the panel says "no peers" and the indicator shows it', async () => {
    peerAClosed = true;
    await Promise.all([peerA.close(), peerC?.close(), mailboxPeer?.close()]);
    peerC = mailboxPeer = undefined;
    await (await openPeersView(page)).locator('.peer-list .no-peers', { hasText: 'No peers connected.' }).waitFor({ timeout: 20_000 });
    await page.waitForFunction(() => document.body.dataset.offline === 'no-peers');
    expect(await page.locator('.offline').textContent()).toBe('No peers');
    expect(await page.locator('.p2p-summary-state').textContent()).toContain('0 connected');
  });
});
