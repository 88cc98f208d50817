import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { api, register, type Account } from '../integration/harness.ts';
import { startNodePeer, type NodePeer } from '../support/node-peer.ts';
import { httpSyncer, longPollUntil, timelineHas, type SyncBody, type Syncer } from '../support/sync-until.ts';
import { openHearth, pageFetch, pageServerName, pageSyncer, startSite, type HearthSite } from './hearth-page.ts';

// Issue 12, first slice: the leader tab's page runs a libp2p node (the core's seed, WebSockets),
// bootstraps from /hearth-config.json, and the browser homeserver federates with a Node peer.
// The Node peer runs in this process, listening on WebSockets on 127.0.0.1 (an OS-chosen port).

let peer: NodePeer;
let site: HearthSite;
let context: BrowserContext;
let page: Page;
let browserServerName: string;
// Set by the invite test for the hand-over test.
let peerC: NodePeer | undefined;
let carolInvite: { carol: Account; roomId: string } | undefined;
let peerStopped = false;
const stopPeer = async () => {
  if (peerStopped) return;
  peerStopped = true;
  await peer.close();
};
let shared: { roomId: string; alice: { userId: string; token: string }; bob: Account; bobSince: string; aliceSince: string } | undefined;

beforeAll(async () => {
  peer = await startNodePeer();
  site = await startSite(inject('hearthDist'), { config: { bootstrap: peer.p2p.multiaddrs(), iceServers: [], allowPrivateAddresses: true } });
  context = await site.browser.newContext();
  page = await openHearth(context, site.server.url + '/');
  browserServerName = await pageServerName(page);
});

afterAll(async () => {
  await context?.close();
  await site?.close();
  if (peer) await stopPeer();
  await peerC?.close();
});

/** Long-polls /sync until `done` holds, for up to 30 s. */
const syncUntil = (sync: Syncer, done: (body: SyncBody) => boolean, since?: string): Promise<SyncBody> =>
  longPollUntil(sync, done, { since, timeoutMs: 30_000 });
const nodeSync = (account: Account): Syncer => httpSyncer(peer, account.accessToken);
const pageSync = (token: string, on: () => Page = () => page): Syncer => pageSyncer(on, token);

describe('the browser homeserver federates with a Node peer over WebSockets', () => {
  it('the leader tab runs a libp2p node with the server’s identity and connects to the bootstrap peer from /hearth-config.json', async () => {
    await page.waitForFunction(() => document.body.dataset.p2p === 'running', undefined, { timeout: 30_000 });
    const node = await page.evaluate(() => {
      const { node } = (globalThis as any).hearthP2P;
      return { serverName: node.serverName as string, peerId: node.peerId as string, multiaddrs: node.multiaddrs() as string[] };
    });
    expect(node.serverName).toBe(browserServerName);
    expect(node.peerId).toMatch(/^12D3KooW/);
    // It listens on nothing: the Node peer reaches it over the connection the page opened.
    expect(node.multiaddrs).toEqual([]);

    await expect.poll(() => peer.p2p.peers().map((p) => p.server_name), { timeout: 20_000 }).toContain(browserServerName);
    const seenFromNode = peer.p2p.peers().find((p) => p.server_name === browserServerName)!;
    expect(seenFromNode.peer_id).toBe(node.peerId);
    const seenFromPage = await page.evaluate(() => (globalThis as any).hearthP2P.node.peers());
    expect(seenFromPage).toEqual([{ peer_id: peer.p2p.peerId, server_name: peer.homeserver.serverName, multiaddrs: [expect.stringMatching(/^\/ip4\/127\.0\.0\.1\/tcp\/\d+\/ws/)], via: 'direct' }]);
  });

  it('a browser user invites a Node user, who joins; messages cross both ways', async () => {
    const registered = await pageFetch(page, 'POST', '/_matrix/client/v3/register', { body: { username: 'alice', password: 'alices password', auth: { type: 'm.login.dummy' } } });
    expect(registered.status, JSON.stringify(registered.body)).toBe(200);
    const alice = { userId: registered.body.user_id as string, token: registered.body.access_token as string };
    expect(alice.userId).toBe(`@alice:${browserServerName}`);
    const bob = await register(peer, 'bob');
    expect(bob.userId).toBe(`@bob:${peer.homeserver.serverName}`);

    // Browser → Node: the invite leaves the core through the page's node.
    const created = await pageFetch(page, 'POST', '/_matrix/client/v3/createRoom', { token: alice.token, body: { name: 'Across the wire' } });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const roomId = created.body.room_id as string;
    const room = `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}`;
    const invited = await pageFetch(page, 'POST', `${room}/invite`, { token: alice.token, body: { user_id: bob.userId } });
    expect(invited.status, JSON.stringify(invited.body)).toBe(200);
    const bobSync = nodeSync(bob);
    const afterInvite = await syncUntil(bobSync, (s) => !!s.rooms?.invite?.[roomId]);

    // Node → browser: make_join and send_join arrive at the page's node and are answered by the core.
    const joined = await api(peer, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}`, { token: bob.accessToken, body: {} });
    expect(joined.status, JSON.stringify(joined.body)).toBe(200);
    const aliceSync = pageSync(alice.token);
    const isMember = (s: SyncBody) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.type === 'm.room.member' && e.state_key === bob.userId && e.content?.membership === 'join');
    const aliceSawJoin = await syncUntil(aliceSync, isMember);

    const fromBrowser = await pageFetch(page, 'PUT', `${room}/send/m.room.message/b1`, { token: alice.token, body: { msgtype: 'm.text', body: 'Hello from the browser' } });
    expect(fromBrowser.status).toBe(200);

    const bobSaw = await syncUntil(bobSync, timelineHas(roomId, 'Hello from the browser'), afterInvite.next_batch);

    const fromNode = await api(peer, 'PUT', `${room}/send/m.room.message/n1`, { token: bob.accessToken, body: { msgtype: 'm.text', body: 'Hello from the Node peer' } });
    expect(fromNode.status).toBe(200);
    const aliceSaw = await syncUntil(aliceSync, timelineHas(roomId, 'Hello from the Node peer'), aliceSawJoin.next_batch);
    shared = { roomId, alice, bob, bobSince: bobSaw.next_batch, aliceSince: aliceSaw.next_batch };

    // Both ends hold the same history.
    const history = await pageFetch(page, 'GET', `${room}/messages?dir=b&limit=20`, { token: alice.token });
    const bodies = (history.body.chunk as any[]).filter((e) => e.type === 'm.room.message').map((e) => e.content.body);
    expect(bodies).toEqual(['Hello from the Node peer', 'Hello from the browser']);
  });

  it('a Node user invites a browser user, who joins through the page’s node', async () => {
    const { alice, bob } = shared!;
    const { body: created } = await api(peer, 'POST', '/_matrix/client/v3/createRoom', { token: bob.accessToken, body: { name: 'Hosted on the Node peer', invite: [alice.userId] } });
    const roomId = created.room_id as string;
    const aliceSync = pageSync(alice.token);
    const invited = await syncUntil(aliceSync, (s) => !!s.rooms?.invite?.[roomId], shared!.aliceSince);
    // Browser → Node: make_join and send_join leave the core through the page; the room's state comes back.
    const joined = await pageFetch(page, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}`, { token: alice.token, body: {} });
    expect(joined.status, JSON.stringify(joined.body)).toBe(200);
    const members = await pageFetch(page, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/joined_members`, { token: alice.token });
    expect(Object.keys(members.body.joined).sort()).toEqual([alice.userId, bob.userId].sort());
    const sent = await api(peer, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/n3`, { token: bob.accessToken, body: { msgtype: 'm.text', body: 'Welcome to my room' } });
    expect(sent.status).toBe(200);
    const saw = await syncUntil(aliceSync, timelineHas(roomId, 'Welcome to my room'), invited.next_batch);
    shared!.aliceSince = saw.next_batch;
  });

  it('when the leader tab closes, the next leader starts its own node, reconnects, and federation goes on', async () => {
    expect(shared, 'runs after the invite test').toBeDefined();
    const { roomId, alice, bob } = shared!;
    const room = `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}`;
    const second = await openHearth(context, site.server.url + '/');
    expect(await second.evaluate(() => (globalThis as any).hearthHost.state.role)).toBe('follower');
    await page.close();
    page = second;
    await second.waitForFunction(() => (globalThis as any).hearthHost.state.role === 'leader' && document.body.dataset.p2p === 'running', undefined, { timeout: 30_000 });
    expect(await second.evaluate(() => (globalThis as any).hearthP2P.node.serverName)).toBe(browserServerName);

    // Sent while the hand-over may still be under way: it waits in the Node peer's queue if need be.
    const during = await api(peer, 'PUT', `${room}/send/m.room.message/n2`, { token: bob.accessToken, body: { msgtype: 'm.text', body: 'Sent during the hand-over' } });
    expect(during.status).toBe(200);
    await expect.poll(() => second.evaluate(() => (globalThis as any).hearthP2P.node.peers().map((p: any) => p.server_name)), { timeout: 20_000 }).toEqual([peer.homeserver.serverName]);
    await syncUntil(pageSync(alice.token), timelineHas(roomId, 'Sent during the hand-over'), shared!.aliceSince);

    const fromNewLeader = await pageFetch(second, 'PUT', `${room}/send/m.room.message/b2`, { token: alice.token, body: { msgtype: 'm.text', body: 'From the next leader tab' } });
    expect(fromNewLeader.status).toBe(200);
    await syncUntil(nodeSync(bob), timelineHas(roomId, 'From the next leader tab'), shared!.bobSince);
  });

  it('reaches a Node peer it was never given, knowing only its server name: discovery through the bootstrap peer', async () => {
    const { alice } = shared!;
    const c = await startNodePeer({ bootstrap: peer.p2p.multiaddrs() });
    peerC = c;
    {
      const carol = await register(c, 'carol');
      // C's record floods from the bootstrap peer to the page's node (an invite before that is a 502: no route).
      await page.waitForFunction((name) => (globalThis as any).hearthP2P.reachable.has(name), c.homeserver.serverName, { timeout: 20_000 });
      const { body: created } = await pageFetch(page, 'POST', '/_matrix/client/v3/createRoom', { token: alice.token, body: { name: 'Found by name' } });
      const roomId = created.room_id as string;
      // The page's node has C's address only from C's record flooded on the discovery topic.
      const invited = await pageFetch(page, 'POST', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/invite`, { token: alice.token, body: { user_id: carol.userId } });
      expect(invited.status, JSON.stringify(invited.body)).toBe(200);
      const carolSync = httpSyncer(c, carol.accessToken);
      await syncUntil(carolSync, (s) => !!s.rooms?.invite?.[roomId]);
      const pagePeers = await page.evaluate(() => (globalThis as any).hearthP2P.node.peers().map((p: any) => p.server_name));
      expect(pagePeers.sort()).toEqual([peer.homeserver.serverName, c.homeserver.serverName].sort());
      carolInvite = { carol, roomId };
    }
  });

  it('the next leader redials the peers this origin knew, from its peer store in IndexedDB, with the bootstrap peer down', async () => {
    const c = peerC!;
    const { carol, roomId } = carolInvite!;
    await stopPeer();
    const next = await openHearth(context, site.server.url + '/');
    await page.close();
    page = next;
    await next.waitForFunction(() => (globalThis as any).hearthHost.state.role === 'leader' && document.body.dataset.p2p === 'running', undefined, { timeout: 30_000 });
    // C was found by discovery only, and the bootstrap peer that told of it is gone: the stored record is all there is.
    await expect.poll(() => next.evaluate(() => (globalThis as any).hearthP2P.node.peers().map((p: any) => p.server_name)), { timeout: 20_000 }).toEqual([c.homeserver.serverName]);
    // And federation goes on over that link: carol joins alice's room (make_join and send_join to the browser).
    const joined = await api(c, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}`, { token: carol.accessToken, body: {} });
    expect(joined.status, JSON.stringify(joined.body)).toBe(200);
  });
});
