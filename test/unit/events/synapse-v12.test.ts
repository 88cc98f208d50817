import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { decodeBase64 } from '../../../src/crypto/base64.ts';
import { defaultEd25519Backend } from '../../../src/crypto/ed25519.ts';
import { checkEventAgainstAuthEvents, checkEventAuth } from '../../../src/events/auth.ts';
import { stateKey, type RoomEvent } from '../../../src/events/event.ts';
import {
  asRoomEvent,
  authEventIds,
  computeEventId,
  contentHashMatches,
  isCreateEvent,
  referenceIds,
  roomIdOfPdu,
  verifyEventSignature,
  type PDU,
} from '../../../src/events/pdu.ts';
import { requireRoomVersion } from '../../../src/events/room-versions.ts';
import { toPdu } from '../../../src/federation/pdus.ts';

// Room version 12 as another implementation makes it: events Synapse 1.163.2 created
// (test/fixtures/synapse-v12, see its README), which Hearth must give the same event and
// room IDs, verify, and accept under the same auth rules, every one of them.

interface Fixture {
  server_name: string;
  verify_keys: Record<string, string>;
  events: { event_id: string; room_id: string; pdu: PDU }[];
}

const fixture = JSON.parse(readFileSync(fileURLToPath(new URL('../../fixtures/synapse-v12/events.json', import.meta.url)), 'utf8')) as Fixture;
const v12 = requireRoomVersion('12');
const events = fixture.events.map(({ event_id, pdu }) => asRoomEvent(pdu, event_id, v12));
const byId = new Map(events.map((e) => [e.event_id, e]));
const [keyId, publicKey] = Object.entries(fixture.verify_keys)[0]!;

describe("Synapse's room version 12 events", () => {
  it('hold no room_id on a create event and never list the create event as an auth event', () => {
    for (const { pdu, room_id } of fixture.events) {
      if (isCreateEvent(pdu)) expect(pdu.room_id).toBeUndefined();
      else expect(referenceIds(pdu.auth_events)).not.toContain('$' + room_id.slice(1));
    }
  });

  it.each(fixture.events.map((e) => [e.event_id, e] as const))('%s: gives the same event ID and room ID', (_id, { event_id, room_id, pdu }) => {
    expect(computeEventId(pdu, v12)).toBe(event_id);
    expect(roomIdOfPdu(pdu)).toBe(room_id);
    expect(asRoomEvent(pdu, event_id, v12).room_id).toBe(room_id);
  });

  it('makes each room ID the URL-safe unpadded base64 of its create event\'s reference hash', () => {
    const creates = fixture.events.filter((e) => isCreateEvent(e.pdu));
    expect(creates).toHaveLength(3);
    for (const { event_id, room_id } of creates) {
      expect(room_id).toMatch(/^![A-Za-z0-9_-]{43}$/);
      expect(room_id.slice(1)).toBe(event_id.slice(1));
    }
  });

  it('verifies every signature and content hash', async () => {
    const backend = await defaultEd25519Backend();
    for (const { pdu } of fixture.events) {
      expect(await verifyEventSignature(pdu, v12, fixture.server_name, keyId, decodeBase64(publicKey), backend)).toBe(true);
      expect(contentHashMatches(pdu)).toBe(true);
    }
  });

  it('sends each event back exactly as Synapse made it (the create event without the room ID its ID gives)', () => {
    for (const [i, event] of events.entries()) expect(toPdu(event, v12)).toEqual(fixture.events[i]!.pdu);
  });

  it('accepts every event against its own auth events (the create event implied) and the state before it', async () => {
    const verifier = await defaultEd25519Backend();
    const states = new Map<string, Map<string, RoomEvent>>();
    for (const event of events) {
      const authEvents = authEventIds(event, v12).map((id) => byId.get(id)!);
      await checkEventAgainstAuthEvents(event, authEvents, v12, verifier);
      // Each room here is one line of events: the state before an event is all the state events before it.
      const state = states.get(event.room_id) ?? new Map<string, RoomEvent>();
      await checkEventAuth(event, (type, key) => state.get(stateKey(type, key)), v12, verifier);
      if (typeof event.state_key === 'string') state.set(stateKey(event.type, event.state_key), event);
      states.set(event.room_id, state);
    }
  });

  it('refuses what Synapse refused: power levels listing a creator, and a creator kicking another', async () => {
    const verifier = await defaultEd25519Backend();
    const stateOf = (roomId: string) => {
      const state = new Map<string, RoomEvent>();
      for (const e of events) if (e.room_id === roomId && typeof e.state_key === 'string') state.set(stateKey(e.type, e.state_key), e);
      return (type: string, key: string) => state.get(stateKey(type, key));
    };
    const [publicRoom, trustedRoom] = fixture.events.filter((e) => isCreateEvent(e.pdu)).map((e) => e.room_id);
    const alice = '@alice:synapse.test';
    const unsigned = (roomId: string, fields: Partial<RoomEvent>): RoomEvent =>
      ({ room_id: roomId, sender: alice, origin_server_ts: 0, content: {}, prev_events: [], auth_events: [], depth: 99, hashes: { sha256: '' }, signatures: {}, event_id: '$made-up', type: 'm.room.message', ...fields }) as RoomEvent;
    const listsCreator = unsigned(publicRoom!, { type: 'm.room.power_levels', state_key: '', content: { users: { [alice]: 100 } } });
    await expect(checkEventAuth(listsCreator, stateOf(publicRoom!), v12, verifier)).rejects.toThrow(/creator/);
    const kick = unsigned(trustedRoom!, { type: 'm.room.member', state_key: '@bob:synapse.test', content: { membership: 'leave' } });
    await expect(checkEventAuth(kick, stateOf(trustedRoom!), v12, verifier)).rejects.toThrow(/may not kick/);
  });
});
