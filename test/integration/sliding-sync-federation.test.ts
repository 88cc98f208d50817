import { afterAll, beforeAll, expect, it } from 'vitest';
import { startP2PHomeserver, type P2PHomeserver } from '../support/p2p-homeserver.ts';
import { register, type Account } from './harness.ts';
import { decryptedBodies, sdk, until } from './sdk.ts';
import { startSlidingClient, type SlidingClient } from './sliding-sdk.ts';

// Two peers federating over libp2p, each user's client on matrix-js-sdk's SlidingSync (Rust crypto):
// a remote invite in the invite list, the join, and encrypted messages both ways over the extensions alone.

let a: P2PHomeserver;
let b: P2PHomeserver;
let alice: Account;
let bob: Account;
const clients: SlidingClient[] = [];
beforeAll(async () => {
  a = await startP2PHomeserver();
  b = await startP2PHomeserver({ bootstrap: a.p2p.multiaddrs() });
  alice = await register(a, 'alice');
  bob = await register(b, 'bob');
});
afterAll(async () => {
  for (const c of clients) c.stop();
  await b?.close();
  await a?.close();
});

it('carries a remote invite, the join and encrypted messages both ways over sliding sync', async () => {
  const onA = await startSlidingClient(a.url, alice, { crypto: true });
  const onB = await startSlidingClient(b.url, bob, { crypto: true });
  clients.push(onA, onB);
  const { room_id: roomId } = await onA.client.createRoom({
    name: 'across',
    preset: sdk.Preset.PrivateChat,
    invite: [bob.userId],
    initial_state: [{ type: 'm.room.encryption', state_key: '', content: { algorithm: 'm.megolm.v1.aes-sha2' } }],
  });
  onA.slidingSync.modifyRoomSubscriptions(new Set([roomId]));
  await until(onB.client, () => onB.client.getRoom(roomId)?.getMyMembership() === 'invite', 'the remote invite on B');
  expect(onB.slidingSync.getListData('invites')?.joinedCount).toBe(1);
  expect(onB.client.getRoom(roomId)!.name).toBe('across');

  await onB.client.joinRoom(roomId);
  onB.slidingSync.modifyRoomSubscriptions(new Set([roomId]));
  await until(onB.client, () => onB.client.getRoom(roomId)?.hasEncryptionStateEvent() === true && onB.slidingSync.getListData('invites')?.joinedCount === 0, 'the joined room on B');
  await until(onA.client, () => onA.client.getRoom(roomId)?.getMember(bob.userId)?.membership === 'join', "bob's join seen on A");

  await onA.client.sendTextMessage(roomId, 'from A');
  await until(onB.client, () => decryptedBodies(onB.client, roomId).includes('from A'), 'B decrypts');
  await onB.client.sendTextMessage(roomId, 'from B');
  await until(onA.client, () => decryptedBodies(onA.client, roomId).includes('from B'), 'A decrypts');
  for (const c of [onA, onB]) expect(c.paths.filter((p) => p.endsWith('/v3/sync'))).toEqual([]);
});
