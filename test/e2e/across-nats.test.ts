import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PROJECT_ROOT } from '../../scripts/build.ts';
import { buildNodeHost } from '../../scripts/build-node.ts';
import { startCoturn, type Coturn } from '../support/coturn.ts';
import { spawnHearth, type HearthProcess } from '../support/hearth-process.ts';
import { assertNetworkNamespaces, createLab, type Lab, type Namespace } from '../support/netns.ts';
import { startNginx, type Nginx } from '../support/nginx.ts';
import { createTestCa, type TestCa } from '../support/test-ca.ts';
import { closeView, collectP2PLog, openHearth, openPeersView, pageServerName, peersOf, registerThroughUi, sendThroughUi } from './hearth-page.ts';
import { launchTrustingChromium, type TrustingChromium } from './trusting-chromium.ts';

// Issue 40, as people meet on the internet: a public network namespace serves the built page over HTTPS
// (nginx, under hearth.test, with a certificate from the test's own CA, which each Chromium trusts through
// an NSS database) and runs the public Node peer (relay and mailbox, secure WebSockets under
// peer.hearth.test) and coturn as STUN. Two homes, each a namespace behind a NAT namespace of its own
// (iptables masquerade: port-preserving, replies only from where a packet went, a port-restricted NAT,
// with a router's firewall),
// each run Chromium. Through the pages' own UI: both load from the public origin and create accounts;
// Ben invites Ana and they chat; the pages link directly, hole-punched with STUN's help (the Peers panel
// says direct), and go on chatting with the public peer stopped; Ben closes his page, Ana sends, and Ben's
// reopened page gets the mail. Nothing here reaches beyond the namespaces. Needs root (a clear failure
// otherwise, never a skip).

const PUBLIC_IP = '10.250.0.1';
const SITE = 'https://hearth.test/hearth';
/** The same build on another origin, whose config names only a peer reached over WebRTC-Direct. */
const DIRECT_SITE = 'https://direct.hearth.test/hearth';
let directPeer: HearthProcess | undefined;
let lab: Lab;
let ca: TestCa;
let build: string;
let pub: Namespace;
let peer: HearthProcess | undefined;
let peerData: string;
let certFiles: { cert: string; key: string };
let coturn: Coturn;
let nginx: Nginx;
const browsers: TrustingChromium[] = [];
let ana: Page;
let ben: Page;
let anaId: string;
let benId: string;
const roomTitle = 'P2P demo';
let tlsDir: string;
const figures: string[] = [];
const dirs: string[] = [];

const nats: { nat: Namespace; inside: string }[] = [];

/** A home behind a NAT: home ↔ nat ↔ the public namespace, which routes between the NATs' public sides. */
function home(n: number): Namespace {
  const nat = lab.namespace(`nat${n}`);
  const homeNs = lab.namespace(`home${n}`);
  const [, natOutside] = lab.link(pub, `10.250.${n}.1/30`, nat, `10.250.${n}.2/30`);
  const [natInside] = lab.link(nat, `10.251.${n}.1/24`, homeNs, `10.251.${n}.2/24`);
  nat.run('sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
  nat.run('ip', ['route', 'add', 'default', 'via', `10.250.${n}.1`]);
  nat.run('iptables', ['-t', 'nat', '-A', 'POSTROUTING', '!', '-o', natInside, '-j', 'MASQUERADE']);
  // A home router's firewall: nothing unasked-for comes in. Without it, a hole-punching packet that comes
  // first is taken in (and refused) by the NAT itself, its conntrack entry holds the port, and the home's
  // own packet to that peer then leaves from another port: hole punching fails, as behind no real router.
  for (const chain of ['INPUT', 'FORWARD']) nat.run('iptables', ['-A', chain, '-i', natOutside, '-m', 'conntrack', '!', '--ctstate', 'ESTABLISHED,RELATED', '-j', 'DROP']);
  homeNs.run('ip', ['route', 'add', 'default', 'via', `10.251.${n}.1`]);
  nats.push({ nat, inside: natInside });
  return homeNs;
}

const startPeer = () =>
  spawnHearth({
    entry: join(build, 'node', 'serve.js'),
    dataDir: peerData,
    netns: pub,
    listen: [`/ip4/${PUBLIC_IP}/tcp/4443/wss`],
    mailbox: true,
    args: ['--host', '127.0.0.1', '--relay', '--tls-cert', certFiles.cert, '--tls-key', certFiles.key, '--announce', '/dns4/peer.hearth.test/tcp/4443/wss'],
  });

beforeAll(async () => {
  assertNetworkNamespaces('The across-NATs browser test');
  await mkdir(join(PROJECT_ROOT, 'build'), { recursive: true });
  build = await mkdtemp(join(PROJECT_ROOT, 'build', 'test-nats-'));
  await buildNodeHost(build, { typeErrors: 'warn' });
  lab = createLab();
  pub = lab.namespace('pub');
  pub.run('ip', ['addr', 'add', `${PUBLIC_IP}/32`, 'dev', 'lo']);
  pub.run('sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
  const homes = [home(1), home(2)];

  ca = createTestCa();
  const leaf = ca.issue(['hearth.test', 'peer.hearth.test', 'direct.hearth.test']);
  peerData = await mkdtemp(join(tmpdir(), 'hearth-nats-peer-'));
  tlsDir = await mkdtemp(join(tmpdir(), 'hearth-nats-tls-'));
  certFiles = { cert: join(tlsDir, 'cert.pem'), key: join(tlsDir, 'key.pem') };
  await writeFile(certFiles.cert, leaf.cert);
  await writeFile(certFiles.key, leaf.key, { mode: 0o600 });
  coturn = await startCoturn(pub, PUBLIC_IP);
  peer = await startPeer();
  // A second public peer with no domain and no certificate: WebRTC-Direct only, by IP and certificate hash.
  const directData = await mkdtemp(join(tmpdir(), 'hearth-nats-direct-'));
  dirs.push(directData);
  directPeer = await spawnHearth({ entry: join(build, 'node', 'serve.js'), dataDir: directData, netns: pub, listen: [`/ip4/${PUBLIC_IP}/udp/4001/webrtc-direct`], mailbox: true, args: ['--host', '127.0.0.1', '--relay'] });
  nginx = await startNginx([
    { serverName: 'hearth.test', port: 443, static: { root: inject('hearthDist'), prefix: '/hearth', config: { bootstrap: peer.multiaddrs, iceServers: [coturn.stun] } } },
    // The test's "public" addresses are private ones (10.250.0.0/16, inside the namespaces only), which the page's
    // gater refuses unless told: on the internet this peer's address would be public and need no such switch.
    { serverName: 'direct.hearth.test', port: 443, static: { root: inject('hearthDist'), prefix: '/hearth', config: { bootstrap: directPeer.multiaddrs, iceServers: [coturn.stun], allowPrivateAddresses: true } } },
  ], leaf, { netns: pub.name });
  const hosts = { 'hearth.test': PUBLIC_IP, 'peer.hearth.test': PUBLIC_IP, 'direct.hearth.test': PUBLIC_IP };
  for (const ns of homes) browsers.push(await launchTrustingChromium({ caFile: ca.certFile, hosts, netns: ns.name }));
}, 300_000);

afterAll(async () => {
  if (figures.length > 0) console.log(`across NATs:\n  ${figures.join('\n  ')}`);
  for (const browser of browsers) await browser.close().catch(() => {});
  await nginx?.close();
  await peer?.stop();
  await directPeer?.stop();
  await coturn?.close();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  lab?.close();
  ca?.dispose();
  if (peerData) await rm(peerData, { recursive: true, force: true });
  if (tlsDir) await rm(tlsDir, { recursive: true, force: true });
  if (build) await rm(build, { recursive: true, force: true });
});

const linkTo = async (page: Page, serverName: string) => (await peersOf(page)).find((p) => p.server_name === serverName);

describe('two people behind two NATs, one public origin', () => {
  it('both pages load from the public origin over HTTPS, take the service worker and create accounts; Ben invites Ana and they chat', async () => {
    const opened: Page[] = [];
    for (const [i, name] of (['ana', 'ben'] as const).entries()) {
      const context = await browsers[i]!.browser.newContext();
      const started = performance.now();
      const page = await openHearth(context, `${SITE}/`);
      expect(await page.evaluate(async () => (await navigator.serviceWorker.ready).scope)).toBe(`${SITE}/`);
      await registerThroughUi(page, name);
      figures.push(`${name}: first visit to the public URL → account ready ${(performance.now() - started).toFixed(0)} ms`);
      // The public peer, over secure WebSockets by name, through the NAT.
      await page.waitForFunction((id) => (globalThis as any).hearthP2P?.node.peers().some((p: { peer_id: string }) => p.peer_id === id), peer!.peerId, { timeout: 30_000 });
      opened.push(page);
    }
    [ana, ben] = opened as [Page, Page];
    anaId = `@ana:${await pageServerName(ana)}`;
    benId = `@ben:${await pageServerName(ben)}`;

    const inviting = performance.now();
    await openPeersView(ben);
    await ben.locator('#demo-invitee').fill(anaId);
    await ben.getByRole('button', { name: 'Start', exact: true }).click();
    await ben.locator('.room-title', { hasText: roomTitle }).waitFor();
    const invite = ana.locator('.invite');
    await invite.waitFor({ timeout: 60_000 });
    await invite.getByRole('button', { name: 'Accept' }).click();
    await ben.locator('.timeline .notice', { hasText: 'ana joined' }).waitFor({ timeout: 60_000 });
    figures.push(`invite sent → accepted and seen by the inviter ${(performance.now() - inviting).toFixed(0)} ms`);
    await ana.locator('.room-title', { hasText: roomTitle }).waitFor();
    await sendThroughUi(ana, 'Hello Ben, from behind my NAT');
    await ben.locator('.event .body', { hasText: 'Hello Ben, from behind my NAT' }).waitFor({ timeout: 30_000 });
    await sendThroughUi(ben, 'Hello Ana, from behind mine');
    await ana.locator('.event .body', { hasText: 'Hello Ana, from behind mine' }).waitFor({ timeout: 30_000 });
  }, 240_000);

  it('with STUN, the pages link directly through their NATs: the Peers panel says direct, and they chat with the public peer stopped', async () => {
    const anaName = anaId.split(':')[1]!;
    const benName = benId.split(':')[1]!;
    const started = performance.now();
    for (const [page, other] of [[ana, benName], [ben, anaName]] as const) {
      await openPeersView(page);
      await page.locator(`.peer[data-server-name="${other}"][data-via="direct"]`).waitFor({ timeout: 90_000 });
      expect((await linkTo(page, other))?.multiaddrs.some((address) => address.includes('/webrtc'))).toBe(true);
    }
    figures.push(`both pages up → the direct (hole-punched) link, seen in both Peers panels: ${(performance.now() - started).toFixed(0)} ms after the chat`);
    expect(await ana.locator(`.peer[data-server-name="${benName}"] .how`).textContent()).toContain('WebRTC');

    await peer!.stop();
    peer = undefined;
    for (const [page, other] of [[ana, benName], [ben, anaName]] as const) {
      await expect.poll(async () => (await peersOf(page)).map((p) => p.server_name), { timeout: 30_000 }).toEqual([other]);
      await closeView(page);
    }
    await sendThroughUi(ana, 'No public peer now, Ben');
    await ben.locator('.event .body', { hasText: 'No public peer now, Ben' }).waitFor({ timeout: 30_000 });
    await sendThroughUi(ben, 'Still here, Ana');
    await ana.locator('.event .body', { hasText: 'Still here, Ana' }).waitFor({ timeout: 30_000 });
  }, 180_000);

  it('Ben closes his page; Ana sends; Ben opens the public URL again and gets the mail', async () => {
    peer = await startPeer();
    const benName = benId.split(':')[1]!;
    for (const page of [ana, ben]) await page.waitForFunction((id) => (globalThis as any).hearthP2P?.node.peers().some((p: { peer_id: string }) => p.peer_id === id), peer.peerId, { timeout: 60_000 });
    const context = ben.context();
    await ben.close();
    await expect.poll(async () => (await peersOf(ana)).map((p) => p.server_name), { timeout: 60_000 }).not.toContain(benName);
    const sent = ['one', 'two', 'three'].map((n) => `While you were away: ${n}`);
    for (const text of sent) await sendThroughUi(ana, text);
    const reopened = performance.now();
    ben = await openHearth(context, `${SITE}/`);
    await ben.locator('.room-item', { hasText: roomTitle }).first().click();
    for (const text of sent) await ben.locator('.event .body', { hasText: text }).waitFor({ timeout: 60_000 });
    figures.push(`Ben's page reopened → the mail shown ${(performance.now() - reopened).toFixed(0)} ms`);
  }, 180_000);

  it('with a symmetric NAT on one side, no hole is punched: the pages of two newcomers go through the public peer, the Peers panel says relayed, and messages flow', async () => {
    // Ben's NAT now gives every new destination a port of its own (random source ports): what STUN saw is no use to Ana.
    const { nat, inside } = nats[1]!;
    nat.run('iptables', ['-t', 'nat', '-F', 'POSTROUTING']);
    nat.run('iptables', ['-t', 'nat', '-A', 'POSTROUTING', '!', '-o', inside, '-j', 'MASQUERADE', '--random-fully']);
    const pages: Page[] = [];
    const webrtcFailed: Promise<void>[] = [];
    const p2pLog: string[] = [];
    for (const [i, name] of (['cleo', 'dan'] as const).entries()) {
      const context = await browsers[i]!.browser.newContext();
      // The lower peer ID dials the WebRTC link; whichever it is says so when the dial fails. Heard from before the
      // page opens: the dial can fail while the page is still starting (a listener added after missed it, and the
      // test waited for ever).
      webrtcFailed.push(new Promise((resolve) => collectP2PLog(context, name, p2pLog, (line) => line.includes('could not open a WebRTC link') && resolve())));
      const page = await openHearth(context, `${SITE}/`);
      await registerThroughUi(page, name);
      pages.push(page);
    }
    const [cleo, dan] = pages as [Page, Page];
    const cleoId = `@cleo:${await pageServerName(cleo)}`;
    await openPeersView(dan);
    await dan.locator('#demo-invitee').fill(cleoId);
    await dan.getByRole('button', { name: 'Start', exact: true }).click();
    await cleo.locator('.invite').waitFor({ timeout: 60_000 });
    await cleo.locator('.invite').getByRole('button', { name: 'Accept' }).click();
    await dan.locator('.timeline .notice', { hasText: 'cleo joined' }).waitFor({ timeout: 60_000 });
    // Bounded, so that a page that never tries WebRTC fails here with what the nodes said, not at the test's timeout.
    // 60 s was passed twice this session with the suite's other files beside it (never alone): given 120 s, within the
    // case's 240 s, a slow dial still fails here with the log, and a stuck one too.
    let waited: ReturnType<typeof setTimeout> | undefined;
    const untried = new Promise<never>((_, reject) => {
      waited = setTimeout(() => reject(new Error(`neither page said a WebRTC dial failed:\n${p2pLog.join('\n')}`)), 120_000);
    });
    await Promise.race([...webrtcFailed, untried]).finally(() => clearTimeout(waited));
    const danName = await pageServerName(dan);
    const row = cleo.locator(`.peer[data-server-name="${danName}"]`);
    expect(await row.getAttribute('data-via')).toBe('relayed');
    expect(await row.locator('.how').textContent()).toBe('relay');
    await cleo.locator('.room-title', { hasText: roomTitle }).waitFor();
    await sendThroughUi(cleo, 'Through the public peer, Dan');
    await dan.locator('.event .body', { hasText: 'Through the public peer, Dan' }).waitFor({ timeout: 30_000 });
    await sendThroughUi(dan, 'Got it, Cleo');
    await cleo.locator('.event .body', { hasText: 'Got it, Cleo' }).waitFor({ timeout: 30_000 });
  }, 240_000);

  it('with the public peer reached over WebRTC-Direct alone (no domain, no certificate for it), two newcomers meet through it and chat', async () => {
    const pages: Page[] = [];
    for (const [i, name] of (['eve', 'finn'] as const).entries()) {
      const context = await browsers[i]!.browser.newContext();
      const page = await openHearth(context, `${DIRECT_SITE}/`);
      await registerThroughUi(page, name);
      await openPeersView(page);
      const row = page.locator(`.peer[data-server-name="${directPeer!.serverName}"]`);
      await row.waitFor({ timeout: 30_000 });
      expect(await row.locator('.how').textContent()).toBe('WebRTC-Direct');
      pages.push(page);
    }
    const [eve, finn] = pages as [Page, Page];
    const eveId = `@eve:${await pageServerName(eve)}`;
    await finn.locator('#demo-invitee').fill(eveId);
    await finn.getByRole('button', { name: 'Start', exact: true }).click();
    await eve.locator('.invite').waitFor({ timeout: 60_000 });
    await eve.locator('.invite').getByRole('button', { name: 'Accept' }).click();
    await finn.locator('.timeline .notice', { hasText: 'eve joined' }).waitFor({ timeout: 60_000 });
    await eve.locator('.room-title', { hasText: roomTitle }).waitFor();
    await sendThroughUi(eve, 'Met over WebRTC-Direct, Finn');
    await finn.locator('.event .body', { hasText: 'Met over WebRTC-Direct, Finn' }).waitFor({ timeout: 30_000 });
    await sendThroughUi(finn, 'Hello Eve');
    await eve.locator('.event .body', { hasText: 'Hello Eve' }).waitFor({ timeout: 30_000 });
  }, 180_000);
});
