import { afterEach, describe, expect, it } from 'vitest';
import { federatedServers, syncUntil as syncUntilOn, type Account, type FederatedServer } from '../support/federated-homeservers.ts';
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
