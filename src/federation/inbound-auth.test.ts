import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { federatedServers, type Account, type FederatedServer } from '../../test/support/federated-homeservers.ts';
import { signingPeer, type SignedCall, type SigningPeer } from '../../test/support/signing-peer.ts';
import { validateFederationRequest, validateFederationResponse } from '../../test/support/spec-schema.ts';
import { HEARTH_KEY_ID } from '../crypto/identity.ts';
import { signNewEvent, type PDU } from '../events/pdu.ts';
import { requireRoomVersion } from '../events/room-versions.ts';
import { IMPLEMENTATION } from '../util/version.ts';
import { authorizationHeader } from './x-matrix.ts';

// What the shared federation app checks of every request, whatever carried it. A transport that
// authenticates the peer (libp2p) names it and the X-Matrix origin must be it; one that does not
// (HTTPS) names no one (`remoteServerName` undefined), and the signature, with `destination`
// when present, is all the authentication. A refused request leaves nothing behind.

const HTTPS: SignedCall = { remoteServerName: undefined };
const enc = encodeURIComponent;

let close: () => Promise<void>;
let a: FederatedServer;
let alice: Account;
let peer: SigningPeer;
let roomId: string;
beforeAll(async () => {
  const net = await federatedServers(1);
  close = net.close;
  a = net.servers[0]!;
  alice = await a.register('alice');
  peer = await signingPeer();
  roomId = (await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat', room_version: '10' } })).body.room_id;
  // The peer's user joins, over HTTPS as it were, so that its messages are welcome.
  const olga = `@olga:${peer.name}`;
  const template = await peer.call(a.homeserver, 'GET', `/_matrix/federation/v1/make_join/${enc(roomId)}/${enc(olga)}?ver=10`, undefined, HTTPS);
  const join = await signNewEvent(template.body.event, requireRoomVersion('10'), peer.name, HEARTH_KEY_ID, peer.key);
  expect((await peer.call(a.homeserver, 'PUT', `/_matrix/federation/v2/send_join/${enc(roomId)}/${enc(join.eventId)}`, join.event, HTTPS)).status).toBe(200);
});
afterAll(async () => close());

const profilePath = () => `/_matrix/federation/v1/query/profile?user_id=${enc(alice.userId)}`;

async function message(body: string): Promise<{ pdu: PDU; eventId: string }> {
  const { event } = await a.homeserver.services.rooms.prepareEvent(roomId, { type: 'm.room.message', sender: `@olga:${peer.name}`, content: { msgtype: 'm.text', body } });
  const signed = await signNewEvent(event, requireRoomVersion('10'), peer.name, HEARTH_KEY_ID, peer.key);
  return { pdu: signed.event as unknown as PDU, eventId: signed.eventId };
}

const txn = (pdus: unknown[], edus: unknown[] = []) => ({ origin: peer.name, origin_server_ts: Date.now(), pdus, edus });

function expectUnauthorized(answer: { status: number; body: any }, message?: RegExp): void {
  expect([answer.status, answer.body?.errcode], JSON.stringify(answer.body)).toEqual([401, 'M_UNAUTHORIZED']);
  if (message) expect(answer.body.error).toMatch(message);
}

describe('inbound authentication in the shared app', () => {
  it('serves /v1/version naming Hearth, to anyone, over either kind of transport', async () => {
    for (const options of [HTTPS, {}]) {
      const answer = await peer.call(a.homeserver, 'GET', '/_matrix/federation/v1/version', undefined, { ...options, authorization: null });
      expect(answer).toEqual({ status: 200, body: { server: { name: 'Hearth', version: IMPLEMENTATION.version } } });
      validateFederationResponse('GET', '/_matrix/federation/v1/version', 200, answer.body);
    }
  });

  it('takes a request authenticated by its signature alone when the transport names no sender (HTTPS)', async () => {
    const answer = await peer.call(a.homeserver, 'GET', profilePath(), undefined, HTTPS);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    validateFederationResponse('GET', profilePath(), 200, answer.body);
    // `destination` may be left out, as older servers do; the signature still covers our name.
    const signed = await authorizationHeader('GET', profilePath(), peer.name, a.serverName, undefined, HEARTH_KEY_ID, peer.key);
    const withoutDestination = signed.replace(/destination="[^"]*",/, '');
    expect(withoutDestination).not.toContain('destination');
    expect((await peer.call(a.homeserver, 'GET', profilePath(), undefined, { ...HTTPS, authorization: withoutDestination })).status).toBe(200);
  });

  it('still holds a named sender to its origin (libp2p): a good signature from another origin is refused', async () => {
    expect((await peer.call(a.homeserver, 'GET', profilePath())).status).toBe(200);
    const other = await signingPeer();
    expectUnauthorized(await peer.call(a.homeserver, 'GET', profilePath(), undefined, { remoteServerName: other.name }), /connection is from/);
  });

  it('refuses a missing, malformed or forged header, a wrong destination and a signature that does not verify', async () => {
    const forger = await signingPeer();
    const good = await authorizationHeader('GET', profilePath(), peer.name, a.serverName, undefined, HEARTH_KEY_ID, peer.key);
    // Signed by another key under the peer's name, or for another server's request.
    const wrongKey = await authorizationHeader('GET', profilePath(), peer.name, a.serverName, undefined, HEARTH_KEY_ID, forger.key);
    const otherUri = await authorizationHeader('GET', '/_matrix/federation/v1/query/directory?room_alias=%23x%3Ay', peer.name, a.serverName, undefined, HEARTH_KEY_ID, peer.key);
    const cases: [string, SignedCall, RegExp][] = [
      ['no header', { authorization: null }, /missing/],
      ['not X-Matrix', { authorization: 'Bearer abc' }, /missing/],
      ['a zero signature', { authorization: good.replace(/sig="[^"]*"/, `sig="${'A'.repeat(86)}"`) }, /does not verify/],
      ['another key', { authorization: wrongKey }, /does not verify/],
      ['another request', { authorization: otherUri }, /does not verify/],
      ['an unknown key ID', { authorization: good.replace(HEARTH_KEY_ID, 'ed25519:other') }, /no verify key/],
      ['another destination', { destination: forger.name }, /is for .*, not this server/],
      ['an origin that is this server', { authorization: good.replace(`origin="${peer.name}"`, `origin="${a.serverName}"`) }, /this server/],
    ];
    for (const [what, options, message] of cases) {
      const answer = await peer.call(a.homeserver, 'GET', profilePath(), undefined, { ...HTTPS, ...options });
      expect(answer.status, what).toBe(401);
      expectUnauthorized(answer, message);
      validateFederationResponse('GET', profilePath(), 401, answer.body);
    }
    // A header that says X-Matrix but is no valid one is a bad request: 400, still M_UNAUTHORIZED (as Synapse answers it).
    const malformed: [string, SignedCall, RegExp][] = [
      ['no signature', { authorization: `X-Matrix origin="${peer.name}",key="${HEARTH_KEY_ID}"` }, /malformed/],
      ['nothing after the scheme', { authorization: 'X-Matrix' }, /malformed/],
      // Found by test/integration/https-intake.fuzz.test.ts: its key was asked of `http://X-Matrix /_matrix/key/v2/server` (a TypeError).
      ['an origin that is no server name', { authorization: good.replace(`origin="${peer.name}"`, 'origin="X-Matrix "') }, /origin is not a server name/],
      ['an origin whose port is no number', { authorization: good.replace(`origin="${peer.name}"`, 'origin="localhost:http"') }, /origin is not a server name/],
    ];
    for (const [what, options, message] of malformed) {
      const answer = await peer.call(a.homeserver, 'GET', profilePath(), undefined, { ...HTTPS, ...options });
      expect([answer.status, answer.body?.errcode], what).toEqual([400, 'M_UNAUTHORIZED']);
      expect(answer.body.error, what).toMatch(message);
    }
  });

  it('processes nothing of a refused transaction: its ID stays unused and its PDUs unstored', async () => {
    const sent = await message('for someone else');
    const path = `/_matrix/federation/v1/send/${enc('txn-refused')}`;
    const body = txn([sent.pdu]);
    validateFederationRequest('PUT', path, body);
    expectUnauthorized(await peer.call(a.homeserver, 'PUT', path, body, { ...HTTPS, destination: 'elsewhere.example' }));
    expectUnauthorized(await peer.call(a.homeserver, 'PUT', path, body, { ...HTTPS, authorization: (await authorizationHeader('PUT', path, peer.name, a.serverName, txn([]), HEARTH_KEY_ID, peer.key)) }));
    expect(await a.homeserver.services.rooms.getEvent(sent.eventId)).toBeUndefined();
    // The same transaction ID, properly sent, is processed afresh.
    const answer = await peer.call(a.homeserver, 'PUT', path, body, HTTPS);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    validateFederationResponse('PUT', path, 200, answer.body);
    expect(answer.body.pdus[sent.eventId]).toEqual({});
  });
});

describe('transaction limits', () => {
  it('refuses more than 50 PDUs or 100 EDUs with 400 M_BAD_JSON, and a body over the bound with 413, keeping none of it', async () => {
    const first = await message('one of too many');
    const pdus = [first.pdu, ...Array.from({ length: 50 }, () => ({ ...first.pdu }))];
    const path = `/_matrix/federation/v1/send/${enc('txn-too-many')}`;
    const tooManyPdus = await peer.call(a.homeserver, 'PUT', path, txn(pdus), HTTPS);
    expect([tooManyPdus.status, tooManyPdus.body.errcode, tooManyPdus.body.error]).toEqual([400, 'M_BAD_JSON', 'pdus: at most 50 PDUs per transaction']);
    const edus = Array.from({ length: 101 }, () => ({ edu_type: 'm.typing', content: { room_id: roomId, user_id: `@olga:${peer.name}`, typing: true } }));
    const tooManyEdus = await peer.call(a.homeserver, 'PUT', path, txn([], edus), HTTPS);
    expect([tooManyEdus.status, tooManyEdus.body.errcode, tooManyEdus.body.error]).toEqual([400, 'M_BAD_JSON', 'edus: at most 100 EDUs per transaction']);
    const huge = await peer.call(a.homeserver, 'PUT', path, undefined, { ...HTTPS, rawBody: JSON.stringify(txn([{ pad: 'x'.repeat(5 * 1024 * 1024) }])) });
    expect([huge.status, huge.body.errcode]).toEqual([413, 'M_TOO_LARGE']);
    for (const refused of [tooManyPdus, tooManyEdus, huge]) validateFederationResponse('PUT', path, refused.status, refused.body);
    expect(await a.homeserver.services.rooms.getEvent(first.eventId)).toBeUndefined();

    // Exactly at the limits is fine, and the refused ID was never taken.
    const atLimit = await peer.call(a.homeserver, 'PUT', path, txn([first.pdu], edus.slice(0, 100)), HTTPS);
    expect(atLimit.status, JSON.stringify(atLimit.body)).toBe(200);
    expect(atLimit.body.pdus[first.eventId]).toEqual({});
  });
});
