import { afterEach, describe, expect, it } from 'vitest';
import { federatedServers, syncUntil, type FederatedServer } from '../../test/support/federated-homeservers.ts';
import { signingPeer, type SigningPeer } from '../../test/support/signing-peer.ts';
import { validateFederationRequest, validateFederationResponse } from '../../test/support/spec-schema.ts';
import { HEARTH_KEY_ID } from '../crypto/identity.ts';
import { signNewEvent } from '../events/pdu.ts';
import { requireRoomVersion } from '../events/room-versions.ts';

// What older servers still call: v1 send_join, send_leave and invite, answered as `[200, body]`.
// The spec copy in test/spec-data no longer defines v1 send_join and send_leave (MSC4376 removed
// them), so their answer is checked as the pair the v1 definitions described, its body against
// the v2 definition, whose body is the v1 body with fields added.

let close: () => Promise<void> = async () => {};
afterEach(async () => close());

const enc = encodeURIComponent;

async function residentAndOldServer(): Promise<{ a: FederatedServer; old: SigningPeer; roomId: string }> {
  const net = await federatedServers(1);
  close = net.close;
  const a = net.servers[0]!;
  const alice = await a.register('alice');
  const { body } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat', room_version: '10' } });
  return { a, old: await signingPeer(), roomId: body.room_id as string };
}

/** make_ (v1, as it always was), then the template signed by the old server. */
async function signedMembership(a: FederatedServer, old: SigningPeer, roomId: string, userId: string, membership: 'join' | 'leave') {
  const path = `/_matrix/federation/v1/make_${membership}/${enc(roomId)}/${enc(userId)}${membership === 'join' ? '?ver=10' : ''}`;
  const template = await old.call(a.homeserver, 'GET', path);
  expect(template.status, JSON.stringify(template.body)).toBe(200);
  validateFederationResponse('GET', path, 200, template.body);
  return signNewEvent(template.body.event, requireRoomVersion(template.body.room_version), old.name, HEARTH_KEY_ID, old.key);
}

/** A `[200, body]` answer: its body. */
function pairBody(answer: { status: number; body: any }): any {
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  expect(Array.isArray(answer.body) && answer.body.length === 2 && answer.body[0] === 200, JSON.stringify(answer.body)).toBe(true);
  return answer.body[1];
}

describe('the v1 membership endpoints', () => {
  it('takes a join by v1 send_join and answers [200, {state, auth_chain}], then a leave by v1 send_leave with [200, {}]', async () => {
    const { a, old, roomId } = await residentAndOldServer();
    const olga = `@olga:${old.name}`;
    const rooms = a.homeserver.services.rooms;

    const join = await signedMembership(a, old, roomId, olga, 'join');
    const joinPath = `/_matrix/federation/v1/send_join/${enc(roomId)}/${enc(join.eventId)}`;
    const joined = pairBody(await old.call(a.homeserver, 'PUT', joinPath, join.event));
    validateFederationResponse('PUT', `/_matrix/federation/v2/send_join/${enc(roomId)}/${enc(join.eventId)}`, 200, joined);
    expect(joined.state.some((e: any) => e.type === 'm.room.create')).toBe(true);
    expect(joined.auth_chain.length).toBeGreaterThan(0);
    expect(await rooms.membership(roomId, olga)).toBe('join');

    const leave = await signedMembership(a, old, roomId, olga, 'leave');
    const left = pairBody(await old.call(a.homeserver, 'PUT', `/_matrix/federation/v1/send_leave/${enc(roomId)}/${enc(leave.eventId)}`, leave.event));
    expect(left).toEqual({});
    expect(await rooms.membership(roomId, olga)).toBe('leave');
  });

  it('refuses a bad v1 send_join as v2 does, with a plain Matrix error', async () => {
    const { a, old, roomId } = await residentAndOldServer();
    const join = await signedMembership(a, old, roomId, `@olga:${old.name}`, 'join');
    const wrongId = await old.call(a.homeserver, 'PUT', `/_matrix/federation/v1/send_join/${enc(roomId)}/${enc('$elsewhere')}`, join.event);
    expect([wrongId.status, wrongId.body.errcode]).toEqual([400, 'M_BAD_JSON']);
    const impostor = await signedMembership(a, old, roomId, `@olga:${old.name}`, 'join');
    const other = await signingPeer();
    const notTheirs = await other.call(a.homeserver, 'PUT', `/_matrix/federation/v1/send_join/${enc(roomId)}/${enc(impostor.eventId)}`, impostor.event);
    expect([notTheirs.status, notTheirs.body.errcode]).toEqual([403, 'M_FORBIDDEN']);
    expect(await a.homeserver.services.rooms.membership(roomId, `@olga:${old.name}`)).not.toBe('join');
  });

  it('countersigns an invite sent by v1 invite to a room it does not hold, and shows it to the invitee', async () => {
    const net = await federatedServers(1);
    close = net.close;
    const a = net.servers[0]!;
    const bob = await a.register('bob');
    const old = await signingPeer();
    const roomId = `!old:${old.name}`;
    const olga = `@olga:${old.name}`;
    const eventId = `$invite:${old.name}`;
    const create = { type: 'm.room.create', state_key: '', sender: olga, content: { creator: olga } };
    const { event } = await signNewEvent(
      {
        event_id: eventId, room_id: roomId, type: 'm.room.member', sender: olga, state_key: bob.userId, content: { membership: 'invite' },
        origin: old.name, origin_server_ts: Date.now(), depth: 4, prev_events: [], auth_events: [], unsigned: { invite_room_state: [create] },
      },
      requireRoomVersion('1'), old.name, HEARTH_KEY_ID, old.key,
    );
    const path = `/_matrix/federation/v1/invite/${enc(roomId)}/${enc(eventId)}`;
    validateFederationRequest('PUT', path, event);
    const answer = await old.call(a.homeserver, 'PUT', path, event);
    validateFederationResponse('PUT', path, answer.status, answer.body);
    const signed = pairBody(answer).event;
    expect(signed.event_id).toBe(eventId);
    expect(Object.keys(signed.signatures).sort()).toEqual([a.serverName, old.name].sort());
    const sync = await syncUntil(a, bob, (s) => !!s.rooms?.invite?.[roomId]);
    expect(sync.rooms.invite[roomId].invite_state.events.map((e: any) => e.type)).toContain('m.room.create');

    // Not an event for the room the path names: refused as v2 refuses it.
    const astray = await old.call(a.homeserver, 'PUT', `/_matrix/federation/v1/invite/${enc('!elsewhere:x')}/${enc(eventId)}`, event);
    expect([astray.status, astray.body.errcode]).toEqual([400, 'M_BAD_JSON']);
  });
});
