import { beforeAll, describe, expect, it } from 'vitest';
import { api } from '../integration/harness.ts';
import { sdk, waitFor } from '../integration/sdk.ts';
import { membership, messageCrosses, send, synapseAndHearth, type Side } from '../support/synapse-interop.ts';
import { encryptedDmsBothWays, ephemeralNewsBothWays, roomsJoinedBothWays } from './federation-cases.ts';

// A DNS-named Hearth host and a real Synapse (the version scripts/install-synapse.sh pins), each
// `localhost:P` on loopback, federating over HTTPS with certificates from the test's own CA.
// matrix-js-sdk drives both as a person's client would (issue 35, items 1-3 and part of 4), each
// case both ways: rooms made on one server and joined from the other by ID and by alias, invites
// accepted and rejected, knocks, restricted joins, backfill and /context, relations, typing,
// receipts, presence and to-device messages; and end-to-end encryption with Rust crypto on both
// sides, a new device reaching the other server as a device-list update. The cases Dendrite is held
// to as well are in federation-cases.ts.

const servers = synapseAndHearth();
let onSynapse: Side;
let onHearth: Side;
beforeAll(() => ({ onSynapse, onHearth } = servers));

roomsJoinedBothWays(servers, 'Synapse');

describe.each([
  { direction: 'made on Synapse, joined from Hearth', creator: () => onSynapse, joiner: () => onHearth },
  { direction: 'made on Hearth, joined from Synapse', creator: () => onHearth, joiner: () => onSynapse },
])('a room $direction', ({ creator: creatorSide, joiner: joinerSide }) => {
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

ephemeralNewsBothWays(servers, 'Synapse');
encryptedDmsBothWays(servers, 'Synapse');
