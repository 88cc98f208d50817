import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { JsonObject } from '../../../src/crypto/canonical-json.ts';
import { defaultEd25519Backend } from '../../../src/crypto/ed25519.ts';
import { canonicalJson } from '../../../src/crypto/canonical-json.ts';
import { AuthError } from '../../../src/events/auth.ts';
import { computeEventId, contentHashMatches, verifyEventSignature } from '../../../src/events/pdu.ts';
import { redactEvent } from '../../../src/events/redaction.ts';
import { ROOM_VERSIONS } from '../../../src/events/room-versions.ts';
import { fuzzParameters, fuzzTimeout } from '../../support/fuzz.ts';
import { KEY_ID, keyFor, TestRoom } from '../events/room-builder.ts';

// Properties of events under any content: redaction (every room version's algorithm) is
// idempotent and keeps what the signature and the event ID cover, so a redacted event still
// verifies and a receiver's content-hash rule ("if the hash fails, use the redacted copy")
// holds; and the auth rules, over any state and any event, answer allowed or AuthError, never crash.

const versions = [...ROOM_VERSIONS.keys()];
const SPECIAL_TYPES = ['m.room.create', 'm.room.member', 'm.room.power_levels', 'm.room.join_rules', 'm.room.history_visibility', 'm.room.aliases', 'm.room.redaction', 'm.room.third_party_invite', 'm.room.message'];
const SPECIAL_KEYS = ['membership', 'join_authorised_via_users_server', 'third_party_invite', 'signed', 'creator', 'room_version', 'join_rule', 'allow', 'ban', 'events', 'events_default', 'kick', 'redact', 'state_default', 'users', 'users_default', 'invite', 'notifications', 'aliases', 'history_visibility', 'redacts', 'body', 'm.federate', 'token', 'mxid', 'public_key', 'public_keys'];
const USERS = ['@alice:example.org', '@bob:other.example', '@carol:example.org'];

const leaf = fc.oneof(fc.constant(null), fc.boolean(), fc.integer({ min: -1000, max: 1000 }), fc.constantFrom('join', 'invite', 'leave', 'ban', 'knock', 'public', 'restricted', '100', '-1', '', ...USERS), fc.string({ maxLength: 6 }));
const value = fc.letrec<{ v: unknown }>((tie) => ({
  v: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('v'), { maxLength: 3 }), fc.dictionary(fc.oneof(fc.constantFrom(...SPECIAL_KEYS, ...USERS), fc.string({ maxLength: 4 })), tie('v'), { maxKeys: 4 })),
})).v;
const content = fc.dictionary(fc.oneof(fc.constantFrom(...SPECIAL_KEYS), fc.string({ maxLength: 4 })), value, { maxKeys: 5 }) as fc.Arbitrary<JsonObject>;
const eventFields = fc.record({
  type: fc.oneof(fc.constantFrom(...SPECIAL_TYPES), fc.string({ maxLength: 6 })),
  sender: fc.constantFrom(...USERS),
  state_key: fc.option(fc.oneof(fc.constantFrom('', ...USERS), fc.string({ maxLength: 4 })), { nil: undefined }),
  content,
  extra: fc.dictionary(fc.constantFrom('membership', 'prev_state', 'origin', 'unsigned', 'redacts', 'x_custom', 'age'), value, { maxKeys: 2 }),
});

const strip = (e: object) => {
  const { signatures: _s, unsigned: _u, hashes: _h, ...rest } = e as Record<string, unknown>;
  return canonicalJson(rest);
};

describe('events, fuzzed', { timeout: fuzzTimeout }, () => {
  it('redaction is idempotent, keeps the signed and hashed core, and a redacted event still verifies under the same ID', async () => {
    const backend = await defaultEd25519Backend();
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...versions), eventFields, async (versionId, fields) => {
        const room = await TestRoom.bootstrapped(versionId, '@alice:example.org');
        const version = room.version;
        // The event as it travels: from v3 on, its ID is derived, not carried.
        const { event_id: _id, ...pdu } = await room.build({ ...fields, extra: fields.extra as never });
        const event = version.eventIdFormat === 'local' ? { ...pdu, event_id: _id } : pdu;
        const redacted = redactEvent(event, version);
        expect(redactEvent(redacted, version)).toEqual(redacted);
        expect(redacted['content']).toBeTypeOf('object');
        for (const key of Object.keys(redacted)) expect(key === 'content' || Object.hasOwn(event, key), key).toBe(true);
        expect(redacted['hashes']).toEqual(event.hashes);
        // The signature covers the redacted form, so redacting never breaks it…
        const origin = event.sender.split(':')[1]!;
        const publicKey = (await keyFor(origin)).publicKey;
        expect(await verifyEventSignature(event, version, origin, KEY_ID, publicKey, backend)).toBe(true);
        expect(await verifyEventSignature(redacted, version, origin, KEY_ID, publicKey, backend)).toBe(true);
        // …nor changes the event's ID…
        if (version.eventIdFormat !== 'local') expect(computeEventId(redacted, version)).toBe(computeEventId(event, version));
        // …and the content hash matches the full event, and the redacted one only when redaction took nothing away.
        expect(contentHashMatches(event)).toBe(true);
        expect(contentHashMatches(redacted)).toBe(strip(redacted) === strip(event));
        // Content may change in transit without touching the signature exactly where redaction drops it.
        const changed = { ...event, content: { ...event.content, fuzz_extra: 'changed' } };
        const coveredChanged = canonicalJson(redactEvent(changed, version)) !== canonicalJson(redacted);
        expect(await verifyEventSignature(changed, version, origin, KEY_ID, publicKey, backend)).toBe(!coveredChanged);
        expect(contentHashMatches(changed)).toBe(false);
      }),
      fuzzParameters(60, 5),
    );
  });

  it('the auth rules over any state and any event: allowed or AuthError, never another error', async () => {
    const backend = await defaultEd25519Backend();
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...versions), fc.array(eventFields, { maxLength: 3 }), eventFields, async (versionId, statePrefix, fields) => {
        const room = await TestRoom.bootstrapped(versionId, '@alice:example.org');
        // Odd state, added without checks, as a room's resolved state may hold after a bad fork.
        for (const s of statePrefix) await room.send({ ...s, state_key: s.state_key ?? '', extra: {} });
        const event = await room.build({ ...fields, extra: {} });
        const outcome = await room.check(event, backend).then(() => 'allowed', (e: unknown) => e);
        if (outcome !== 'allowed') expect(outcome, String(outcome)).toBeInstanceOf(AuthError);
      }),
      fuzzParameters(100, 3),
    );
  });
});
