import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultEd25519Backend, type SigningKey } from '../../src/crypto/ed25519.ts';
import { HEARTH_KEY_ID } from '../../src/crypto/identity.ts';
import { signNewEvent, type PDU } from '../../src/events/pdu.ts';
import { requireRoomVersion } from '../../src/events/room-versions.ts';
import { FederationClient, FederationRequestError } from '../../src/federation/client.ts';
import { eduTemplates, eduTransactionProperty, expectOnlyOriginalStored, mutate, mutation } from '../support/federation-mutations.ts';
import { fuzzParameters, fuzzTimeout } from '../support/fuzz.ts';
import { startP2PHomeserver, type P2PHomeserver } from '../support/p2p-homeserver.ts';
import { api, register, type Account } from './harness.ts';

// Random mutations of a valid signed PDU, sent over a real libp2p connection by a real
// Hearth peer that is in the room (as federation-bad-input.test.ts does by hand). The victim
// answers the transaction with 200 and a result per event it can name; whatever it was sent,
// nothing but the original event (or its redacted form, when only the content was touched)
// is ever stored as valid, an error names its reason, no handler fails with a programming
// error, and the room goes on working.

const version = requireRoomVersion('10');
let victim: P2PHomeserver;
let attacker: P2PHomeserver;
let attackerKey: SigningKey;
let alice: Account;
let mallory: Account;
let roomId: string;
const seed = crypto.getRandomValues(new Uint8Array(32));
/** Programming errors the victim logged (a TypeError on bad input is a bug, a refused fetch is not). */
const crashes: unknown[] = [];

beforeAll(async () => {
  victim = await startP2PHomeserver({
    // The fuzz floods on purpose: the per-origin limits (tested in src/federation/rate-limit.test.ts) would answer most of it with 429.
    federationRateLimits: false,
    log: (_message, error) => {
      if (error instanceof TypeError || error instanceof RangeError || error instanceof ReferenceError || error instanceof SyntaxError) crashes.push(error);
    },
  });
  attacker = await startP2PHomeserver({ seed, bootstrap: victim.p2p.multiaddrs() });
  attackerKey = await (await defaultEd25519Backend()).keyFromSeed(seed);
  alice = await register(victim, 'alice');
  mallory = await register(attacker, 'mallory');
  roomId = (await api(victim, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat' } })).body.room_id;
  const join = await api(attacker, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}?via=${victim.homeserver.serverName}`, { token: mallory.accessToken, body: {} });
  expect(join.status, JSON.stringify(join.body)).toBe(200);
});

afterAll(async () => {
  await Promise.all([victim, attacker].filter(Boolean).map((p) => p.close()));
});

let counter = 0;
async function validMessage(): Promise<{ pdu: Record<string, unknown>; eventId: string }> {
  const { event } = await attacker.homeserver.services.rooms.prepareEvent(roomId, { type: 'm.room.message', sender: mallory.userId, content: { msgtype: 'm.text', body: `fuzz ${++counter}` } });
  const signed = await signNewEvent(event, version, attacker.homeserver.serverName, HEARTH_KEY_ID, attackerKey);
  return { pdu: signed.event as unknown as Record<string, unknown>, eventId: signed.eventId };
}

describe('federation intake, fuzzed over libp2p', { timeout: fuzzTimeout }, () => {
  it('random mutations of a valid signed PDU: refused with a reason, never stored as valid; the room goes on', async () => {
    const client = new FederationClient(attacker.p2p.transport, attacker.homeserver.serverName, HEARTH_KEY_ID, attackerKey);
    await fc.assert(
      fc.asyncProperty(fc.array(mutation, { minLength: 1, maxLength: 3 }), async (mutations) => {
        const original = await validMessage();
        const mutated = mutate(original.pdu, mutations);
        const txn = { origin: attacker.homeserver.serverName, origin_server_ts: Date.now(), pdus: [mutated] };
        const answer = await client.sendTransaction(victim.homeserver.serverName, crypto.randomUUID(), txn as never).catch((e: unknown) => e);
        if (answer instanceof FederationRequestError) {
          // Only a transaction the spec's schema refuses may be refused whole, and then with a Matrix error.
          expect(answer.status, answer.message).toBeGreaterThanOrEqual(400);
          expect(answer.status, `${answer.message} for ${JSON.stringify(mutated)}`).toBeLessThan(500);
          expect(answer.errcode).toMatch(/^M_/);
          return;
        }
        if (answer instanceof Error) throw answer;
        await expectOnlyOriginalStored(answer, original, mutated, version, victim.homeserver);
        expect(crashes).toEqual([]);
      }),
      fuzzParameters(40, 20),
    );  });

  it('random EDUs (each kind, valid and mutated): the transaction answers 200, no handler fails with a programming error', async () => {
    const client = new FederationClient(attacker.p2p.transport, attacker.homeserver.serverName, HEARTH_KEY_ID, attackerKey);
    const latest = (await validMessage()).pdu['prev_events'] as string[];
    const templates = () => eduTemplates(roomId, mallory.userId, alice.userId, latest);
    await fc.assert(
      eduTransactionProperty(client, attacker.homeserver.serverName, victim.homeserver.serverName, templates, crashes),
      fuzzParameters(30, 20),
    );
    expect((await api(victim, 'GET', '/_matrix/client/v3/sync?timeout=0', { token: alice.accessToken })).status).toBe(200);
  });

  it('the room still works both ways', async () => {
    const client = new FederationClient(attacker.p2p.transport, attacker.homeserver.serverName, HEARTH_KEY_ID, attackerKey);
    const after = await validMessage();
    const answer = await client.sendTransaction(victim.homeserver.serverName, crypto.randomUUID(), { origin: attacker.homeserver.serverName, origin_server_ts: Date.now(), pdus: [after.pdu as unknown as PDU] });
    expect(answer.pdus?.[after.eventId]).toEqual({});
    const sent = await api(victim, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/after-fuzz`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'still here' } });
    expect(sent.status).toBe(200);
  });
});
