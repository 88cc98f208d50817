import { describe, expect, it } from 'vitest';
import { SPEC_KEY_ID, SPEC_PUBLIC_KEY_B64, SPEC_SEED, SPEC_SERVER } from '../../test/unit/spec-key.ts';
import { decodeBase64, encodeBase64 } from '../crypto/base64.ts';
import { canonicalJson, CanonicalJsonError } from '../crypto/canonical-json.ts';
import { createWebCryptoBackend, tweetnaclBackend, type Ed25519Backend } from '../crypto/ed25519.ts';
import { computeContentHash, signingBytes } from '../crypto/signing.ts';
import { computeEventId, contentHashMatches, eventIdFromSigningBytes, hashAndSignEvent, receivedEventForms, verifyEventSignature, verifyEventSignatureOver } from './pdu.ts';
import { redactEvent } from './redaction.ts';
import { requireRoomVersion } from './room-versions.ts';

const v1 = requireRoomVersion('1');
const publicKey = decodeBase64(SPEC_PUBLIC_KEY_B64);
const backends: Ed25519Backend[] = [tweetnaclBackend, createWebCryptoBackend(globalThis.crypto.subtle)];

const minimalEvent = () => ({
  room_id: '!x:domain',
  sender: '@a:domain',
  origin: 'domain',
  origin_server_ts: 1000000,
  signatures: {},
  hashes: {},
  type: 'X',
  content: {},
  prev_events: [],
  auth_events: [],
  depth: 3,
  unsigned: { age_ts: 1000000 },
});

const redactableEvent = () => ({
  content: { body: 'Here is the message content' },
  event_id: '$0:domain',
  origin: 'domain',
  origin_server_ts: 1000000,
  type: 'm.room.message',
  room_id: '!r:domain',
  sender: '@u:domain',
  signatures: {},
  unsigned: { age_ts: 1000000 },
});

describe.each(backends)('event hashing and signing with $name (spec-vectors §4)', (backend) => {
  it('§4a minimal event', async () => {
    const key = await backend.keyFromSeed(SPEC_SEED);
    const signed = await hashAndSignEvent(minimalEvent(), v1, SPEC_SERVER, SPEC_KEY_ID, key);
    expect(signed.hashes.sha256).toBe('5jM4wQpv6lnBo7CLIghJuHdW+s2CMBJPUOGOC89ncos');
    expect(signed.signatures.domain!['ed25519:1']).toBe(
      'KxwGjPSDEtvnFgU00fwFz+l6d2pJM6XBIaMEn81SXPTRl16AqLAYqfIReFGZlHi5KLjAWbOoMszkwsQma+lYAg',
    );
    expect(signed.unsigned).toEqual({ age_ts: 1000000 });
    expect(new TextDecoder().decode(signingBytes(redactEvent(signed, v1)))).toBe(
      '{"auth_events":[],"content":{},"depth":3,"hashes":{"sha256":"5jM4wQpv6lnBo7CLIghJuHdW+s2CMBJPUOGOC89ncos"},"origin":"domain","origin_server_ts":1000000,"prev_events":[],"room_id":"!x:domain","sender":"@a:domain","type":"X"}',
    );
    expect(await verifyEventSignature(signed, v1, SPEC_SERVER, SPEC_KEY_ID, publicKey, backend)).toBe(true);
  });

  it('§4b event with redactable content', async () => {
    const key = await backend.keyFromSeed(SPEC_SEED);
    const signed = await hashAndSignEvent(redactableEvent(), v1, SPEC_SERVER, SPEC_KEY_ID, key);
    expect(signed.hashes.sha256).toBe('onLKD1bGljeBWQhWZ1kaP9SorVmRQNdN5aM2JYU2n/g');
    expect(signed.signatures.domain!['ed25519:1']).toBe(
      'Wm+VzmOUOz08Ds+0NTWb1d4CZrVsJSikkeRxh6aCcUwu6pNC78FunoD7KNWzqFn241eYHYMGCA5McEiVPdhzBA',
    );
    expect(new TextDecoder().decode(signingBytes(redactEvent(signed, v1)))).toBe(
      '{"content":{},"event_id":"$0:domain","hashes":{"sha256":"onLKD1bGljeBWQhWZ1kaP9SorVmRQNdN5aM2JYU2n/g"},"origin":"domain","origin_server_ts":1000000,"room_id":"!r:domain","sender":"@u:domain","type":"m.room.message"}',
    );
    expect(contentHashMatches(signed)).toBe(true);
    expect(contentHashMatches({ ...signed, content: { body: 'changed' } })).toBe(false);
    // Redacting keeps the signature valid: it covers only the redacted form.
    const redacted = { ...signed, content: {} };
    expect(await verifyEventSignature(redacted, v1, SPEC_SERVER, SPEC_KEY_ID, publicKey, backend)).toBe(true);
  });

  it('§4c synapse test_event_signing vectors', async () => {
    const key = await backend.keyFromSeed(SPEC_SEED);
    const a = await hashAndSignEvent(
      { event_id: '$0:domain', origin_server_ts: 1000000, signatures: {}, type: 'X', content: {}, unsigned: { age_ts: 1000000 } },
      v1, SPEC_SERVER, SPEC_KEY_ID, key,
    );
    expect(a.hashes.sha256).toBe('mq4QfPPpC+QsBd6eqfVsmJIEz8uvMSVK0+AU67PLESk');
    expect(a.signatures.domain!['ed25519:1']).toBe(
      '18rGIkd4JJXxw9m+1j3BtN+TmqmLip4VHvFbyXLngpBLXOqbxlQViQABRzep2cODQ2aa5FnFgz+Llt2P03WiAw',
    );
    const { origin: _o, ...withoutOrigin } = redactableEvent();
    const b = await hashAndSignEvent(withoutOrigin, v1, SPEC_SERVER, SPEC_KEY_ID, key);
    expect(b.hashes.sha256).toBe('rDCeYBepPlI891h/RkI2/Lkf9bt7u0TxFku4tMs7WKk');
    expect(b.signatures.domain!['ed25519:1']).toBe(
      'Ay4aj2b5oJ1k8INYZ9n3KnszCflM0emwcmQQ7vxpbdcSv9bkJxIZdWX1IJllcZLq89+D3sSabE+vqPtZs9akDw',
    );
  });

  it('§4d gomatrixserverlib verification vectors', async () => {
    const ok = {
      event_id: '$0:domain',
      hashes: { sha256: '6tJjLpXtggfke8UxFhAKg82QVkJzvKOVOOSjUDK4ZSI' },
      origin: 'domain',
      origin_server_ts: 1000000,
      signatures: { domain: { 'ed25519:1': '2Wptgo4CwmLo/Y8B8qinxApKaCkBG2fjTWB7AbP5Uy+aIbygsSdLOFzvdDjww8zUVKCmI02eP9xtyJxc/cLiBA' } },
      type: 'X',
      unsigned: { age_ts: 1000000 },
    };
    const verify = (e: object) => verifyEventSignature(e, v1, SPEC_SERVER, SPEC_KEY_ID, publicKey, backend);
    expect(await verify(ok)).toBe(true);
    expect(await verify({ ...ok, unsigned: {} })).toBe(true);
    expect(await verify({ ...ok, type: 'modified' })).toBe(false);

    const signed4b = {
      ...redactableEvent(),
      hashes: { sha256: 'onLKD1bGljeBWQhWZ1kaP9SorVmRQNdN5aM2JYU2n/g' },
      signatures: { domain: { 'ed25519:1': 'Wm+VzmOUOz08Ds+0NTWb1d4CZrVsJSikkeRxh6aCcUwu6pNC78FunoD7KNWzqFn241eYHYMGCA5McEiVPdhzBA' } },
    };
    expect(await verify(signed4b)).toBe(true);
    expect(await verify({ ...signed4b, content: {} })).toBe(true);
    expect(await verify({ ...signed4b, content: {}, hashes: { sha256: 'adifferenthashvalueaP9SorVmRQNdN5aM2JYU2n/g' } })).toBe(false);
  });
});

describe('reference hashes and event IDs (spec-vectors §5)', () => {
  const hashed = () => ({ ...minimalEvent(), hashes: { sha256: encodeBase64(computeContentHash(minimalEvent())) } });

  it('v3–v10: the same ID in both encodings', () => {
    expect(computeEventId(hashed(), requireRoomVersion('3'))).toBe('$8yif6p8EqgoSten2BLje9ntKm720NyFLWQv9tn8memc');
    expect(computeEventId(hashed(), requireRoomVersion('4'))).toBe('$8yif6p8EqgoSten2BLje9ntKm720NyFLWQv9tn8memc');
    expect(computeEventId(hashed(), requireRoomVersion('10'))).toBe('$8yif6p8EqgoSten2BLje9ntKm720NyFLWQv9tn8memc');
  });

  it('v11 drops origin before hashing', () => {
    const v11 = requireRoomVersion('11');
    expect(computeEventId(hashed(), { ...v11, eventIdFormat: 'base64' })).toBe('$70O/oKlXzFbkfu0KE88USi98DjSWrOELrPj+8tisl8I');
    expect(computeEventId(hashed(), v11)).toBe('$70O_oKlXzFbkfu0KE88USi98DjSWrOELrPj-8tisl8I');
  });

  it('v1–v2 use the origin-assigned ID', () => {
    expect(computeEventId({ ...hashed(), event_id: '$abc:domain' }, v1)).toBe('$abc:domain');
    expect(() => computeEventId(hashed(), requireRoomVersion('2'))).toThrow();
  });

  it('ignores signatures and unsigned', () => {
    const v10 = requireRoomVersion('10');
    const base = hashed();
    expect(computeEventId({ ...base, signatures: { x: { y: 'z' } }, unsigned: { a: 1 } }, v10)).toBe(computeEventId(base, v10));
    expect(canonicalJson(base)).toContain('"depth":3');
  });
});

describe('signNewEvent', () => {
  it('gives the same signature and event ID as the separate steps, in every ID format', async () => {
    const { signNewEvent } = await import('./pdu.ts');
    const key = await createWebCryptoBackend(globalThis.crypto.subtle).keyFromSeed(SPEC_SEED);
    for (const id of ['1', '3', '4', '10', '11']) {
      const version = requireRoomVersion(id);
      const event = id === '1' ? { ...minimalEvent(), event_id: '$x:domain' } : minimalEvent();
      const { event: signed, eventId } = await signNewEvent(event, version, SPEC_SERVER, SPEC_KEY_ID, key);
      const reference = await hashAndSignEvent(event, version, SPEC_SERVER, SPEC_KEY_ID, key);
      expect(signed).toEqual(reference);
      expect(eventId).toBe(computeEventId(reference, version));
    }
  });
});

describe('receivedEventForms', () => {
  const key = () => createWebCryptoBackend(globalThis.crypto.subtle).keyFromSeed(SPEC_SEED);
  const sizeOf = (e: object) => new TextEncoder().encode(canonicalJson(e)).length;

  it('gives the spec vectors\' signing bytes and event IDs, and each form as its own function computes it', async () => {
    const signed4b = await hashAndSignEvent(redactableEvent(), v1, SPEC_SERVER, SPEC_KEY_ID, await key());
    const forms = receivedEventForms(signed4b, v1);
    expect(new TextDecoder().decode(forms.signingBytes)).toBe(
      '{"content":{},"event_id":"$0:domain","hashes":{"sha256":"onLKD1bGljeBWQhWZ1kaP9SorVmRQNdN5aM2JYU2n/g"},"origin":"domain","origin_server_ts":1000000,"room_id":"!r:domain","sender":"@u:domain","type":"m.room.message"}',
    );
    expect(forms.contentHashMatches).toBe(true);
    expect(forms.byteLength).toBe(sizeOf(signed4b));
    expect(await verifyEventSignatureOver(forms.signingBytes, signed4b, SPEC_SERVER, SPEC_KEY_ID, publicKey, backends[1]!)).toBe(true);
    expect(receivedEventForms({ ...signed4b, content: { body: 'changed' } }, v1).contentHashMatches).toBe(false);

    const hashed = { ...minimalEvent(), hashes: { sha256: encodeBase64(computeContentHash(minimalEvent())) } };
    expect(eventIdFromSigningBytes(receivedEventForms(hashed, requireRoomVersion('10')).signingBytes, 'urlsafe')).toBe('$8yif6p8EqgoSten2BLje9ntKm720NyFLWQv9tn8memc');
    expect(eventIdFromSigningBytes(receivedEventForms(hashed, requireRoomVersion('11')).signingBytes, 'urlsafe')).toBe('$70O_oKlXzFbkfu0KE88USi98DjSWrOELrPj-8tisl8I');
  });

  it('agrees with the separate functions on events of every kind (kept content, astral text, no content, event_id from v3 on)', async () => {
    const events = [
      { ...minimalEvent(), type: 'm.room.member', state_key: '@a:domain', content: { membership: 'join', displayname: 'Ä \u{1F408} \ud800' } },
      { ...minimalEvent(), type: 'm.room.create', state_key: '', content: { creator: '@a:domain', 'ü': 1, room_version: '11' } },
      { ...minimalEvent(), type: 'm.room.power_levels', state_key: '', content: { users: { '@a:domain': 100 }, ban: 50, other: 'x' } },
      { ...minimalEvent(), content: undefined, event_id: '$stray:domain', '\u{1F408}': 'top-level', '\uffff': 'other' },
    ];
    for (const id of ['1', '3', '6', '9', '11']) {
      const version = requireRoomVersion(id);
      for (const base of events) {
        const event = await hashAndSignEvent(id === '1' ? { ...base, event_id: '$x:domain' } : base, version, SPEC_SERVER, SPEC_KEY_ID, await key());
        const forms = receivedEventForms(event, version);
        expect(new TextDecoder().decode(forms.signingBytes)).toBe(new TextDecoder().decode(signingBytes(redactEvent(event, version))));
        expect(forms.contentHashMatches).toBe(contentHashMatches(event));
        const { event_id: _id, ...withoutId } = event as { event_id?: string };
        expect(forms.byteLength).toBe(sizeOf(version.eventIdFormat === 'local' ? event : withoutId));
        if (version.eventIdFormat !== 'local') expect(eventIdFromSigningBytes(forms.signingBytes, version.eventIdFormat)).toBe(computeEventId(event, version));
      }
    }
  });

  it('refuses what strict canonical JSON forbids, from v6 on', () => {
    const event = { ...minimalEvent(), content: { n: 1.5 } };
    expect(() => receivedEventForms(event, requireRoomVersion('6'))).toThrow(CanonicalJsonError);
    expect(receivedEventForms(event, requireRoomVersion('5')).byteLength).toBe(sizeOf(event));
  });
});
