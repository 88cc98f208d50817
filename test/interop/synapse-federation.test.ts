import { beforeAll, describe, expect, it } from 'vitest';
import { api } from '../integration/harness.ts';
import { decryptedBodies, knownDevices, sdk, startEncryptedRoom, until, waitFor } from '../integration/sdk.ts';
import { membership, messageCrosses, send, synapseAndHearth, type Side } from '../support/synapse-interop.ts';

// A DNS-named Hearth host and a real Synapse (the version scripts/install-synapse.sh pins), each
// `localhost:P` on loopback, federating over HTTPS with certificates from the test's own CA.
// matrix-js-sdk drives both as a person's client would (issue 35, items 1-3 and part of 4), each
// case both ways: rooms made on one server and joined from the other by ID and by alias, invites
// accepted and rejected, knocks, restricted joins, backfill and /context, relations, typing,
// receipts, presence and to-device messages; and end-to-end encryption with Rust crypto on both
// sides, a new device reaching the other server as a device-list update.

const servers = synapseAndHearth();
let onSynapse: Side;
let onHearth: Side;
beforeAll(() => ({ onSynapse, onHearth } = servers));

describe.each([
  { direction: 'made on Synapse, joined from Hearth', creator: () => onSynapse, joiner: () => onHearth },
  { direction: 'made on Hearth, joined from Synapse', creator: () => onHearth, joiner: () => onSynapse },
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
    const localpart = `alias-${creator === onSynapse ? 'synapse' : 'hearth'}`;
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

  it('a knock from the other server, let in by an invite', async () => {
    const [creator, knocker] = [creatorSide(), joinerSide()];
    const { room_id: roomId } = await creator.client.createRoom({
      name: 'Porch',
      initial_state: [{ type: 'm.room.join_rules', state_key: '', content: { join_rule: 'knock' } }],
    });
    await knocker.client.knockRoom(roomId, { viaServers: [creator.server.name], reason: 'let me in' });
    await waitFor(knocker.client, () => knocker.client.getRoom(roomId)?.getMyMembership() === 'knock', 15_000, `the knocked room on ${knocker.label}`);
    await waitFor(creator.client, () => membership(creator.client, roomId, knocker.account.userId) === 'knock', 15_000, `the knock on ${creator.label}`);
    expect(creator.client.getRoom(roomId)!.getMember(knocker.account.userId)!.events.member!.getContent()['reason']).toBe('let me in');

    await creator.client.invite(roomId, knocker.account.userId);
    await waitFor(knocker.client, () => knocker.client.getRoom(roomId)?.getMyMembership() === 'invite', 15_000, `the invite after the knock on ${knocker.label}`);
    await knocker.client.joinRoom(roomId);
    await waitFor(creator.client, () => membership(creator.client, roomId, knocker.account.userId) === 'join', 15_000, `the join after the knock on ${creator.label}`);
  });

  // With Hearth as the resident, its make_join names a user of its own who may invite, and its
  // send_join checks the allowed rooms again and countersigns the join (src/federation/restricted-joins.ts).
  it('a restricted room: a member of the allowed room joins through the creator’s server (join_authorised_via_users_server), someone else is refused', async () => {
    const [creator, joiner] = [creatorSide(), joinerSide()];
    const { room_id: club } = await creator.client.createRoom({ preset: sdk.Preset.PublicChat, name: 'Club' });
    const { room_id: annex } = await creator.client.createRoom({
      name: 'Annex',
      initial_state: [{ type: 'm.room.join_rules', state_key: '', content: { join_rule: 'restricted', allow: [{ type: 'm.room_membership', room_id: club }] } }],
    });
    const outsider = await servers.register(joiner.server, `outsider-${creator === onSynapse ? 'of-synapse' : 'of-hearth'}`);
    const refused = await api(joiner.server, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(annex)}?server_name=${encodeURIComponent(creator.server.name)}`, { token: outsider.accessToken, body: {}, unchecked: true });
    expect(refused.status, JSON.stringify(refused.body)).toBe(403);
    expect(refused.body.errcode).toBe('M_FORBIDDEN');

    await joiner.client.joinRoom(club, { viaServers: [creator.server.name] });
    await joiner.client.joinRoom(annex, { viaServers: [creator.server.name] });
    await waitFor(creator.client, () => membership(creator.client, annex, joiner.account.userId) === 'join', 15_000, `the restricted join on ${creator.label}`);
    // Only the creator's server could vouch for the joiner: its user is named in the join, on both servers.
    for (const side of [creator, joiner]) {
      const member = await api(side.server, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(annex)}/state/m.room.member/${encodeURIComponent(joiner.account.userId)}`, { token: side.account.accessToken, unchecked: true });
      expect(member.status, `${side.label}: ${JSON.stringify(member.body)}`).toBe(200);
      expect(member.body, side.label).toMatchObject({ membership: 'join', join_authorised_via_users_server: creator.account.userId });
    }
    await messageCrosses(joiner, creator, annex, `in the annex, from ${joiner.label}`);
  });

  it('history from before the join is paged back through the creator’s server (backfill), with /context around an old event', async () => {
    const [creator, joiner] = [creatorSide(), joinerSide()];
    const { room_id: roomId } = await creator.client.createRoom({ preset: sdk.Preset.PublicChat, name: 'Archive' });
    const sent: string[] = [];
    for (let i = 1; i <= 30; i++) sent.push(await send(creator, roomId, 'm.room.message', { msgtype: 'm.text', body: `old ${i}` }));
    await joiner.client.joinRoom(roomId, { viaServers: [creator.server.name] });

    const seen: string[] = [];
    let from: string | undefined;
    for (let page = 0; page < 10 && !seen.includes('old 1'); page++) {
      const r = await api(joiner.server, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=20${from ? `&from=${encodeURIComponent(from)}` : ''}`, { token: joiner.account.accessToken, unchecked: true });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      seen.push(...r.body.chunk.filter((e: any) => e.type === 'm.room.message').map((e: any) => e.content.body));
      if (!r.body.end) break;
      from = r.body.end;
    }
    expect(seen.reverse()).toEqual(Array.from({ length: 30 }, (_, i) => `old ${i + 1}`));

    // Synapse's /context around a backfilled event misses the events just before it: it pages back
    // from the event's depth less one at the event's own stream position, and backfilled events'
    // stream positions fall as their depth rises. That is Synapse's to answer, not Hearth's.
    if (joiner !== onHearth) return;
    const context = await api(joiner.server, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/context/${encodeURIComponent(sent[14]!)}?limit=4`, { token: joiner.account.accessToken, unchecked: true });
    expect(context.status, JSON.stringify(context.body)).toBe(200);
    expect(context.body.event.content.body).toBe('old 15');
    expect(context.body.events_before.map((e: any) => e.content.body)).toEqual(['old 14', 'old 13']);
    expect(context.body.events_after.map((e: any) => e.content.body)).toEqual(['old 16', 'old 17']);
  });

  it('relations across servers: a reaction and a thread reply from the joiner, an edit from the creator, related on both', async () => {
    const [creator, joiner] = [creatorSide(), joinerSide()];
    const { room_id: roomId } = await creator.client.createRoom({ preset: sdk.Preset.PublicChat, name: 'Relations' });
    await joiner.client.joinRoom(roomId, { viaServers: [creator.server.name] });
    const { event_id: root } = await creator.client.sendTextMessage(roomId, 'the root');
    await waitFor(joiner.client, () => joiner.client.getRoom(roomId)?.findEventById(root), 15_000, `the root on ${joiner.label}`);

    const reaction = await send(joiner, roomId, 'm.reaction', { 'm.relates_to': { rel_type: 'm.annotation', event_id: root, key: '👍' } });
    const reply = await send(joiner, roomId, 'm.room.message', { msgtype: 'm.text', body: 'in the thread', 'm.relates_to': { rel_type: 'm.thread', event_id: root, is_falling_back: true, 'm.in_reply_to': { event_id: root } } });
    const edit = await send(creator, roomId, 'm.room.message', { msgtype: 'm.text', body: '* the root, edited', 'm.new_content': { msgtype: 'm.text', body: 'the root, edited' }, 'm.relates_to': { rel_type: 'm.replace', event_id: root } });
    await waitFor(creator.client, () => creator.client.getRoom(roomId)?.findEventById(reply), 15_000, `the thread reply on ${creator.label}`);
    await waitFor(joiner.client, () => joiner.client.getRoom(roomId)?.findEventById(edit), 15_000, `the edit on ${joiner.label}`);

    for (const side of [creator, joiner]) {
      const path = `/_matrix/client/v1/rooms/${encodeURIComponent(roomId)}/relations/${encodeURIComponent(root)}`;
      const all = await api(side.server, 'GET', path, { token: side.account.accessToken, unchecked: true });
      expect(all.status, `${side.label}: ${JSON.stringify(all.body)}`).toBe(200);
      expect(all.body.chunk.map((e: any) => e.event_id).sort(), side.label).toEqual([reaction, reply, edit].sort());
      const annotations = await api(side.server, 'GET', `${path}/m.annotation/m.reaction`, { token: side.account.accessToken, unchecked: true });
      expect(annotations.body.chunk.map((e: any) => e.event_id), side.label).toEqual([reaction]);
      // Threads are aggregated on the root, wherever the reply was sent from.
      const event = await api(side.server, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/event/${encodeURIComponent(root)}`, { token: side.account.accessToken, unchecked: true });
      expect(event.body.unsigned?.['m.relations']?.['m.thread'], side.label).toMatchObject({ count: 1, latest_event: { event_id: reply } });
    }
  });
});

describe.each([
  { direction: 'from Synapse to Hearth', sender: () => onSynapse, receiver: () => onHearth },
  { direction: 'from Hearth to Synapse', sender: () => onHearth, receiver: () => onSynapse },
])('ephemeral news $direction', ({ sender: senderSide, receiver: receiverSide }) => {
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

describe('end-to-end encryption with Rust crypto on both servers', () => {
  let samE2ee: sdk.MatrixClient;
  let hanaE2ee: sdk.MatrixClient;
  let dm: string;

  it('a DM made on Hearth with a Synapse user: messages decrypt on the other side, both ways', async () => {
    samE2ee = await servers.client(servers.synapse, await servers.login(servers.synapse, 'sam'), true);
    hanaE2ee = await servers.client(servers.hearth, await servers.login(servers.hearth, 'hana'), true);
    dm = await startEncryptedRoom(hanaE2ee, samE2ee, { is_direct: true });

    await hanaE2ee.sendTextMessage(dm, 'a secret for sam');
    await until(samE2ee, () => decryptedBodies(samE2ee, dm).includes('a secret for sam'), 'the secret decrypted on Synapse');
    await samE2ee.sendTextMessage(dm, 'a secret for hana');
    await until(hanaE2ee, () => decryptedBodies(hanaE2ee, dm).includes('a secret for hana'), 'the secret decrypted on Hearth');
    // What the servers hold is ciphertext.
    for (const { server, account } of [onSynapse, onHearth]) {
      const stored = await api(server, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(dm)}/messages?dir=b&limit=20`, { token: account.accessToken, unchecked: true });
      expect(stored.status).toBe(200);
      expect(JSON.stringify(stored.body)).not.toContain('a secret');
    }
  }, 90_000);

  it('a DM made on Synapse with a Hearth user: messages decrypt on the other side', async () => {
    const roomId = await startEncryptedRoom(samE2ee, hanaE2ee, { is_direct: true });
    await samE2ee.sendTextMessage(roomId, 'a secret made on Synapse');
    await until(hanaE2ee, () => decryptedBodies(hanaE2ee, roomId).includes('a secret made on Synapse'), 'the secret decrypted on Hearth');
    await hanaE2ee.sendTextMessage(roomId, 'a secret answered from Hearth');
    await until(samE2ee, () => decryptedBodies(samE2ee, roomId).includes('a secret answered from Hearth'), 'the answer decrypted on Synapse');
  }, 90_000);

  it('a new device logging in on Synapse reaches Hearth as a device-list update, and gets the room key of the next message', async () => {
    const sam2 = await servers.login(servers.synapse, 'sam');
    const sam2Client = await servers.client(servers.synapse, sam2, true);
    // No /keys/query of the test's: hana's client learns of the device when Hearth's /sync says sam's devices changed.
    await until(hanaE2ee, async () => (await knownDevices(hanaE2ee, onSynapse.account.userId)).includes(sam2.deviceId), "hana's client learning sam's new device");
    await hanaE2ee.sendTextMessage(dm, 'for your new device too');
    await until(sam2Client, () => decryptedBodies(sam2Client, dm).includes('for your new device too'), 'the message decrypted on the new device');
    await until(samE2ee, () => decryptedBodies(samE2ee, dm).includes('for your new device too'), 'the message decrypted on the first device');
  }, 90_000);

  it('a new device logging in on Hearth reaches Synapse as a device-list update, and gets the room key of the next message', async () => {
    const hana2 = await servers.login(servers.hearth, 'hana');
    const hana2Client = await servers.client(servers.hearth, hana2, true);
    await until(samE2ee, async () => (await knownDevices(samE2ee, onHearth.account.userId)).includes(hana2.deviceId), "sam's client learning hana's new device");
    await samE2ee.sendTextMessage(dm, 'for your new device as well');
    await until(hana2Client, () => decryptedBodies(hana2Client, dm).includes('for your new device as well'), 'the message decrypted on the new device');
  }, 90_000);
});
