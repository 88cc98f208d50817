import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultEd25519Backend, type SigningKey } from '../../src/crypto/ed25519.ts';
import { webRandomBytes } from '../../src/crypto/random.ts';
import { signNewEvent } from '../../src/events/pdu.ts';
import { requireRoomVersion } from '../../src/events/room-versions.ts';
import { FederationClient, FederationRequestError } from '../../src/federation/client.ts';
import { ServerSigningKeys } from '../../src/federation/signing-keys.ts';
import { authorizationHeader } from '../../src/federation/x-matrix.ts';
import { createHttpsFederationTransport, type HttpsFederationTransport } from '../../src/node/https-federation.ts';
import { signingKeyFile } from '../../src/node/signing-key-file.ts';
import { eduTemplates, eduTransactionProperty, expectOnlyOriginalStored, mutate, mutation } from '../support/federation-mutations.ts';
import { fuzzParameters, fuzzTimeout } from '../support/fuzz.ts';
import { httpsFetch } from '../support/https-fetch.ts';
import { freePort, startNodePeer, type NodePeer } from '../support/node-peer.ts';
import { createTestCa, type TestCa } from '../support/test-ca.ts';
import { api, register, type Account } from './harness.ts';

// The federation intake fuzz (federation-intake.fuzz.test.ts, its generators shared through
// test/support/federation-mutations.ts) over real HTTPS: two DNS-named Node hosts in this
// process (`localhost:P`, certificates from a CA of the test's own), the attacker a real host
// in the victim's room whose signing key the test signs with. Over HTTPS the X-Matrix header is
// the whole authentication, so it is fuzzed too. Whatever is sent: every refusal is a Matrix
// error with 400, 401 or 403; a transaction's answer names a reason for each event refused; only
// the original event (or its redacted form) is ever stored as valid, and only under an intact
// signature; no handler fails with a programming error; a valid transaction works afterwards.

const version = requireRoomVersion('10');
let ca: TestCa;
let victim: NodePeer;
let attacker: NodePeer;
let attackerKey: SigningKey;
let transport: HttpsFederationTransport;
let client: FederationClient;
let alice: Account;
let mallory: Account;
let roomId: string;
const crashes: unknown[] = [];
const clientOf = (peer: NodePeer) => ({ url: peer.url, fetch: httpsFetch(ca.cert) });

async function dnsNamedPeer(log?: (message: string, error?: unknown) => void): Promise<NodePeer> {
  const port = await freePort();
  return startNodePeer({ port, listen: [], serverName: `localhost:${port}`, tls: ca.issue(['localhost', '127.0.0.1']), https: { extraCa: [ca.cert] }, ...(log ? { log } : {}) });
}

beforeAll(async () => {
  ca = createTestCa();
  victim = await dnsNamedPeer((_message, error) => {
    if (error instanceof TypeError || error instanceof RangeError || error instanceof ReferenceError || error instanceof SyntaxError) crashes.push(error);
  });
  attacker = await dnsNamedPeer();
  // The attacker's own key, as its host keeps it in its data folder.
  const keys = await ServerSigningKeys.open({ storage: signingKeyFile(join(attacker.dataDir, 'signing-keys.json')), ed25519: await defaultEd25519Backend(), random: webRandomBytes, now: Date.now });
  expect(keys.keyId).toBe(attacker.homeserver.keyId);
  attackerKey = keys.signingKey;
  transport = createHttpsFederationTransport({ extraCa: [ca.cert] });
  client = new FederationClient(transport, attacker.homeserver.serverName, keys.keyId, attackerKey);
  alice = await register(clientOf(victim), 'alice');
  mallory = await register(clientOf(attacker), 'mallory');
  roomId = (await api(clientOf(victim), 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat' } })).body.room_id;
  const join_ = await api(clientOf(attacker), 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}?via=${victim.homeserver.serverName}`, { token: mallory.accessToken, body: {} });
  expect(join_.status, JSON.stringify(join_.body)).toBe(200);
});

afterAll(async () => {
  transport?.close();
  await Promise.all([victim, attacker].filter(Boolean).map((p) => p.close()));
});

let counter = 0;
async function validMessage(): Promise<{ pdu: Record<string, unknown>; eventId: string }> {
  const { event } = await attacker.homeserver.services.rooms.prepareEvent(roomId, { type: 'm.room.message', sender: mallory.userId, content: { msgtype: 'm.text', body: `https fuzz ${++counter}` } });
  const signed = await signNewEvent(event, version, attacker.homeserver.serverName, attacker.homeserver.keyId, attackerKey);
  return { pdu: signed.event as unknown as Record<string, unknown>, eventId: signed.eventId };
}

/** A refusal as the spec words them: a Matrix error, 400, 401 or 403. */
function expectRefusal(error: FederationRequestError, what: unknown) {
  expect([400, 401, 403], `${error.status} ${error.message} for ${JSON.stringify(what)}`).toContain(error.status);
  expect(error.errcode, error.message).toMatch(/^M_[A-Z_]+$/);
}

const stored = async (eventId: string) => {
  const e = await victim.homeserver.services.rooms.getEvent(eventId);
  return e && !e.rejected ? e : undefined;
};

// X-Matrix: `X-Matrix origin="…",destination="…",key="ed25519:…",sig="…"`, mutated as text.
type HeaderMutation = { kind: 'flip' | 'cut' | 'insert' | 'param'; at: number; text: string };
const headerMutation: fc.Arbitrary<HeaderMutation> = fc.record({
  kind: fc.constantFrom('flip', 'cut', 'insert', 'param'),
  at: fc.nat(),
  text: fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom(',', '"', '=', ' ', 'origin="x"', 'destination=', 'key="ed25519:0"', 'sig=""', 'X-Matrix ', 'Bearer ', '\\', 'localhost:1')),
});
function mutateHeader(header: string, mutations: HeaderMutation[]): string {
  let h = header;
  for (const m of mutations) {
    const i = h.length === 0 ? 0 : m.at % h.length;
    if (m.kind === 'flip' && h.length > 0) h = h.slice(0, i) + (h[i] === 'A' ? 'B' : 'A') + h.slice(i + 1);
    else if (m.kind === 'cut') h = h.slice(0, i) + h.slice(i + 1 + (m.text.length % 8));
    else if (m.kind === 'insert') h = h.slice(0, i) + m.text + h.slice(i);
    else if (m.kind === 'param') {
      // Replace one parameter's value (origin, destination, key or sig) with the text.
      const params = [...h.matchAll(/(\w+)=("[^"]*"|[^,]*)/g)];
      const p = params[m.at % Math.max(1, params.length)];
      if (p) h = h.slice(0, p.index! + p[1]!.length + 1) + JSON.stringify(m.text) + h.slice(p.index! + p[0].length);
    }
  }
  return h;
}

describe('federation intake, fuzzed over HTTPS', { timeout: fuzzTimeout }, () => {
  it('random mutations of a valid signed PDU: refused with a reason, never stored as valid', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(mutation, { minLength: 1, maxLength: 3 }), async (mutations) => {
        const original = await validMessage();
        const mutated = mutate(original.pdu, mutations);
        const txn = { origin: attacker.homeserver.serverName, origin_server_ts: Date.now(), pdus: [mutated] };
        const answer = await client.sendTransaction(victim.homeserver.serverName, crypto.randomUUID(), txn as never).catch((e: unknown) => e);
        if (answer instanceof FederationRequestError) return expectRefusal(answer, mutated);
        if (answer instanceof Error) throw answer;
        await expectOnlyOriginalStored(answer, original, mutated, version, victim.homeserver);
        expect(crashes).toEqual([]);
      }),
      fuzzParameters(25, 20),
    );
  });

  it('random EDUs (each kind, valid and mutated): 200, or the whole transaction refused with 400 M_BAD_JSON; no programming error', async () => {
    const latest = (await validMessage()).pdu['prev_events'] as string[];
    await fc.assert(
      eduTransactionProperty(client, attacker.homeserver.serverName, victim.homeserver.serverName, () => eduTemplates(roomId, mallory.userId, alice.userId, latest), crashes),
      fuzzParameters(20, 20),
    );
  });

  it('mutated X-Matrix headers on a valid transaction: 401 or 400 unless the signature is intact; nothing stored under a forged one', async () => {
    const outcomes = new Map<string, number>();
    const count = (what: string) => outcomes.set(what, (outcomes.get(what) ?? 0) + 1);
    await fc.assert(
      fc.asyncProperty(fc.array(headerMutation, { minLength: 1, maxLength: 3 }), async (mutations) => {
        const original = await validMessage();
        const path = `/_matrix/federation/v1/send/${crypto.randomUUID()}`;
        const body = { origin: attacker.homeserver.serverName, origin_server_ts: Date.now(), pdus: [original.pdu] };
        const header = await authorizationHeader('PUT', path, attacker.homeserver.serverName, victim.homeserver.serverName, body, attacker.homeserver.keyId, attackerKey);
        const forged = mutateHeader(header, mutations);
        const response = await transport.send(victim.homeserver.serverName, new Request(`https://${victim.homeserver.serverName}${path}`, { method: 'PUT', headers: { authorization: forged, 'content-type': 'application/json' }, body: JSON.stringify(body) })).catch((e: unknown) => e);
        // A header that is no valid HTTP header value is refused by fetch before it is sent.
        if (response instanceof TypeError && /header/i.test(response.message)) return void count('not sendable');
        if (response instanceof Error) throw response;
        const answer = await (response as Response).json();
        const sig = /sig="?([A-Za-z0-9+/]+)/.exec(header)![1]!;
        if ((response as Response).status === 200) {
          // Accepted: only if what authenticates the attacker survived (its name, the destination, its key and signature).
          for (const part of [attacker.homeserver.serverName, victim.homeserver.serverName, attacker.homeserver.keyId, sig]) expect(forged, `accepted with ${forged}`).toContain(part);
          return void count('200');
        }
        expect([400, 401, 403], `${(response as Response).status} ${JSON.stringify(answer)} for ${forged}`).toContain((response as Response).status);
        expect(answer.errcode).toMatch(/^M_[A-Z_]+$/);
        expect(typeof answer.error).toBe('string');
        expect(await stored(original.eventId), `stored under ${forged}`).toBeUndefined();
        expect(crashes).toEqual([]);
        count(String((response as Response).status));
      }),
      fuzzParameters(25, 20),
    );
    // The fuzz reached the check it is for: forged headers were sent and refused.
    expect(outcomes.get('401') ?? 0, JSON.stringify([...outcomes])).toBeGreaterThan(0);
  });

  it('a valid transaction still works afterwards, and the room too', async () => {
    const after = await validMessage();
    const answer = await client.sendTransaction(victim.homeserver.serverName, crypto.randomUUID(), { origin: attacker.homeserver.serverName, origin_server_ts: Date.now(), pdus: [after.pdu as never] });
    expect(answer.pdus?.[after.eventId]).toEqual({});
    expect(await stored(after.eventId)).toBeDefined();
    const sent = await api(clientOf(victim), 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/after-fuzz`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'still here' } });
    expect(sent.status).toBe(200);
    expect(crashes).toEqual([]);
  });
});
