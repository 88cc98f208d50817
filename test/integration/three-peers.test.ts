import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { spawnHearth, stopAllHearths, type HearthProcess } from '../support/hearth-process.ts';
import { restartablePort } from '../support/ports.ts';
import { api, register, type Account } from './harness.ts';
import { sdk, startClient, waitFor } from './sdk.ts';

// Three Node peers, each `npm run serve` in its own process with its own data folder,
// federating over real libp2p on 127.0.0.1, driven by matrix-js-sdk clients.

const directories: string[] = [];
const clients: sdk.MatrixClient[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) client.stopClient();
  await stopAllHearths();
});
afterAll(async () => {
  for (const dir of directories) await rm(dir, { recursive: true, force: true });
});

async function dataDir(name: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `hearth-${name}-`));
  directories.push(dir);
  return dir;
}

async function client(peer: HearthProcess, account: Account): Promise<sdk.MatrixClient> {
  const c = await startClient(peer.url, account);
  clients.push(c);
  return c;
}

const bodies = (c: sdk.MatrixClient, roomId: string) =>
  (c.getRoom(roomId)?.getLiveTimeline().getEvents() ?? []).filter((e) => e.getType() === 'm.room.message').map((e) => e.getContent()['body'] as string);

const said = (c: sdk.MatrixClient, roomId: string, body: string) => waitFor(c, () => bodies(c, roomId).includes(body), 20_000, `"${body}" in ${c.getUserId()}'s timeline`);

/** The whole history of a room as one server's client API pages it, oldest first. */
async function history(peer: HearthProcess, account: Account, roomId: string): Promise<string[]> {
  const seen: string[] = [];
  let from: string | undefined;
  for (let page = 0; page < 100; page++) {
    const { body } = await api(peer, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=20${from ? `&from=${from}` : ''}`, { token: account.accessToken });
    for (const e of body.chunk) if (e.type === 'm.room.message') seen.unshift(e.content.body);
    if (!body.end) break;
    from = body.end;
  }
  return seen;
}

describe('three Hearth peers over libp2p', () => {
  it('share a room: invite, join, messages, typing, receipts, profiles; a late joiner by alias; a peer away and back; a peer killed', async () => {
    const [dirA, dirB, dirC] = [await dataDir('a'), await dataDir('b'), await dataDir('c')];
    // A and B come back later at the same address: their ports are ones no outgoing connection takes meanwhile.
    const [listenA, listenB] = [[`/ip4/127.0.0.1/tcp/${await restartablePort()}`], [`/ip4/127.0.0.1/tcp/${await restartablePort()}`]];
    let a = await spawnHearth({ dataDir: dirA, listen: listenA });
    let b = await spawnHearth({ dataDir: dirB, listen: listenB, bootstrap: a.multiaddrs });

    // A user on A creates a room and invites a user on B, whose client sees the invite and joins.
    const alice = await register(a, 'alice');
    const bob = await register(b, 'bob');
    const aliceClient = await client(a, alice);
    const bobClient = await client(b, bob);
    const { room_id: roomId } = await aliceClient.createRoom({ room_alias_name: 'hearth', preset: sdk.Preset.PublicChat, name: 'Hearth' });
    await aliceClient.invite(roomId, bob.userId);
    await waitFor(bobClient, () => bobClient.getRoom(roomId)?.getMyMembership() === 'invite', 20_000, 'the invite on B');
    await bobClient.joinRoom(roomId);
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.getMember(bob.userId)?.membership === 'join', 20_000, "bob's join on A");
    // The room came with its state (not just the invite's stripped state): alice's power, its name.
    await waitFor(bobClient, () => bobClient.getRoom(roomId)?.getMyMembership() === 'join' && bobClient.getRoom(roomId)?.getMember(alice.userId)?.powerLevel === 100, 20_000, "alice's power level on B");
    expect(bobClient.getRoom(roomId)!.name).toBe('Hearth');

    // Messages, typing, receipts and profile changes cross both ways.
    await aliceClient.sendTextMessage(roomId, 'hello from A');
    await said(bobClient, roomId, 'hello from A');
    await bobClient.sendTextMessage(roomId, 'hello from B');
    await said(aliceClient, roomId, 'hello from B');
    await bobClient.sendTyping(roomId, true, 10_000);
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.getMember(bob.userId)?.typing, 20_000, "bob typing on A");
    const fromB = aliceClient.getRoom(roomId)!.getLiveTimeline().getEvents().find((e) => e.getContent()['body'] === 'hello from B')!;
    await aliceClient.sendReceipt(fromB, sdk.ReceiptType.Read);
    await waitFor(bobClient, () => bobClient.getRoom(roomId)?.getReadReceiptForUserId(alice.userId)?.eventId === fromB.getId(), 20_000, "alice's receipt on B");
    await bobClient.setDisplayName('Bob of B');
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.getMember(bob.userId)?.name === 'Bob of B', 20_000, "bob's new name on A");
    await aliceClient.setDisplayName('Alice of A');
    await waitFor(bobClient, () => bobClient.getRoom(roomId)?.getMember(alice.userId)?.name === 'Alice of A', 20_000, "alice's new name on B");

    // C, bootstrapped only to A, joins later by the alias on A and pages the whole history in order.
    const c = await spawnHearth({ dataDir: dirC, bootstrap: a.multiaddrs });
    const carol = await register(c, 'carol');
    const carolClient = await client(c, carol);
    await carolClient.joinRoom(`#hearth:${a.serverName}`);
    expect(await history(c, carol, roomId)).toEqual(['hello from A', 'hello from B']);
    await carolClient.sendTextMessage(roomId, 'hello from C');
    await said(bobClient, roomId, 'hello from C');
    await said(aliceClient, roomId, 'hello from C');

    // A stops; B and C go on talking; A comes back at the same address and catches up, in order.
    aliceClient.stopClient();
    await a.stop('SIGTERM');
    await bobClient.sendTextMessage(roomId, 'while A was away, from B');
    await said(carolClient, roomId, 'while A was away, from B');
    await carolClient.sendTextMessage(roomId, 'while A was away, from C');
    await said(bobClient, roomId, 'while A was away, from C');
    a = await spawnHearth({ dataDir: dirA, listen: listenA });
    const aliceAgain = await client(a, alice);
    await said(aliceAgain, roomId, 'while A was away, from C');
    const everything = ['hello from A', 'hello from B', 'hello from C', 'while A was away, from B', 'while A was away, from C'];
    expect(await history(a, alice, roomId)).toEqual(everything);

    // B is killed mid-conversation and restarted: what it acknowledged is kept, and its queue drains.
    const acknowledged: string[] = [];
    for (let i = 0; i < 10; i++) {
      await bobClient.sendTextMessage(roomId, `before the crash ${i}`);
      acknowledged.push(`before the crash ${i}`);
    }
    bobClient.stopClient();
    await b.stop('SIGKILL');
    b = await spawnHearth({ dataDir: dirB, listen: listenB });
    for (const body of acknowledged) await said(aliceAgain, roomId, body);
    await said(carolClient, roomId, acknowledged.at(-1)!);
    expect(await history(b, bob, roomId)).toEqual([...everything, ...acknowledged]);
    expect(await history(c, carol, roomId)).toEqual([...everything, ...acknowledged]);
  }, 180_000);
});
