/**
 * Cases every remote implementation is held to beside Hearth (test/interop/), each both ways, for a
 * file to call once with its fixture and the remote's name: rooms joined by ID and by alias, invites
 * accepted and rejected (`roomsJoinedBothWays`); typing, receipts, presence and to-device messages
 * (`ephemeralNewsBothWays`); DMs encrypted with Rust crypto, and a new device on either side given
 * the next message's key (`encryptedDmsBothWays`). matrix-js-sdk drives both servers.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { api } from '../integration/harness.ts';
import { decryptedBodies, knownDevices, sdk, startEncryptedRoom, until, waitFor } from '../integration/sdk.ts';
import { membership, messageCrosses, type RemoteAndHearth } from '../support/interop.ts';

/** The two directions of a case: the remote's person first, then Hearth's first. */
const bothWays = (servers: RemoteAndHearth, remote: string, [made, from]: [string, string]) => [
  { direction: `${made} ${remote}, ${from} Hearth`, first: () => servers.onRemote, second: () => servers.onHearth },
  { direction: `${made} Hearth, ${from} ${remote}`, first: () => servers.onHearth, second: () => servers.onRemote },
];

export function roomsJoinedBothWays(servers: RemoteAndHearth, remote: string): void {
  describe.each(bothWays(servers, remote, ['made on', 'joined from']))('a room $direction', ({ first: creatorSide, second: joinerSide }) => {
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
      const localpart = `alias-${creator === servers.onHearth ? 'hearth' : 'remote'}`;
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

    it('an invite to the other server, rejected', async () => {
      const [inviter, invitee] = [creatorSide(), joinerSide()];
      const { room_id: roomId } = await inviter.client.createRoom({ preset: sdk.Preset.PrivateChat, name: 'Rejected' });
      await inviter.client.invite(roomId, invitee.account.userId);
      await waitFor(invitee.client, () => invitee.client.getRoom(roomId)?.getMyMembership() === 'invite', 15_000, `the invite on ${invitee.label}`);
      await invitee.client.leave(roomId);
      await waitFor(inviter.client, () => membership(inviter.client, roomId, invitee.account.userId) === 'leave', 15_000, `the rejection on ${inviter.label}`);
      await waitFor(invitee.client, () => invitee.client.getRoom(roomId)?.getMyMembership() === 'leave', 15_000, `the rejection on ${invitee.label}`);
    });
  });
}

export function ephemeralNewsBothWays(servers: RemoteAndHearth, remote: string): void {
  describe.each(bothWays(servers, remote, ['from', 'to']))('ephemeral news $direction', ({ first: senderSide, second: receiverSide }) => {
    let roomId: string;

    beforeAll(async () => {
      const [sender, receiver] = [senderSide(), receiverSide()];
      ({ room_id: roomId } = await sender.client.createRoom({ preset: sdk.Preset.PublicChat, name: 'Lounge' }));
      await receiver.client.joinRoom(roomId, { viaServers: [sender.server.name] });
      await waitFor(sender.client, () => membership(sender.client, roomId, receiver.account.userId) === 'join', 15_000, `the join on ${sender.label}`);
    });

    it('typing starts and stops', async () => {
      const [sender, receiver] = [senderSide(), receiverSide()];
      await sender.client.sendTyping(roomId, true, 30_000);
      await waitFor(receiver.client, () => receiver.client.getRoom(roomId)?.getMember(sender.account.userId)?.typing, 15_000, `typing on ${receiver.label}`);
      await sender.client.sendTyping(roomId, false, 0);
      await waitFor(receiver.client, () => receiver.client.getRoom(roomId)?.getMember(sender.account.userId)?.typing === false, 15_000, `typing stopped on ${receiver.label}`);
    });

    it('a read receipt', async () => {
      const [sender, receiver] = [senderSide(), receiverSide()];
      const { event_id: read } = await receiver.client.sendTextMessage(roomId, `read me, ${sender.label}`);
      await waitFor(sender.client, () => sender.client.getRoom(roomId)?.findEventById(read), 15_000, `the message on ${sender.label}`);
      await sender.client.sendReadReceipt(sender.client.getRoom(roomId)!.findEventById(read)!);
      await waitFor(receiver.client, () => receiver.client.getRoom(roomId)?.getEventReadUpTo(sender.account.userId) === read, 15_000, `the receipt on ${receiver.label}`);
    });

    it('presence with a status message', async () => {
      const [sender, receiver] = [senderSide(), receiverSide()];
      const status = `here, on ${sender.label}`;
      await sender.client.setPresence({ presence: 'online', status_msg: status });
      await waitFor(receiver.client, () => receiver.client.getUser(sender.account.userId)?.presenceStatusMsg === status, 15_000, `the presence on ${receiver.label}`);
    });

    it('a to-device message', async () => {
      const [sender, receiver] = [senderSide(), receiverSide()];
      const received = new Promise<sdk.MatrixEvent>((resolve) => receiver.client.on(sdk.ClientEvent.ToDeviceEvent, (event) => event.getType() === 'org.example.ping' && resolve(event)));
      await sender.client.sendToDevice('org.example.ping', new Map([[receiver.account.userId, new Map([[receiver.account.deviceId, { from: sender.label }]])]]));
      const ping = await received;
      expect(ping.getSender()).toBe(sender.account.userId);
      expect(ping.getContent()).toEqual({ from: sender.label });
    });
  });
}

export function encryptedDmsBothWays(servers: RemoteAndHearth, remote: string): void {
  // sam and hana: the first person of each server, each signed in again with Rust crypto.
  describe('end-to-end encryption with Rust crypto on both servers', () => {
    let samE2ee: sdk.MatrixClient;
    let hanaE2ee: sdk.MatrixClient;
    let dm: string;

    it(`a DM made on Hearth with a ${remote} user: messages decrypt on the other side, both ways`, async () => {
      samE2ee = await servers.client(servers.remote, await servers.login(servers.remote, servers.onRemote.account.userId), true);
      hanaE2ee = await servers.client(servers.hearth, await servers.login(servers.hearth, servers.onHearth.account.userId), true);
      dm = await startEncryptedRoom(hanaE2ee, samE2ee, { is_direct: true });

      await hanaE2ee.sendTextMessage(dm, 'a secret for sam');
      await until(samE2ee, () => decryptedBodies(samE2ee, dm).includes('a secret for sam'), `the secret decrypted on ${remote}`);
      await samE2ee.sendTextMessage(dm, 'a secret for hana');
      await until(hanaE2ee, () => decryptedBodies(hanaE2ee, dm).includes('a secret for hana'), 'the secret decrypted on Hearth');
      // What the servers hold is ciphertext.
      for (const { server, account } of [servers.onRemote, servers.onHearth]) {
        const stored = await api(server, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(dm)}/messages?dir=b&limit=20`, { token: account.accessToken, unchecked: true });
        expect(stored.status).toBe(200);
        expect(JSON.stringify(stored.body)).not.toContain('a secret');
      }
    }, 90_000);

    it(`a DM made on ${remote} with a Hearth user: messages decrypt on the other side`, async () => {
      const roomId = await startEncryptedRoom(samE2ee, hanaE2ee, { is_direct: true });
      await samE2ee.sendTextMessage(roomId, `a secret made on ${remote}`);
      await until(hanaE2ee, () => decryptedBodies(hanaE2ee, roomId).includes(`a secret made on ${remote}`), 'the secret decrypted on Hearth');
      await hanaE2ee.sendTextMessage(roomId, 'a secret answered from Hearth');
      await until(samE2ee, () => decryptedBodies(samE2ee, roomId).includes('a secret answered from Hearth'), `the answer decrypted on ${remote}`);
    }, 90_000);

    it(`a new device logging in on ${remote} reaches Hearth as a device-list update, and gets the room key of the next message`, async () => {
      const sam2 = await servers.login(servers.remote, servers.onRemote.account.userId);
      const sam2Client = await servers.client(servers.remote, sam2, true);
      // No /keys/query of the test's: hana's client learns of the device when Hearth's /sync says sam's devices changed.
      await until(hanaE2ee, async () => (await knownDevices(hanaE2ee, servers.onRemote.account.userId)).includes(sam2.deviceId), "hana's client learning sam's new device");
      await hanaE2ee.sendTextMessage(dm, 'for your new device too');
      await until(sam2Client, () => decryptedBodies(sam2Client, dm).includes('for your new device too'), 'the message decrypted on the new device');
      await until(samE2ee, () => decryptedBodies(samE2ee, dm).includes('for your new device too'), 'the message decrypted on the first device');
    }, 90_000);

    it(`a new device logging in on Hearth reaches ${remote} as a device-list update, and gets the room key of the next message`, async () => {
      const hana2 = await servers.login(servers.hearth, servers.onHearth.account.userId);
      const hana2Client = await servers.client(servers.hearth, hana2, true);
      await until(samE2ee, async () => (await knownDevices(samE2ee, servers.onHearth.account.userId)).includes(hana2.deviceId), "sam's client learning hana's new device");
      await samE2ee.sendTextMessage(dm, 'for your new device as well');
      await until(hana2Client, () => decryptedBodies(hana2Client, dm).includes('for your new device as well'), 'the message decrypted on the new device');
    }, 90_000);
  });
}
