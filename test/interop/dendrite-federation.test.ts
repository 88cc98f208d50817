import { beforeAll, describe, expect, it } from 'vitest';
import { api } from '../integration/harness.ts';
import { decryptedBodies, knownDevices, sdk, startEncryptedRoom, until, waitFor } from '../integration/sdk.ts';
import { startDendrite } from '../support/dendrite.ts';
import { call, devicesOf, keyedPerson, listing, newDevice, untilQuery, syncUntil, type Person } from '../support/device-list-watch.ts';
import { membership, messageCrosses, remoteAndHearth, type Side } from '../support/interop.ts';

// A DNS-named Hearth host and a real Dendrite (the version scripts/install-dendrite.sh builds), each
// `localhost:P` on loopback, federating over HTTPS with certificates from the test's own CA (issue
// 35). matrix-js-sdk drives both as a person's client would, each case both ways: rooms made on one
// server (Dendrite's default room version is 10) and joined from the other by ID and by alias, with
// messages both ways; an invite accepted; a new device reaching the other server's /keys/query and
// /sync; and a DM encrypted with Rust crypto on both sides.

const servers = remoteAndHearth((tls) => startDendrite({ tls }));
let onDendrite: Side;
let onHearth: Side;
beforeAll(() => ({ onRemote: onDendrite, onHearth } = servers));

describe.each([
  { direction: 'made on Dendrite, joined from Hearth', creator: () => onDendrite, joiner: () => onHearth },
  { direction: 'made on Hearth, joined from Dendrite', creator: () => onHearth, joiner: () => onDendrite },
])('a room $direction', ({ creator: creatorSide, joiner: joinerSide }) => {
  it('joined by ID (through the creator’s server), with messages both ways', async () => {
    const [creator, joiner] = [creatorSide(), joinerSide()];
    const { room_id: roomId } = await creator.client.createRoom({ preset: sdk.Preset.PublicChat, name: 'By ID' });
    await joiner.client.joinRoom(roomId, { viaServers: [creator.server.name] });
    await waitFor(creator.client, () => membership(creator.client, roomId, joiner.account.userId) === 'join', 15_000, `the join on ${creator.label}`);
    await waitFor(joiner.client, () => joiner.client.getRoom(roomId)?.name === 'By ID', 15_000, `the room's state on ${joiner.label}`);

    await messageCrosses(creator, joiner, roomId, `hello from ${creator.label}`);
    await messageCrosses(joiner, creator, roomId, `hello from ${joiner.label}`);
  });

  it('joined by alias, with messages both ways', async () => {
    const [creator, joiner] = [creatorSide(), joinerSide()];
    const localpart = `alias-${creator === onDendrite ? 'dendrite' : 'hearth'}`;
    const { room_id: roomId } = await creator.client.createRoom({ preset: sdk.Preset.PublicChat, room_alias_name: localpart, name: 'By alias' });
    const joined = await joiner.client.joinRoom(`#${localpart}:${creator.server.name}`);
    expect(joined.roomId).toBe(roomId);
    await waitFor(creator.client, () => membership(creator.client, roomId, joiner.account.userId) === 'join', 15_000, `the join on ${creator.label}`);

    await messageCrosses(joiner, creator, roomId, `hello by alias from ${joiner.label}`);
    await messageCrosses(creator, joiner, roomId, `hello by alias from ${creator.label}`);
  });

  it('an invite to the other server, accepted', async () => {
    const [inviter, invitee] = [creatorSide(), joinerSide()];
    const { room_id: roomId } = await inviter.client.createRoom({ preset: sdk.Preset.PrivateChat, name: 'Accepted' });
    await inviter.client.invite(roomId, invitee.account.userId);
    await waitFor(invitee.client, () => invitee.client.getRoom(roomId)?.getMyMembership() === 'invite', 15_000, `the invite on ${invitee.label}`);
    // The invite carries the room's stripped state, so the invitee sees the name before joining.
    expect(invitee.client.getRoom(roomId)?.name).toBe('Accepted');
    await invitee.client.joinRoom(roomId);
    await waitFor(inviter.client, () => membership(inviter.client, roomId, invitee.account.userId) === 'join', 15_000, `the accepted invite on ${inviter.label}`);
    await messageCrosses(invitee, inviter, roomId, `thanks for the invite, from ${invitee.label}`);
  });
});

describe.each([
  { direction: 'a Dendrite user’s devices, watched from Hearth', ownerServer: () => servers.remote, watcherServer: () => servers.hearth, tag: 'd2h' },
  { direction: 'a Hearth user’s devices, watched from Dendrite', ownerServer: () => servers.hearth, watcherServer: () => servers.remote, tag: 'h2d' },
])('$direction', ({ ownerServer, watcherServer, tag }) => {
  let owner: Person;
  let watcher: Person;

  beforeAll(async () => {
    [owner, watcher] = await Promise.all([keyedPerson(ownerServer(), `owner-${tag}`), keyedPerson(watcherServer(), `watcher-${tag}`)]);
    const { room_id: roomId } = await call(owner, 'POST', '/_matrix/client/v3/createRoom', { preset: 'public_chat' });
    await call(watcher, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}?server_name=${encodeURIComponent(owner.server.name)}`, {});
    // Sharing a room, the watcher's server tracks the owner's list; the first device is listed.
    await syncUntil(watcher, () => true, 'a first position');
    expect(await devicesOf(watcher, owner)).toEqual([owner.account.deviceId]);
  });

  it('a new device is listed, and the owner is in device_lists.changed; its sign-out takes it off the list', async () => {
    const second = await newDevice(owner, 'the second device');
    const answer = await untilQuery(watcher, owner, listing(owner, [owner.account.deviceId, second.deviceId]), 'the new device');
    expect(answer.device_keys[owner.account.userId][second.deviceId].keys).toBeDefined();
    await call({ server: owner.server, account: second }, 'POST', '/_matrix/client/v3/logout', {});
    await untilQuery(watcher, owner, listing(owner, [owner.account.deviceId]), 'the second device logged out');
  });
});

describe('end-to-end encryption with Rust crypto on both servers', () => {
  let samE2ee: sdk.MatrixClient;
  let hanaE2ee: sdk.MatrixClient;
  let dm: string;

  it('a DM made on Hearth with a Dendrite user: messages decrypt on the other side, both ways', async () => {
    samE2ee = await servers.client(servers.remote, await servers.login(servers.remote, 'sam'), true);
    hanaE2ee = await servers.client(servers.hearth, await servers.login(servers.hearth, 'hana'), true);
    dm = await startEncryptedRoom(hanaE2ee, samE2ee, { is_direct: true });

    await hanaE2ee.sendTextMessage(dm, 'a secret for sam');
    await until(samE2ee, () => decryptedBodies(samE2ee, dm).includes('a secret for sam'), 'the secret decrypted on Dendrite');
    await samE2ee.sendTextMessage(dm, 'a secret for hana');
    await until(hanaE2ee, () => decryptedBodies(hanaE2ee, dm).includes('a secret for hana'), 'the secret decrypted on Hearth');
    // What the servers hold is ciphertext.
    for (const { server, account } of [onDendrite, onHearth]) {
      const stored = await api(server, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(dm)}/messages?dir=b&limit=20`, { token: account.accessToken, unchecked: true });
      expect(stored.status).toBe(200);
      expect(JSON.stringify(stored.body)).not.toContain('a secret');
    }
  }, 90_000);

  it('a DM made on Dendrite with a Hearth user: messages decrypt on the other side', async () => {
    const roomId = await startEncryptedRoom(samE2ee, hanaE2ee, { is_direct: true });
    await samE2ee.sendTextMessage(roomId, 'a secret made on Dendrite');
    await until(hanaE2ee, () => decryptedBodies(hanaE2ee, roomId).includes('a secret made on Dendrite'), 'the secret decrypted on Hearth');
    await hanaE2ee.sendTextMessage(roomId, 'a secret answered from Hearth');
    await until(samE2ee, () => decryptedBodies(samE2ee, roomId).includes('a secret answered from Hearth'), 'the answer decrypted on Dendrite');
  }, 90_000);

  it('a new device logging in on Dendrite reaches Hearth, and gets the room key of the next message', async () => {
    const sam2 = await servers.login(servers.remote, 'sam');
    const sam2Client = await servers.client(servers.remote, sam2, true);
    // No /keys/query of the test's: hana's client learns of the device when Hearth's /sync says sam's devices changed.
    await until(hanaE2ee, async () => (await knownDevices(hanaE2ee, onDendrite.account.userId)).includes(sam2.deviceId), "hana's client learning sam's new device");
    await hanaE2ee.sendTextMessage(dm, 'for your new device too');
    await until(sam2Client, () => decryptedBodies(sam2Client, dm).includes('for your new device too'), 'the message decrypted on the new device');
  }, 90_000);

  it('a new device logging in on Hearth reaches Dendrite, and gets the room key of the next message', async () => {
    const hana2 = await servers.login(servers.hearth, 'hana');
    const hana2Client = await servers.client(servers.hearth, hana2, true);
    await until(samE2ee, async () => (await knownDevices(samE2ee, onHearth.account.userId)).includes(hana2.deviceId), "sam's client learning hana's new device");
    await samE2ee.sendTextMessage(dm, 'for your new device as well');
    await until(hana2Client, () => decryptedBodies(hana2Client, dm).includes('for your new device as well'), 'the message decrypted on the new device');
  }, 90_000);
});
