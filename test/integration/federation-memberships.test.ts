import { afterEach, describe, expect, it } from 'vitest';
import { federatedServers, syncUntil as syncUntilOn, until, type Account, type Exchange, type FederatedServer } from '../support/federated-homeservers.ts';
import { validateFederationResponse } from '../support/spec-schema.ts';

// Membership changes of users on other servers, as other homeservers behave
// (issue 24, "Across servers"): in-process federation, servers driven through
// their client API, what crossed between them checked against the spec.

let net: Awaited<ReturnType<typeof federatedServers>> | undefined;
async function twoServers(): Promise<{ a: FederatedServer; b: FederatedServer; alice: Account; bob: Account }> {
  net = await federatedServers(2);
  const [a, b] = net.servers as [FederatedServer, FederatedServer];
  const [alice, bob] = await Promise.all([a.register('alice'), b.register('bob')]);
  return { a, b, alice, bob };
}
afterEach(async () => {
  await net?.close();
  net = undefined;
});

const enc = encodeURIComponent;
const syncUntil = (server: FederatedServer, account: Account, predicate: (body: any) => boolean, since?: string) =>
  syncUntilOn(server, account, predicate, since, { rounds: 60, pollMs: 1000 });
const memberEvent = (userId: string, membership: string) => (e: any) => e.type === 'm.room.member' && e.state_key === userId && e.content.membership === membership;

describe('invites across servers', () => {
  for (const version of ['1', '2']) {
    it(`invites a remote user to a room of version ${version}, by /invite and by createRoom, and the invitee joins`, async () => {
      const { a, b, alice, bob } = await twoServers();
      const { status, body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { room_version: version } });
      expect(status, JSON.stringify(created)).toBe(200);
      const roomId = created.room_id as string;
      const invite = await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/invite`, { token: alice.accessToken, body: { user_id: bob.userId } });
      expect(invite.status, JSON.stringify(invite.body)).toBe(200);
      const exchange = a.sent.find((x) => x.path.includes('/invite/'))!;
      validateFederationResponse('PUT', exchange.path, exchange.status, exchange.response);
      expect(exchange.request.event.event_id).toBeDefined();
      await syncUntil(b, bob, (s) => !!s.rooms?.invite?.[roomId]);
      const join = await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: bob.accessToken, body: {} });
      expect(join.status, JSON.stringify(join.body)).toBe(200);
      await syncUntil(a, alice, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some(memberEvent(bob.userId, 'join')));

      const { status: status2, body: withInvite } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { room_version: version, invite: [bob.userId] } });
      expect(status2, JSON.stringify(withInvite)).toBe(200);
      await syncUntil(b, bob, (s) => !!s.rooms?.invite?.[withInvite.room_id]);
    });
  }

  it('a second user of a server already in the room joins at once after their invite, before its copy comes by /send', async () => {
    const { a, b, alice, bob } = await twoServers();
    const dave = await b.register('dave');
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { invite: [bob.userId] } });
    const roomId = created.room_id as string;
    await syncUntil(b, bob, (s) => !!s.rooms?.invite?.[roomId]);
    expect((await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: bob.accessToken, body: {} })).status).toBe(200);
    // A's transactions to B wait from here on, so the invite reaches B only by /invite.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const receive = b.homeserver.federation.fetch.bind(b.homeserver.federation);
    b.homeserver.federation.fetch = (request, remote) => {
      if (!new URL(request.url).pathname.startsWith('/_matrix/federation/v1/send/')) return receive(request, remote);
      return held.then(() => receive(request, remote));
    };
    const invite = await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/invite`, { token: alice.accessToken, body: { user_id: dave.userId } });
    expect(invite.status, JSON.stringify(invite.body)).toBe(200);
    const join = await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: dave.accessToken, body: {} });
    expect(join.status, JSON.stringify(join.body)).toBe(200);
    // The invite's copy by /send, when it comes, is a duplicate: accepted, nothing changed.
    release();
    await syncUntil(a, alice, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some(memberEvent(dave.userId, 'join')));
    const inviteSent = (x: Exchange) => x.destination === b.serverName && x.path.startsWith('/_matrix/federation/v1/send/') && x.request.pdus.some(memberEvent(dave.userId, 'invite'));
    await until(() => a.sent.some(inviteSent));
    expect(Object.values(a.sent.find(inviteSent)!.response.pdus)).toEqual(expect.arrayContaining([{}]));
    expect(Object.values(a.sent.find(inviteSent)!.response.pdus).filter((r: any) => r.error)).toEqual([]);
    expect(await b.homeserver.services.rooms.membership(roomId, dave.userId)).toBe('join');
  });

  it('refuses an invite that comes back from the invitee\'s server with anything changed but its signature and unsigned', async () => {
    const { a, b, alice, bob } = await twoServers();
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { room_version: '1' } });
    const roomId = created.room_id as string;
    // B answers with the content changed (and signed again by B, so only the comparison can tell).
    const receive = b.homeserver.federation.fetch.bind(b.homeserver.federation);
    b.homeserver.federation.fetch = async (request, remote) => {
      const response = await receive(request, remote);
      if (!new URL(request.url).pathname.includes('/invite/')) return response;
      const body = await response.json();
      body.event.content = { ...body.event.content, displayname: 'someone else' };
      return new Response(JSON.stringify(body), { status: response.status, headers: { 'content-type': 'application/json' } });
    };
    const invite = await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/invite`, { token: alice.accessToken, body: { user_id: bob.userId } });
    expect(invite.status).not.toBe(200);
    const { body: members } = await a.api('GET', `/_matrix/client/v3/rooms/${enc(roomId)}/members`, { token: alice.accessToken });
    expect(members.chunk.some(memberEvent(bob.userId, 'invite'))).toBe(false);
  });
});

describe('joins through a resident server', () => {
  it('keeps the join_authorised_via_users_server a make_join template names (a restricted room\'s resident names one), so the resident can check who vouched', async () => {
    const { a, b, alice, bob } = await twoServers();
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat' } });
    const roomId = created.room_id as string;
    const { body: state } = await a.api('GET', `/_matrix/client/v3/rooms/${enc(roomId)}/state`, { token: alice.accessToken });
    const aliceJoin = state.find(memberEvent(alice.userId, 'join')).event_id as string;
    // A answers bob's make_join as a restricted room's resident would: alice vouches for him, and
    // her membership is among the auth events.
    const receive = a.homeserver.federation.fetch.bind(a.homeserver.federation);
    a.homeserver.federation.fetch = async (request, remote) => {
      const response = await receive(request, remote);
      if (!new URL(request.url).pathname.startsWith('/_matrix/federation/v1/make_join/')) return response;
      const body = await response.json();
      body.event.content = { ...body.event.content, join_authorised_via_users_server: alice.userId };
      body.event.auth_events = [...body.event.auth_events, aliceJoin];
      return new Response(JSON.stringify(body), { status: response.status, headers: { 'content-type': 'application/json' } });
    };
    await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${enc(a.serverName)}`, { token: bob.accessToken, body: {}, unchecked: true });
    // What B signed and sent. Whether A then takes it is A's part (countersigning the join it
    // authorised): test/integration/federation-remote-joins.test.ts and test/interop test that.
    const sendJoin = b.sent.find((x) => x.path.includes('/send_join/'));
    expect(sendJoin?.request.content).toMatchObject({ membership: 'join', join_authorised_via_users_server: alice.userId });
    expect(sendJoin?.request.auth_events).toContain(aliceJoin);
  });
});

describe('bans across servers', () => {
  it('a banned remote user is out at once on both servers and may not rejoin until unbanned', async () => {
    const { a, b, alice, bob } = await twoServers();
    const dave = await b.register('dave');
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat' } });
    const roomId = created.room_id as string;
    for (const user of [bob, dave]) {
      const join = await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${a.serverName}`, { token: user.accessToken, body: {} });
      expect(join.status, JSON.stringify(join.body)).toBe(200);
    }
    const joined = await syncUntil(b, bob, (s) => !!s.rooms?.join?.[roomId]);
    await syncUntil(a, alice, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some(memberEvent(dave.userId, 'join')));

    const ban = await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/ban`, { token: alice.accessToken, body: { user_id: bob.userId, reason: 'spam' } });
    expect(ban.status, JSON.stringify(ban.body)).toBe(200);
    expect((await a.homeserver.services.rooms.membership(roomId, bob.userId))).toBe('ban');
    // On B, bob's client sees the ban as his leave; dave still sees the room and bob banned in it.
    await syncUntil(b, bob, (s) => (s.rooms?.leave?.[roomId]?.timeline?.events ?? []).some(memberEvent(bob.userId, 'ban')), joined.next_batch);
    expect((await b.homeserver.services.rooms.membership(roomId, bob.userId))).toBe('ban');
    const { body: members } = await b.api('GET', `/_matrix/client/v3/rooms/${enc(roomId)}/members?membership=join`, { token: dave.accessToken });
    expect(members.chunk.map((e: any) => e.state_key).sort()).toEqual([alice.userId, dave.userId].sort());

    // B is still in the room (dave): bob's join is refused there, and through A too.
    const again = await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${a.serverName}`, { token: bob.accessToken, body: {} });
    expect(again.status).toBe(403);
    expect(again.body.errcode).toBe('M_FORBIDDEN');
    expect((await b.homeserver.services.rooms.membership(roomId, bob.userId))).toBe('ban');
    const invite = await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/invite`, { token: alice.accessToken, body: { user_id: bob.userId } });
    expect(invite.status).toBe(403);

    const unban = await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/unban`, { token: alice.accessToken, body: { user_id: bob.userId } });
    expect(unban.status, JSON.stringify(unban.body)).toBe(200);
    await syncUntil(b, dave, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some(memberEvent(bob.userId, 'leave')));
    const rejoin = await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${a.serverName}`, { token: bob.accessToken, body: {} });
    expect(rejoin.status, JSON.stringify(rejoin.body)).toBe(200);
    await syncUntil(a, alice, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some(memberEvent(bob.userId, 'join')));
  });

  it('a banned remote user whose server is left with no one in the room may not rejoin through the room\'s server', async () => {
    const { a, b, alice, bob } = await twoServers();
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat' } });
    const roomId = created.room_id as string;
    expect((await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${a.serverName}`, { token: bob.accessToken, body: {} })).status).toBe(200);
    const joined = await syncUntil(b, bob, (s) => !!s.rooms?.join?.[roomId]);
    expect((await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/ban`, { token: alice.accessToken, body: { user_id: bob.userId } })).status).toBe(200);
    await syncUntil(b, bob, (s) => (s.rooms?.leave?.[roomId]?.timeline?.events ?? []).some(memberEvent(bob.userId, 'ban')), joined.next_batch);
    const again = await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${a.serverName}`, { token: bob.accessToken, body: {} });
    expect(again.status).toBe(403);
    expect(again.body.errcode).toBe('M_FORBIDDEN');
    expect((await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/unban`, { token: alice.accessToken, body: { user_id: bob.userId } })).status).toBe(200);
    const rejoin = await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${a.serverName}`, { token: bob.accessToken, body: {} });
    expect(rejoin.status, JSON.stringify(rejoin.body)).toBe(200);
  });

  it('a remote user banned while invited loses the invite at once and may not join until unbanned', async () => {
    const { a, b, alice, bob } = await twoServers();
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat', invite: [bob.userId] } });
    const roomId = created.room_id as string;
    const invited = await syncUntil(b, bob, (s) => !!s.rooms?.invite?.[roomId]);
    expect((await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/ban`, { token: alice.accessToken, body: { user_id: bob.userId } })).status).toBe(200);
    const left = await syncUntil(b, bob, (s) => !!s.rooms?.leave?.[roomId], invited.next_batch);
    expect(left.rooms.invite?.[roomId]).toBeUndefined();
    const join = await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${a.serverName}`, { token: bob.accessToken, body: {} });
    expect(join.status).toBe(403);
    expect((await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/unban`, { token: alice.accessToken, body: { user_id: bob.userId } })).status).toBe(200);
    const rejoin = await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${a.serverName}`, { token: bob.accessToken, body: {} });
    expect(rejoin.status, JSON.stringify(rejoin.body)).toBe(200);
  });

  it("an invite withdrawn by its inviter (a kick) reaches the invitee's server, whose client sees the room left", async () => {
    const { a, b, alice, bob } = await twoServers();
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { invite: [bob.userId] } });
    const roomId = created.room_id as string;
    const invited = await syncUntil(b, bob, (s) => !!s.rooms?.invite?.[roomId]);
    expect((await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/kick`, { token: alice.accessToken, body: { user_id: bob.userId, reason: 'sent by mistake' } })).status).toBe(200);
    const left = await syncUntil(b, bob, (s) => !!s.rooms?.leave?.[roomId], invited.next_batch);
    expect(left.rooms.invite?.[roomId]).toBeUndefined();
    expect(await b.homeserver.services.rooms.localMembership(bob.userId, roomId)).toMatchObject({ membership: 'leave' });
    const send = a.sent.find((x) => x.destination === b.serverName && x.path.startsWith('/_matrix/federation/v1/send/') && x.request.pdus.some(memberEvent(bob.userId, 'leave')))!;
    expect(Object.values(send.response.pdus)).toEqual([{}]);
  });
});

describe('rejecting invites across servers', () => {
  it('rejects an invite to a room that everyone else has left', async () => {
    const { a, b, alice, bob } = await twoServers();
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { invite: [bob.userId] } });
    const roomId = created.room_id as string;
    const invited = await syncUntil(b, bob, (s) => !!s.rooms?.invite?.[roomId]);
    expect((await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/leave`, { token: alice.accessToken, body: {} })).status).toBe(200);
    const reject = await b.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/leave`, { token: bob.accessToken, body: {} });
    expect(reject.status, JSON.stringify(reject.body)).toBe(200);
    const left = await syncUntil(b, bob, (s) => !!s.rooms?.leave?.[roomId], invited.next_batch);
    expect(left.rooms.invite?.[roomId]).toBeUndefined();
    // Gone for good: a fresh initial sync shows no invite either.
    const { body: initial } = await b.api('GET', '/_matrix/client/v3/sync', { token: bob.accessToken });
    expect(initial.rooms?.invite?.[roomId]).toBeUndefined();
  });

  it('rejects an invite whose inviting server cannot be reached', async () => {
    const { a, b, alice, bob } = await twoServers();
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { invite: [bob.userId] } });
    const roomId = created.room_id as string;
    const invited = await syncUntil(b, bob, (s) => !!s.rooms?.invite?.[roomId]);
    net!.network.down.add(a.serverName);
    const reject = await b.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/leave`, { token: bob.accessToken, body: {} });
    expect(reject.status, JSON.stringify(reject.body)).toBe(200);
    await syncUntil(b, bob, (s) => !!s.rooms?.leave?.[roomId], invited.next_batch);
  });
});

describe("a withdrawn or rejected invite in the invitee's /sync", () => {
  it('comes under rooms.leave with the leave event in its timeline, as Synapse sends it, or in its state when a filter keeps it from the timeline', async () => {
    const { a, b, alice, bob } = await twoServers();
    const invitedTo = async () => {
      const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { invite: [bob.userId] } });
      return created.room_id as string;
    };
    const rejected = await invitedTo();
    const withdrawn = await invitedTo();
    const invited = await syncUntil(b, bob, (s) => !!s.rooms?.invite?.[rejected] && !!s.rooms?.invite?.[withdrawn]);
    expect((await b.api('POST', `/_matrix/client/v3/rooms/${enc(rejected)}/leave`, { token: bob.accessToken, body: {} })).status).toBe(200);
    expect((await a.api('POST', `/_matrix/client/v3/rooms/${enc(withdrawn)}/kick`, { token: alice.accessToken, body: { user_id: bob.userId, reason: 'sent by mistake' } })).status).toBe(200);
    await syncUntil(b, bob, (s) => !!s.rooms?.leave?.[rejected], invited.next_batch);
    await syncUntil(b, bob, (s) => !!s.rooms?.leave?.[withdrawn], invited.next_batch);
    const { body: left } = await b.api('GET', `/_matrix/client/v3/sync?since=${invited.next_batch}`, { token: bob.accessToken });
    for (const [roomId, sender] of [[rejected, bob.userId], [withdrawn, alice.userId]] as const) {
      const room = left.rooms.leave[roomId];
      expect(room.timeline.events, roomId).toHaveLength(1);
      expect(room.timeline.events[0]).toMatchObject({ type: 'm.room.member', state_key: bob.userId, sender, content: { membership: 'leave' } });
      expect(room.timeline.limited).toBe(false);
      expect(room.state.events).toEqual([]);
    }
    // A filter that keeps member events from the timeline: the leave comes as the room's state.
    const filter = enc(JSON.stringify({ room: { timeline: { not_types: ['m.room.member'] } } }));
    const { body: filtered } = await b.api('GET', `/_matrix/client/v3/sync?since=${invited.next_batch}&filter=${filter}`, { token: bob.accessToken });
    expect(filtered.rooms.leave[withdrawn].timeline.events).toEqual([]);
    expect(filtered.rooms.leave[withdrawn].state.events).toEqual([expect.objectContaining({ type: 'm.room.member', state_key: bob.userId, content: expect.objectContaining({ membership: 'leave' }) })]);
  });
});

describe('redactions across servers', () => {
  it('redacts by POST /rooms/{roomId}/redact/{eventId} with no transaction ID (the legacy form Synapse serves), and the other server redacts too', async () => {
    const { a, b, alice, bob } = await twoServers();
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat' } });
    const roomId = created.room_id as string;
    expect((await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${a.serverName}`, { token: bob.accessToken, body: {} })).status).toBe(200);
    const { body: sent } = await b.api('PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/m1`, { token: bob.accessToken, body: { msgtype: 'm.text', body: 'oops' } });
    await syncUntil(a, alice, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.event_id === sent.event_id));
    const since = (await b.api('GET', '/_matrix/client/v3/sync?timeout=0', { token: bob.accessToken })).body.next_batch;

    const redact = await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/redact/${enc(sent.event_id)}`, { token: alice.accessToken, body: { reason: 'spam' }, unchecked: true });
    expect(redact.status, JSON.stringify(redact.body)).toBe(200);
    expect(redact.body.event_id).toMatch(/^\$/);
    // Each POST is a new redaction: no transaction ID makes two the same.
    const again = await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/redact/${enc(sent.event_id)}`, { token: alice.accessToken, body: {}, unchecked: true });
    expect(again.status).toBe(200);
    expect(again.body.event_id).not.toBe(redact.body.event_id);

    await syncUntil(b, bob, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.event_id === redact.body.event_id && e.redacts === sent.event_id), since);
    const { body: original } = await b.api('GET', `/_matrix/client/v3/rooms/${enc(roomId)}/event/${enc(sent.event_id)}`, { token: bob.accessToken });
    expect(original.content).toEqual({});
    expect(original.unsigned.redacted_because.event_id).toBe(redact.body.event_id);
  });
});
