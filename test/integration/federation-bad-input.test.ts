import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultEd25519Backend, type SigningKey } from '../../src/crypto/ed25519.ts';
import { HEARTH_KEY_ID } from '../../src/crypto/identity.ts';
import { signNewEvent, type PDU } from '../../src/events/pdu.ts';
import { requireRoomVersion } from '../../src/events/room-versions.ts';
import { FederationClient, FederationRequestError } from '../../src/federation/client.ts';
import { startP2PHomeserver, type P2PHomeserver } from '../support/p2p-homeserver.ts';
import { validateFederationResponse } from '../support/spec-schema.ts';
import { api, register, type Account } from './harness.ts';

// Every bad input arrives over a real libp2p connection from a real Hearth peer:
// the victim must refuse it with the spec's error shape, keep none of it as valid,
// and go on serving.

let victim: P2PHomeserver;
let attacker: P2PHomeserver;
let bystander: P2PHomeserver;
let attackerKey: SigningKey;
let bystanderKey: SigningKey;
let alice: Account;
let mallory: Account;
let roomId: string;

const seeds = { attacker: crypto.getRandomValues(new Uint8Array(32)), bystander: crypto.getRandomValues(new Uint8Array(32)) };

beforeAll(async () => {
  victim = await startP2PHomeserver();
  // The attacker's own side would refuse to send more than 4 MiB: lift its limit, not the victim's.
  attacker = await startP2PHomeserver({ seed: seeds.attacker, bootstrap: victim.p2p.multiaddrs(), limits: { maxRequestBytes: 16 * 1024 * 1024 } });
  bystander = await startP2PHomeserver({ seed: seeds.bystander, bootstrap: victim.p2p.multiaddrs() });
  const ed25519 = await defaultEd25519Backend();
  attackerKey = await ed25519.keyFromSeed(seeds.attacker);
  bystanderKey = await ed25519.keyFromSeed(seeds.bystander);
  alice = await register(victim, 'alice');
  mallory = await register(attacker, 'mallory');
  roomId = (await api(victim, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat' } })).body.room_id;
  const join = await api(attacker, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}?via=${victim.homeserver.serverName}`, { token: mallory.accessToken, body: {} });
  expect(join.status, JSON.stringify(join.body)).toBe(200);
});

afterAll(async () => {
  await Promise.all([victim, attacker, bystander].filter(Boolean).map((p) => p.close()));
});

/** The attacker's client to the victim, signing as `origin` with `key`, over the attacker's own connection. */
const clientAs = (origin: string, key: SigningKey) => new FederationClient(attacker.p2p.transport, origin, HEARTH_KEY_ID, key);

async function refused(request: Promise<unknown>): Promise<FederationRequestError> {
  const error = await request.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(FederationRequestError);
  return error as FederationRequestError;
}

/** A message event in the room, built and signed by the attacker as `sender`. */
async function message(sender: string, body: string, tamper?: (e: Record<string, unknown>) => void): Promise<{ pdu: PDU; eventId: string }> {
  const version = requireRoomVersion('10');
  const { event } = await attacker.homeserver.services.rooms.prepareEvent(roomId, { type: 'm.room.message', sender: mallory.userId, content: { msgtype: 'm.text', body } });
  const signed = await signNewEvent({ ...event, sender }, version, attacker.homeserver.serverName, HEARTH_KEY_ID, attackerKey);
  const pdu = signed.event as unknown as Record<string, unknown>;
  tamper?.(pdu);
  return { pdu: pdu as unknown as PDU, eventId: signed.eventId };
}

async function sendPdus(pdus: PDU[]): Promise<Record<string, { error?: string }>> {
  const txn = { origin: attacker.homeserver.serverName, origin_server_ts: Date.now(), pdus };
  const answer = await clientAs(attacker.homeserver.serverName, attackerKey).sendTransaction(victim.homeserver.serverName, crypto.randomUUID(), txn);
  validateFederationResponse('PUT', '/_matrix/federation/v1/send/x', 200, answer);
  return answer.pdus ?? {};
}

async function visibleToAlice(body: string): Promise<boolean> {
  const { body: page } = await api(victim, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=50`, { token: alice.accessToken });
  return page.chunk.some((e: any) => e.content?.body === body);
}

describe('bad federation input over libp2p', () => {
  it('refuses a request with no X-Matrix header', async () => {
    const response = await attacker.p2p.transport.send(victim.homeserver.serverName, new Request(`http://${victim.homeserver.serverName}/_matrix/federation/v1/query/profile?user_id=${encodeURIComponent(alice.userId)}`));
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ errcode: 'M_UNAUTHORIZED' });
  });

  it('refuses a forged request signature', async () => {
    const forged = new FederationClient(attacker.p2p.transport, attacker.homeserver.serverName, HEARTH_KEY_ID, { publicKey: attackerKey.publicKey, sign: async () => new Uint8Array(64) });
    const error = await refused(forged.queryProfile(victim.homeserver.serverName, alice.userId));
    expect([error.status, error.errcode]).toEqual([401, 'M_UNAUTHORIZED']);
  });

  it('refuses a request whose origin is not the peer it came from, even when properly signed by that origin', async () => {
    const error = await refused(clientAs(bystander.homeserver.serverName, bystanderKey).queryProfile(victim.homeserver.serverName, alice.userId));
    expect([error.status, error.errcode]).toEqual([401, 'M_UNAUTHORIZED']);
  });

  it('refuses malformed JSON and an oversized body', async () => {
    const url = `http://${victim.homeserver.serverName}/_matrix/federation/v1/send/bad-json`;
    const notJson = await attacker.p2p.transport.send(victim.homeserver.serverName, new Request(url, { method: 'PUT', body: '{"origin": ', headers: { 'content-type': 'application/json' } }));
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toMatchObject({ errcode: 'M_NOT_JSON' });
    const huge = await attacker.p2p.transport.send(victim.homeserver.serverName, new Request(url, { method: 'PUT', body: JSON.stringify({ pad: 'x'.repeat(5 * 1024 * 1024) }) }));
    expect(huge.status).toBe(413);
    expect(await huge.json()).toMatchObject({ errcode: 'M_TOO_LARGE' });
  });

  it('refuses an invite in an unknown room version with M_INCOMPATIBLE_ROOM_VERSION, as /invite v2 defines it', async () => {
    const { pdu, eventId } = await message(mallory.userId, 'not an invite');
    const error = await refused(clientAs(attacker.homeserver.serverName, attackerKey).invite(victim.homeserver.serverName, roomId, eventId, { room_version: '999', event: pdu, invite_room_state: [] }));
    expect([error.status, error.errcode, error.details?.['room_version']]).toEqual([400, 'M_INCOMPATIBLE_ROOM_VERSION', '999']);
  });

  it('keeps none of: a forged event signature, a bad content hash, an event failing auth, an event claiming to be ours', async () => {
    const forged = await message(mallory.userId, 'forged signature', (e) => {
      const sigs = e['signatures'] as Record<string, Record<string, string>>;
      sigs[attacker.homeserver.serverName]![HEARTH_KEY_ID] = 'A'.repeat(86);
    });
    const tampered = await message(mallory.userId, 'original', (e) => {
      (e['content'] as Record<string, unknown>)['body'] = 'tampered';
    });
    const intruder = await message(`@intruder:${attacker.homeserver.serverName}`, 'not a member');
    const impostor = await message(alice.userId, 'impostor');
    const results = await sendPdus([forged.pdu, tampered.pdu, intruder.pdu, impostor.pdu]);
    for (const { eventId } of [forged, tampered, intruder, impostor]) expect(results[eventId]?.error, eventId).toBeTruthy();
    const rooms = victim.homeserver.services.rooms;
    expect(await rooms.getEvent(forged.eventId)).toBeUndefined();
    expect((await rooms.getEvent(intruder.eventId))?.rejected).toBeTruthy();
    expect(await rooms.getEvent(impostor.eventId)).toBeUndefined();
    for (const body of ['forged signature', 'tampered', 'original', 'not a member', 'impostor']) expect(await visibleToAlice(body), body).toBe(false);
  });

  it('drops a PDU whose references or optional strings have the wrong type (found by fuzzing: it was a 500)', async () => {
    const odd = await Promise.all([
      message(mallory.userId, 'bad prev', (e) => { e['prev_events'] = [false]; }),
      message(mallory.userId, 'bad auth', (e) => { e['auth_events'] = [...(e['auth_events'] as string[]), 7]; }),
      message(mallory.userId, 'bad redacts', (e) => { e['redacts'] = { id: 1 }; }),
    ]);
    const results = await sendPdus(odd.map((o) => o.pdu));
    for (const { eventId } of odd) {
      expect(results[eventId]).toBeUndefined();
      expect(await victim.homeserver.services.rooms.getEvent(eventId)).toBeUndefined();
    }
  });

  it('goes on serving: a good event from the same peer is accepted and shown', async () => {
    const good = await message(mallory.userId, 'hello, properly');
    const results = await sendPdus([good.pdu]);
    expect(results[good.eventId]).toEqual({});
    expect(await visibleToAlice('hello, properly')).toBe(true);
  });
});
