import initSqlJs from 'sql.js';
import { describe, expect, it } from 'vitest';
import { defaultEd25519Backend, type SigningKey } from '../crypto/ed25519.ts';
import { HEARTH_KEY_ID, publicKeyFromServerName, serverNameFromPublicKey } from '../crypto/identity.ts';
import { webRandomBytes } from '../crypto/random.ts';
import { computeEventId, referenceIds, roomIdOfPdu, signNewEvent, type PDU } from '../events/pdu.ts';
import { requireRoomVersion } from '../events/room-versions.ts';
import { toPdu } from '../federation/pdus.ts';
import { openSqlJsDatabase } from '../storage/sqljs-database.ts';
import { streamSchema } from '../storage/stream.ts';
import { createRoom, creationEvents, type CreateRoomRequest } from './create-room.ts';
import { RoomError } from './errors.ts';
import { Rooms } from './rooms.ts';
import { roomsSchema } from './schema.ts';

// The room engine with room version 12: room IDs from the create event's hash, creators
// kept out of the power levels, and a v12 room carried to another engine as federation would.

const v12 = requireRoomVersion('12');

const keys = new Map<string, SigningKey>();

/** One homeserver's room engine; `now` fixed when given, so two creations can collide. Its key is in `keys`. */
async function server(now: () => number = Date.now): Promise<Rooms> {
  const ed25519 = await defaultEd25519Backend();
  const signingKey = await ed25519.keyFromSeed(webRandomBytes(32));
  keys.set(serverNameFromPublicKey(signingKey.publicKey), signingKey);
  const serverName = serverNameFromPublicKey(signingKey.publicKey);
  const db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [streamSchema, roomsSchema] });
  return new Rooms({
    db, serverName, keyId: HEARTH_KEY_ID, signingKey, ed25519, now, random: webRandomBytes, notify: () => {},
    resolveVerifyKey: async (name, keyId) => (keyId === HEARTH_KEY_ID ? publicKeyFromServerName(name) : undefined),
  });
}

const request = (rooms: Rooms, extra: Partial<CreateRoomRequest> = {}): CreateRoomRequest => ({
  creator: `@alice:${rooms.serverName}`, creatorProfile: {}, preset: 'public_chat', room_version: '12', ...extra,
});

describe('creating a room of version 12', () => {
  it('takes the create event\'s ID as the room ID, keeps it on the stored create event, and sends it without', async () => {
    const rooms = await server();
    const { roomId, events } = await createRoom(rooms, webRandomBytes, request(rooms));
    const [create, ...rest] = events.map((e) => e.event);
    expect(roomId).toMatch(/^![A-Za-z0-9_-]{43}$/);
    expect(create!.event_id).toBe('$' + roomId.slice(1));
    expect(create!.room_id).toBe(roomId);
    const onTheWire = toPdu(create!, v12);
    expect('room_id' in onTheWire).toBe(false);
    expect(computeEventId(onTheWire, v12)).toBe(create!.event_id);
    for (const event of rest) {
      expect(event.room_id).toBe(roomId);
      expect(referenceIds(event.auth_events)).not.toContain(create!.event_id);
    }
    expect((await rooms.roomVersion(roomId))?.id).toBe('12');
    expect((await rooms.currentStateEvent(roomId, 'm.room.create', ''))?.event.event_id).toBe(create!.event_id);
  });

  it('makes another room of the same creation in the same millisecond, its create event a millisecond earlier', async () => {
    const rooms = await server(() => 1_800_000_000_000);
    const first = await createRoom(rooms, webRandomBytes, request(rooms));
    const second = await createRoom(rooms, webRandomBytes, request(rooms));
    expect(second.roomId).not.toBe(first.roomId);
    expect(first.events[0]!.event.origin_server_ts).toBe(1_800_000_000_000);
    expect(second.events[0]!.event.origin_server_ts).toBe(1_799_999_999_999);
  });

  it('a room ID is given before v12 and never from v12', async () => {
    const rooms = await server();
    await expect(rooms.createRoom(undefined, '11', creationEvents(request(rooms, { room_version: '11' })))).rejects.toThrow(/needs a room ID/);
    await expect(rooms.createRoom(`!mine:${rooms.serverName}`, '12', creationEvents(request(rooms)))).rejects.toThrow(/create event's/);
  });
});

describe('the events that make a room of version 12', () => {
  const alice = '@alice:example.org';
  const bob = '@bob:example.org';
  const carol = '@carol:elsewhere.org';
  const contentOf = (templates: ReturnType<typeof creationEvents>, type: string) => templates.find((t) => t.type === type)!.content;

  it('list no creator in the power levels and need 150 to upgrade; v11 lists the creator at 100 and needs 100', () => {
    const twelve = creationEvents({ creator: alice, creatorProfile: {}, room_version: '12' });
    expect(contentOf(twelve, 'm.room.power_levels')['users']).toEqual({});
    expect((contentOf(twelve, 'm.room.power_levels')['events'] as Record<string, number>)['m.room.tombstone']).toBe(150);
    expect(contentOf(twelve, 'm.room.create')).toEqual({ room_version: '12' });
    const eleven = creationEvents({ creator: alice, creatorProfile: {}, room_version: '11' });
    expect(contentOf(eleven, 'm.room.power_levels')['users']).toEqual({ [alice]: 100 });
    expect((contentOf(eleven, 'm.room.power_levels')['events'] as Record<string, number>)['m.room.tombstone']).toBe(100);
  });

  it('make the invitees of a trusted private chat additional creators, with those asked for, once each', () => {
    const templates = creationEvents({
      creator: alice, creatorProfile: {}, room_version: '12', preset: 'trusted_private_chat', invite: [bob, carol], creation_content: { additional_creators: [carol, alice] },
    });
    expect(contentOf(templates, 'm.room.create')['additional_creators']).toEqual([carol, bob]);
    expect(contentOf(templates, 'm.room.power_levels')['users']).toEqual({});
    // v11: the invitees are listed at 100 instead, and additional_creators is only content.
    const eleven = creationEvents({ creator: alice, creatorProfile: {}, room_version: '11', preset: 'trusted_private_chat', invite: [bob] });
    expect(contentOf(eleven, 'm.room.power_levels')['users']).toEqual({ [alice]: 100, [bob]: 100 });
    expect(contentOf(eleven, 'm.room.create')['additional_creators']).toBeUndefined();
  });

  it('refuse additional_creators that are not user IDs, and power levels overridden to list a creator', () => {
    expect(() => creationEvents({ creator: alice, creatorProfile: {}, room_version: '12', creation_content: { additional_creators: ['bob'] } })).toThrow(RoomError);
    expect(() => creationEvents({ creator: alice, creatorProfile: {}, room_version: '12', creation_content: { additional_creators: bob } })).toThrow(/additional_creators/);
    expect(() => creationEvents({ creator: alice, creatorProfile: {}, room_version: '12', power_level_content_override: { users: { [alice]: 100 } } })).toThrow(/creator/);
    expect(() => creationEvents({ creator: alice, creatorProfile: {}, room_version: '12', creation_content: { additional_creators: [bob] }, power_level_content_override: { users: { [bob]: 50 } } })).toThrow(/creator/);
    expect(() => creationEvents({ creator: alice, creatorProfile: {}, room_version: '12', power_level_content_override: { users: { [carol]: 100 } } })).not.toThrow();
  });
});

describe('a room of version 12 on another server', () => {
  it('takes its state as outliers (the create event without room_id) and its events live, to the same state', async () => {
    const a = await server();
    const b = await server();
    const alice = `@alice:${a.serverName}`;
    const { roomId, events } = await createRoom(a, webRandomBytes, request(a));
    const [message] = await a.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { msgtype: 'm.text', body: 'hi' } }]);
    await b.trackRemoteRoom(roomId, '12');
    // Dependents first: the engine orders a batch by auth events, the implied create event included.
    const answers = await b.receiveOutliers(roomId, events.map((e) => toPdu(e.event, v12)).reverse());
    expect(answers.every((answer) => answer && !answer.refused)).toBe(true);
    expect((await b.getEvent(events[0]!.event.event_id))?.event.room_id).toBe(roomId);
    const stored = await b.receiveEvent(toPdu(message!.event, v12), { stateBefore: events.map((e) => e.event.event_id).filter((id) => id !== undefined) });
    expect(stored.rejected).toBeNull();
    const state = async (rooms: Rooms) => [...(await rooms.currentState(roomId)).values()].map((s) => s.event.event_id).sort();
    expect(await state(b)).toEqual(await state(a));
  });

  it('rejects a create event signed with a room_id of its own (rule 1.2), and refuses one whose room_id was added after signing', async () => {
    const a = await server();
    const b = await server();
    const alice = `@alice:${a.serverName}`;
    const { roomId, events } = await createRoom(a, webRandomBytes, request(a));
    // Added on the way: the signature no longer covers the event.
    await b.trackRemoteRoom(roomId, '12');
    const [added] = await b.receiveOutliers(roomId, [{ ...toPdu(events[0]!.event, v12), room_id: roomId }]);
    expect(added?.refused?.message).toMatch(/no valid signature/);
    // Signed so by its server: a valid event that the auth rules reject.
    const claimed = '!' + 'C'.repeat(43);
    const { event } = await signNewEvent(
      { room_id: claimed, sender: alice, type: 'm.room.create', state_key: '', content: { room_version: '12' }, origin_server_ts: 1, depth: 1, prev_events: [], auth_events: [] },
      v12, a.serverName, HEARTH_KEY_ID, keys.get(a.serverName)!,
    );
    expect(roomIdOfPdu(event as unknown as PDU)).toBe(claimed);
    await b.trackRemoteRoom(claimed, '12');
    const [answer] = await b.receiveOutliers(claimed, [event as unknown as PDU]);
    expect(answer?.refused).toBeUndefined();
    expect((await b.getEvent(answer!.eventId))?.rejected).toMatch(/has a room_id/);
  });
});
