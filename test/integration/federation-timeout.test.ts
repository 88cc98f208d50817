import { afterEach, expect, it } from 'vitest';
import { startNodePeer, type NodePeer } from '../support/node-peer.ts';
import { startP2PHomeserver, type P2PHomeserver } from '../support/p2p-homeserver.ts';
import { httpSyncer, longPollUntil, timelineHas } from '../support/sync-until.ts';
import { api, register } from './harness.ts';

// The Node host's federation deadline (`federationTimeoutMs`, HEARTH_FEDERATION_TIMEOUT_MS for
// `npm run serve`; 30 s unless given): a peer that holds the host's transaction is given up on
// after that long, and the transaction is sent again.

const enc = encodeURIComponent;
const closing: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const c of closing.splice(0).reverse()) await c.close();
});

it('a Node host given a federation deadline gives up on an exchange past it, with the deadline\'s own words, and retries', async () => {
  let watching = false;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let hostName = '';
  // Every /send the host makes to B once the room is joined. Those that come before the host has
  // given up are held (the host may also try again at once, on a stream that failed); the first
  // that comes after is the retry, and goes through.
  const sends: string[] = [];
  let gaveUpYet = false;
  let retried!: (path: string) => void;
  const retry = new Promise<string>((resolve) => (retried = resolve));
  const b: P2PHomeserver = await startP2PHomeserver({
    inbound: async (request, remote, next) => {
      const path = new URL(request.url).pathname;
      if (watching && remote === hostName && path.startsWith('/_matrix/federation/v1/send/')) {
        sends.push(path);
        if (gaveUpYet) retried(path);
        else await released;
      }
      return next(request);
    },
  });
  closing.push(b);
  let timedOut!: (line: string) => void;
  const gaveUp = new Promise<string>((resolve) => (timedOut = resolve));
  const host: NodePeer = await startNodePeer({
    bootstrap: b.p2p.multiaddrs(),
    listen: ['/ip4/127.0.0.1/tcp/0'],
    federationTimeoutMs: 300,
    log: (message, error) => {
      const line = `${message} ${error instanceof Error ? error.message : ''}`;
      if (/^federation: sending to \S+ failed; retrying/.test(message)) {
        gaveUpYet = true;
        timedOut(line);
      }
    },
  });
  closing.push(host);
  hostName = host.homeserver.serverName;
  const [bob, alice] = [await register(b, 'bob'), await register(host, 'alice')];
  const roomId = (await api(b, 'POST', '/_matrix/client/v3/createRoom', { token: bob.accessToken, body: { preset: 'public_chat' } })).body.room_id as string;
  const joined = await api(host, 'POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${b.homeserver.serverName}`, { token: alice.accessToken, body: {} });
  expect(joined.status, JSON.stringify(joined.body)).toBe(200);
  watching = true;
  const sent = await api(host, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/t1`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'held' } });
  expect(sent.status).toBe(200);
  // Given up on with the deadline's words (the queue logs why it will try again)…
  expect(await gaveUp).toMatch(/no answer within 300 ms/);
  // …and sent again: B sees the same transaction come after that, and it brings the message to bob
  // while every earlier attempt is still held.
  expect(await retry).toBe(sends[0]);
  await longPollUntil(httpSyncer(b, bob.accessToken), timelineHas(roomId, 'held'));
  release();
});
