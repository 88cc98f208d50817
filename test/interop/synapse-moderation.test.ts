import { beforeAll, describe, expect, it } from 'vitest';
import { api } from '../integration/harness.ts';
import { sdk, waitFor } from '../integration/sdk.ts';
import { eventOn, membership, putState, send, sharedRoom, stateOn, synapseAndHearth, type Side } from '../support/synapse-interop.ts';

// Moderation between a Hearth host and Synapse (issue 35, item 5), each case both ways: the room's
// creator makes a member of the other server a moderator, who then kicks, bans and is demoted
// across servers; bans and unbans of remote users; redactions of others' events, redacted on both
// servers; and a server ACL that denies the other server. Synapse is named `127.0.0.1:P` here and
// Hearth `localhost:P`: server ACLs match server names without their ports, so the two must differ
// in their hosts for an ACL to deny one and not the other.

const servers = synapseAndHearth({ synapseHost: '127.0.0.1' });
/** A second person on each server, whom the moderators act on. */
let sid: Side;
let hugo: Side;
beforeAll(async () => {
  [sid, hugo] = await Promise.all([servers.person(servers.synapse, 'sid'), servers.person(servers.hearth, 'hugo')]);
});

const levels = async (side: Side, roomId: string) => (await stateOn(side.server, side.account, roomId, 'm.room.power_levels')).body;

/** Both servers answer `check` for the room's state once both clients have seen `seen`. */
async function onBoth(sides: Side[], roomId: string, seen: (c: sdk.MatrixClient) => boolean, what: string): Promise<void> {
  for (const side of sides) await waitFor(side.client, () => seen(side.client), 15_000, `${what} on ${side.label}`);
}

describe.each([
  { direction: 'a room on Synapse, moderated from Hearth', creator: () => servers.onSynapse, remote: () => servers.onHearth, bystander: () => sid },
  { direction: 'a room on Hearth, moderated from Synapse', creator: () => servers.onHearth, remote: () => servers.onSynapse, bystander: () => hugo },
])('$direction', ({ creator: creatorSide, remote: remoteSide, bystander: bystanderSide }) => {
  let roomId: string;
  let creator: Side;
  let remote: Side;
  /** A member on the creator's server. */
  let bystander: Side;

  beforeAll(async () => {
    [creator, remote, bystander] = [creatorSide(), remoteSide(), bystanderSide()];
    roomId = await sharedRoom(creator, remote, { name: 'Moderated' });
    await bystander.client.joinRoom(roomId);
    await waitFor(remote.client, () => membership(remote.client, roomId, bystander.account.userId) === 'join', 15_000, `the bystander's join on ${remote.label}`);
  });

  it('power levels: the creator makes the remote member a moderator, and both servers hold the new levels', async () => {
    const before = await levels(creator, roomId);
    await putState(creator, roomId, 'm.room.power_levels', { ...before, users: { ...before.users, [remote.account.userId]: 50 } });
    await onBoth([creator, remote], roomId, (c) => c.getRoom(roomId)?.getMember(remote.account.userId)?.powerLevel === 50, 'the promotion');
    // From room version 12 (Synapse's default) the creator holds unbounded power and is never listed.
    const creatorListed = before.users?.[creator.account.userId] !== undefined ? { [creator.account.userId]: 100 } : {};
    for (const side of [creator, remote]) {
      expect((await levels(side, roomId)).users, side.label).toEqual({ ...creatorListed, [remote.account.userId]: 50 });
    }
  });

  it('the remote moderator kicks a member of the creator’s server, with a reason, on both servers', async () => {
    await remote.client.kick(roomId, bystander.account.userId, 'too loud');
    await onBoth([creator, remote], roomId, (c) => membership(c, roomId, bystander.account.userId) === 'leave', 'the kick');
    for (const side of [creator, remote]) {
      const member = await stateOn(side.server, side.account, roomId, 'm.room.member', bystander.account.userId);
      expect(member.body, side.label).toMatchObject({ membership: 'leave', reason: 'too loud' });
      const state = await api(side.server, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/state`, { token: side.account.accessToken, unchecked: true });
      const kick = state.body.find((e: any) => e.type === 'm.room.member' && e.state_key === bystander.account.userId);
      expect(kick.sender, side.label).toBe(remote.account.userId);
    }
    await bystander.client.joinRoom(roomId);
    await onBoth([creator, remote], roomId, (c) => membership(c, roomId, bystander.account.userId) === 'join', 'the rejoin after the kick');
  });

  it('the remote moderator bans a member of the creator’s server, who cannot rejoin until the creator unbans them', async () => {
    await remote.client.ban(roomId, bystander.account.userId, 'spam');
    await onBoth([creator, remote], roomId, (c) => membership(c, roomId, bystander.account.userId) === 'ban', 'the ban');
    const refused = await api(bystander.server, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}`, { token: bystander.account.accessToken, body: {}, unchecked: true });
    expect(refused.status, JSON.stringify(refused.body)).toBe(403);
    // Synapse says M_BAD_STATE for a banned user's join; the spec names no code for this 403.
    if (bystander.server === servers.hearth) expect(refused.body.errcode).toBe('M_FORBIDDEN');

    await creator.client.unban(roomId, bystander.account.userId);
    await onBoth([creator, remote], roomId, (c) => membership(c, roomId, bystander.account.userId) === 'leave', 'the unban');
    await bystander.client.joinRoom(roomId);
    await onBoth([creator, remote], roomId, (c) => membership(c, roomId, bystander.account.userId) === 'join', 'the rejoin after the unban');
  });

  it('the creator bans the remote member, whose own server then refuses their rejoin; unbanned, they rejoin', async () => {
    // A user of the remote server who is not a moderator, so that the ban is of the remote server's user by the creator's.
    const guest = await servers.person(remote.server, `guest-${creator === servers.onSynapse ? 'of-synapse' : 'of-hearth'}`);
    await guest.client.joinRoom(roomId, { viaServers: [creator.server.name] });
    await onBoth([creator, remote], roomId, (c) => membership(c, roomId, guest.account.userId) === 'join', "the guest's join");

    await creator.client.ban(roomId, guest.account.userId, 'rude');
    await onBoth([creator, remote, guest], roomId, (c) => membership(c, roomId, guest.account.userId) === 'ban', 'the ban of the remote guest');
    const refused = await api(guest.server, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}?server_name=${encodeURIComponent(creator.server.name)}`, { token: guest.account.accessToken, body: {}, unchecked: true });
    expect(refused.status, JSON.stringify(refused.body)).toBe(403);

    await creator.client.unban(roomId, guest.account.userId);
    await onBoth([creator, remote], roomId, (c) => membership(c, roomId, guest.account.userId) === 'leave', 'the unban of the remote guest');
    await guest.client.joinRoom(roomId, { viaServers: [creator.server.name] });
    await onBoth([creator, remote], roomId, (c) => membership(c, roomId, guest.account.userId) === 'join', "the guest's rejoin");
  });

  it('redactions of another user’s event, from either server, are redacted on both', async () => {
    const byRemote = await send(remote, roomId, 'm.room.message', { msgtype: 'm.text', body: 'regrettable, from afar' });
    const byCreator = await send(creator, roomId, 'm.room.message', { msgtype: 'm.text', body: 'regrettable, from home' });
    await onBoth([creator, remote], roomId, (c) => !!c.getRoom(roomId)?.findEventById(byRemote) && !!c.getRoom(roomId)?.findEventById(byCreator), 'both messages');

    // The creator redacts the remote member's message; the remote moderator redacts the creator's.
    const redactions = new Map([[byRemote, (await creator.client.redactEvent(roomId, byRemote, undefined, { reason: 'off topic' })).event_id], [byCreator, (await remote.client.redactEvent(roomId, byCreator)).event_id]]);
    await onBoth([creator, remote], roomId, (c) => [byRemote, byCreator].every((id) => c.getRoom(roomId)?.findEventById(id)?.isRedacted()), 'the redactions');
    for (const side of [creator, remote]) {
      for (const [target, redaction] of redactions) {
        const event = await eventOn(side.server, side.account, roomId, target);
        expect(event.status, `${side.label}: ${JSON.stringify(event.body)}`).toBe(200);
        expect(event.body.content, side.label).toEqual({});
        expect(event.body.unsigned?.redacted_because?.event_id, side.label).toBe(redaction);
      }
    }
  });

  it('a demoted moderator can no longer kick: their own server refuses it', async () => {
    const before = await levels(creator, roomId);
    const { [remote.account.userId]: _demoted, ...others } = before.users;
    await putState(creator, roomId, 'm.room.power_levels', { ...before, users: others });
    await onBoth([creator, remote], roomId, (c) => c.getRoom(roomId)?.getMember(remote.account.userId)?.powerLevel === 0, 'the demotion');
    const kick = await api(remote.server, 'POST', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/kick`, { token: remote.account.accessToken, body: { user_id: bystander.account.userId }, unchecked: true });
    expect(kick.status, JSON.stringify(kick.body)).toBe(403);
    expect(kick.body.errcode).toBe('M_FORBIDDEN');
  });

  it('a server ACL that denies the remote server: its users’ events, and a join of one more of its users, are refused', async () => {
    // Hearth is `localhost:P`, Synapse `127.0.0.1:P`: deny the remote one by its host.
    const acl = remote === servers.onHearth ? { allow: ['*'], deny: ['localhost'], allow_ip_literals: true } : { allow: ['*'], deny: [], allow_ip_literals: false };
    await putState(creator, roomId, 'm.room.server_acl', acl);
    await waitFor(remote.client, () => !!remote.client.getRoom(roomId)?.currentState.getStateEvents('m.room.server_acl', ''), 15_000, `the ACL on ${remote.label}`);

    // The remote server, itself in the room, still takes its users' message and join (the ACL binds
    // the servers that read it about others), and sends them to the creator's, which refuses them.
    const denied = await send(remote, roomId, 'm.room.message', { msgtype: 'm.text', body: 'from a denied server' });
    const late = await servers.register(remote.server, `late-${creator === servers.onSynapse ? 'to-synapse' : 'to-hearth'}`);
    const join = await api(remote.server, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}`, { token: late.accessToken, body: {}, unchecked: true });
    expect(join.status, JSON.stringify(join.body)).toBe(200);
    // A to-device message is no room's, so no ACL stops it: it arrives after the message and the join were offered.
    const pinged = new Promise<void>((resolve) => creator.client.on(sdk.ClientEvent.ToDeviceEvent, (e) => e.getType() === 'org.example.after-acl' && resolve()));
    await remote.client.sendToDevice('org.example.after-acl', new Map([[creator.account.userId, new Map([[creator.account.deviceId, {}]])]]));
    await pinged;
    const there = await eventOn(creator.server, creator.account, roomId, denied);
    expect(there.status, JSON.stringify(there.body)).toBe(404);
    expect(creator.client.getRoom(roomId)?.findEventById(denied)).toBeUndefined();
    expect((await stateOn(creator.server, creator.account, roomId, 'm.room.member', late.userId)).status).toBe(404);

    // The creator's server's messages still reach the remote server, which the ACL does not bind.
    const text = `the creator still speaks, from ${creator.label}`;
    await creator.client.sendTextMessage(roomId, text);
    await waitFor(remote.client, () => remote.client.getRoom(roomId)?.getLiveTimeline().getEvents().some((e) => e.getContent()['body'] === text), 15_000, `the creator's message on ${remote.label}`);
  });
});
