import { LoggerLevel, Tracing } from '@matrix-org/matrix-sdk-crypto-wasm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PageSlidingSync } from '../../src/ui/client/sliding.ts';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';
import { decryptedBodies, sdk, silentLogger, until } from './sdk.ts';

// The page's sliding sync (src/ui/client/sliding.ts: its lists, the open room's subscription, the gap fix)
// on matrix-js-sdk 37 against Hearth, in Node: what the page's client sees, without the page.

let server: TestServer;
const clients: sdk.MatrixClient[] = [];
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  for (const c of clients) c.stopClient();
  await server.close();
});

const enc = encodeURIComponent;
let txn = 0;
const send = (account: Account, roomId: string, body: string) =>
  api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/p${++txn}`, { token: account.accessToken, body: { msgtype: 'm.text', body } });

/** Holds every sliding sync request the client makes until `release` (set by `hold`). */
interface Gate {
  held?: Promise<void>;
  release?: () => void;
}
const hold = (gate: Gate) => (gate.held = new Promise((resolve) => (gate.release = resolve)));

async function start(account: Account, crypto = false, gate: Gate = {}): Promise<{ client: sdk.MatrixClient; sliding: PageSlidingSync; opened: string[] }> {
  const fetchFn: typeof fetch = async (input, init) => {
    if (String(input).includes('simplified_msc3575')) await gate.held;
    return fetch(input, init);
  };
  const client = sdk.createClient({ baseUrl: server.url, userId: account.userId, accessToken: account.accessToken, deviceId: account.deviceId, logger: silentLogger, fetchFn });
  clients.push(client);
  if (crypto) {
    await client.initRustCrypto({ useIndexedDB: false });
    new Tracing(LoggerLevel.Error).turnOn();
  }
  const opened: string[] = [];
  const sliding = new PageSlidingSync(client, (roomId) => opened.push(roomId));
  await client.startClient({ lazyLoadMembers: true, pendingEventOrdering: sdk.PendingEventOrdering.Detached, threadSupport: true, slidingSync: sliding.slidingSync });
  return { client, sliding, opened };
}
const bodies = (client: sdk.MatrixClient, roomId: string) =>
  client.getRoom(roomId)?.getLiveTimeline().getEvents().filter((e) => e.getType() === 'm.room.message').map((e) => e.getContent()['body'] as string) ?? [];

describe('the page’s sliding sync', () => {
  it('keeps a room that is not open up to date, with its unread count, and in order when opened', async () => {
    const ana = await register(server, 'ana');
    const ben = await register(server, 'ben');
    const dm = (await api(server, 'POST', '/_matrix/client/v3/createRoom', { token: ana.accessToken, body: { is_direct: true, invite: [ben.userId], preset: 'trusted_private_chat' } })).body.room_id as string;
    const gate: Gate = {};
    const b = await start(ben, false, gate);
    await until(b.client, () => b.client.getRoom(dm)?.getMyMembership() === 'invite', 'the invite');
    await b.client.joinRoom(dm);
    await b.client.setAccountData(sdk.EventType.Direct, { [ana.userId]: [dm] });
    b.sliding.subscribe(dm);
    await send(ana, dm, 'one');
    await until(b.client, () => bodies(b.client, dm).includes('one'), 'one');
    const other = (await api(server, 'POST', '/_matrix/client/v3/createRoom', { token: ben.accessToken, body: { name: 'Elsewhere' } })).body.room_id as string;
    await until(b.client, () => !!b.client.getRoom(other), 'the other room');
    b.sliding.subscribe(other);
    await until(b.client, () => b.opened.includes(other), 'the other room subscribed');
    await send(ana, dm, 'two');
    await until(b.client, () => bodies(b.client, dm).includes('two'), 'two, the DM not open');
    // Ben never read it: both messages count (the homeserver's count).
    await until(b.client, () => b.client.getRoom(dm)!.getUnreadNotificationCount(sdk.NotificationCountType.Total) === 2, 'its unread count');
    // More than the list's one event in one answer while not open: a gap (Ben's requests held while they are sent),
    // then the open room's window, in order.
    await send(ana, dm, 'three');
    await until(b.client, () => bodies(b.client, dm).includes('three'), 'three');
    hold(gate);
    for (const body of ['four', 'five', 'six']) await send(ana, dm, body);
    gate.release!();
    await until(b.client, () => bodies(b.client, dm).includes('six'), 'six');
    expect(bodies(b.client, dm)).not.toContain('five');
    b.sliding.subscribe(dm);
    await until(b.client, () => b.opened.includes(dm), 'the DM subscribed');
    await until(b.client, () => bodies(b.client, dm).includes('five'), 'the gap filled');
    expect(bodies(b.client, dm)).toEqual(['one', 'two', 'three', 'four', 'five', 'six']);
  });

  it('reads an encrypted DM that is not open, counts it unread, and decrypts its history when opened', async () => {
    const cara = await register(server, 'cara');
    const dan = await register(server, 'dan');
    const c = await start(cara, true);
    const d = await start(dan, true);
    const { room_id: dm } = await c.client.createRoom({ preset: sdk.Preset.TrustedPrivateChat, is_direct: true, invite: [dan.userId], initial_state: [{ type: 'm.room.encryption', state_key: '', content: { algorithm: 'm.megolm.v1.aes-sha2' } }] });
    c.sliding.subscribe(dm);
    await until(d.client, () => d.client.getRoom(dm)?.getMyMembership() === 'invite', 'the invite');
    await d.client.joinRoom(dm);
    await d.client.setAccountData(sdk.EventType.Direct, { [cara.userId]: [dm] });
    d.sliding.subscribe(dm);
    await until(c.client, () => c.client.getRoom(dm)?.getMember(dan.userId)?.membership === 'join', 'dan joined');
    await c.client.sendTextMessage(dm, 'first');
    await until(d.client, () => decryptedBodies(d.client, dm).includes('first'), 'first, open');
    await d.client.sendReadReceipt(d.client.getRoom(dm)!.getLiveTimeline().getEvents().at(-1)!);
    const other = (await d.client.createRoom({ name: 'Elsewhere' })).room_id;
    await until(d.client, () => !!d.client.getRoom(other), 'the other room');
    d.sliding.subscribe(other);
    await until(d.client, () => d.opened.includes(other), 'the other room subscribed');
    for (const body of ['second', 'third', 'fourth']) await c.client.sendTextMessage(dm, body);
    await until(d.client, () => decryptedBodies(d.client, dm).includes('fourth'), 'fourth, not open');
    await until(d.client, () => d.client.getRoom(dm)!.getUnreadNotificationCount(sdk.NotificationCountType.Total) === 3, 'unread: three');
    // Counted once each (matrix-js-sdk 37's SlidingSyncSdk alone would say 4: sliding.ts keepOwnCount).
    await c.client.sendTextMessage(dm, 'fifth');
    await until(d.client, () => decryptedBodies(d.client, dm).includes('fifth'), 'fifth');
    expect(d.client.getRoom(dm)!.getUnreadNotificationCount(sdk.NotificationCountType.Total)).toBe(4);
    d.sliding.subscribe(dm);
    await until(d.client, () => d.opened.includes(dm), 'the DM subscribed');
    await until(d.client, () => decryptedBodies(d.client, dm).join() === 'first,second,third,fourth,fifth', 'all five in order');
  });
});
