import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedRoom, threeServers, until, type Account, type FederatedServer, type ThreeServers } from '../support/federated-homeservers.ts';

// Issue 12, offline-first: a message for a remote server waits in the durable queue, and
// GET /_matrix/client/unstable/org.hearth/pending tells its sender so until it is delivered.

const PENDING = '/_matrix/client/unstable/org.hearth/pending';
const enc = encodeURIComponent;

let net: ThreeServers;
let a: FederatedServer;
let b: FederatedServer;
let c: FederatedServer;
let alice: Account;
let bob: Account;
let carol: Account;
let roomId: string;

beforeAll(async () => {
  net = await threeServers();
  ({ a, b, c, alice, bob, carol } = net);
  roomId = await sharedRoom(a, alice, [[b, bob], [c, carol]]);
  // Nothing of the set-up still waits.
  await until(async () => (await a.homeserver.federation.component.queues.pending()) === 0);
});
afterAll(() => net.close());

const pending = async (account: Account, server = a) => {
  const { status, body } = await server.api('GET', PENDING, { token: account.accessToken, unchecked: true });
  expect(status, JSON.stringify(body)).toBe(200);
  return body.pending as Record<string, { room_id: string; destinations: string[] }>;
};

const send = async (text: string, txnId: string) => {
  const { status, body } = await a.api('PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/${txnId}`, { token: alice.accessToken, body: { msgtype: 'm.text', body: text } });
  expect(status, JSON.stringify(body)).toBe(200);
  return body.event_id as string;
};

describe('GET /_matrix/client/unstable/org.hearth/pending', () => {
  it('needs an access token', async () => {
    const { status, body } = await a.api('GET', PENDING, { unchecked: true });
    expect(status).toBe(401);
    expect(body.errcode).toBe('M_MISSING_TOKEN');
  });

  it('is empty once everything was delivered', async () => {
    expect(await pending(alice)).toEqual({});
  });

  it('shows a message to an unreachable server as pending for that server only, then not once it is delivered', async () => {
    net.network.down.add(b.serverName);
    const eventId = await send('while bob is away', 'p1');
    // Carol's server gets it at once; bob's waits.
    await until(async () => JSON.stringify((await pending(alice))[eventId]?.destinations) === JSON.stringify([b.serverName]));
    expect(await pending(alice)).toEqual({ [eventId]: { room_id: roomId, destinations: [b.serverName] } });
    // Only the sender's own events: bob's server's users see nothing of alice's.
    expect(await pending(bob, b)).toEqual({});

    net.network.down.delete(b.serverName);
    a.homeserver.federation.component.peerConnected(b.serverName);
    await until(async () => Object.keys(await pending(alice)).length === 0);
    // Its row went because bob's server took it.
    expect(await b.homeserver.services.rooms.getEvent(eventId)).toBeDefined();
  });

  it('names every server still owed an event', async () => {
    net.network.down.add(b.serverName);
    net.network.down.add(c.serverName);
    const first = await send('both away', 'p2');
    const second = await send('still away', 'p3');
    const now = await pending(alice);
    expect(Object.keys(now).sort()).toEqual([first, second].sort());
    expect(now[first]!.destinations.sort()).toEqual([b.serverName, c.serverName].sort());
    net.network.down.delete(b.serverName);
    net.network.down.delete(c.serverName);
    a.homeserver.federation.component.peerConnected(b.serverName);
    a.homeserver.federation.component.peerConnected(c.serverName);
    await until(async () => Object.keys(await pending(alice)).length === 0);
  });
});
