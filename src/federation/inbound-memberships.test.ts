import { afterEach, describe, expect, it } from 'vitest';
import { federatedServers, type FederatedServer } from '../../test/support/federated-homeservers.ts';
import { serverAllowedInRoom } from './acl.ts';
import { InboundMembershipError, makeMembership, sendJoin, type InboundMembershipDeps } from './inbound-memberships.ts';

// The answers to other servers' make_ and send_ requests, and what they refuse.

let close: () => Promise<void> = async () => {};
afterEach(async () => close());

const enc = encodeURIComponent;
const refusal = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error);

async function twoServers(): Promise<{ a: FederatedServer; b: FederatedServer; deps: InboundMembershipDeps; roomId: string }> {
  const net = await federatedServers(2);
  close = net.close;
  const [a, b] = net.servers as [FederatedServer, FederatedServer];
  const alice = await a.register('alice');
  const { body } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat', room_version: '10' } });
  const rooms = a.homeserver.services.rooms;
  const deps = { serverName: a.serverName, rooms, federation: a.homeserver.federation.component, serverAllowed: (roomId: string, server: string) => serverAllowedInRoom(rooms, roomId, server) };
  return { a, b, deps, roomId: body.room_id as string };
}

describe('inbound memberships', () => {
  it('hands out a join template only for a user of the origin, in a room we are in, of a version the origin supports', async () => {
    const { a, b, deps, roomId } = await twoServers();
    const bob = `@bob:${b.serverName}`;
    const template = await makeMembership(deps, { origin: b.serverName, roomId, userId: bob, membership: 'join', supportedVersions: ['10', '11'] });
    expect(template.room_version).toBe('10');
    expect(template.event).toMatchObject({ type: 'm.room.member', sender: bob, state_key: bob, room_id: roomId, content: { membership: 'join' } });

    expect(await refusal(makeMembership(deps, { origin: b.serverName, roomId, userId: bob, membership: 'join' }))).toMatchObject({
      status: 400, errcode: 'M_INCOMPATIBLE_ROOM_VERSION', extra: { room_version: '10' },
    });
    expect(await refusal(makeMembership(deps, { origin: b.serverName, roomId, userId: `@eve:${a.serverName}`, membership: 'join', supportedVersions: ['10'] }))).toMatchObject({
      status: 403, errcode: 'M_FORBIDDEN', message: `@eve:${a.serverName} is not a user of ${b.serverName}`,
    });
    const unknown = await refusal(makeMembership(deps, { origin: b.serverName, roomId: `!nowhere:${a.serverName}`, userId: bob, membership: 'join', supportedVersions: ['10'] }));
    expect(unknown).toBeInstanceOf(InboundMembershipError);
    expect(unknown).toMatchObject({ status: 404, errcode: 'M_NOT_FOUND' });

    // Over the wire, the refusal keeps its status and errcode.
    const wire = await refusal(b.homeserver.federation.component.client.request(a.serverName, 'GET', `/_matrix/federation/v1/make_join/${enc(roomId)}/${enc(bob)}`, { query: { ver: '1' } }));
    expect(wire).toMatchObject({ status: 400, errcode: 'M_INCOMPATIBLE_ROOM_VERSION' });
  });

  it('refuses a send_join whose event is not the one the path names, or not a join by its sender', async () => {
    const { b, deps, roomId } = await twoServers();
    const bob = `@bob:${b.serverName}`;
    const { event } = await makeMembership(deps, { origin: b.serverName, roomId, userId: bob, membership: 'join', supportedVersions: ['10'] });
    expect(await refusal(sendJoin(deps, { origin: b.serverName, roomId, eventId: '$elsewhere', body: event }))).toMatchObject({ status: 400, errcode: 'M_BAD_JSON' });
    expect(await refusal(sendJoin(deps, { origin: b.serverName, roomId, eventId: '$x', body: 'not an event' }))).toMatchObject({ status: 400, errcode: 'M_BAD_JSON', message: 'the body is not an event' });
  });
});
