import initSqlJs from 'sql.js';
import type { JsonObject } from '../crypto/canonical-json.ts';
import { beforeEach, describe, expect, it } from 'vitest';
import { defaultEd25519Backend } from '../crypto/ed25519.ts';
import { HEARTH_KEY_ID, serverNameFromPublicKey } from '../crypto/identity.ts';
import { webRandomBytes } from '../crypto/random.ts';
import { openSqlJsDatabase } from '../storage/sqljs-database.ts';
import { streamSchema } from '../storage/stream.ts';
import { deleteRoomAlias, setRoomVisibility } from './directory-admin.ts';
import { RoomError } from './errors.ts';
import { currentPowerLevels, requireLeftBeforeForget, requireMayDeleteAlias, requireMayPublish, requireMayRedact, requireMembershipToChange, requireOwnAliases, requireSendableRelation } from './room-policy.ts';
import { Rooms, type EventTemplate } from './rooms.ts';
import { roomsSchema } from './schema.ts';

let rooms: Rooms;
let alice: string;
let bob: string;

beforeEach(async () => {
  const ed25519 = await defaultEd25519Backend();
  const signingKey = await ed25519.keyFromSeed(webRandomBytes(32));
  const serverName = serverNameFromPublicKey(signingKey.publicKey);
  const db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [streamSchema, roomsSchema] });
  rooms = new Rooms({ db, serverName, keyId: HEARTH_KEY_ID, signingKey, ed25519, now: Date.now, random: webRandomBytes, notify: () => {}, resolveVerifyKey: async () => undefined });
  alice = `@alice:${serverName}`;
  bob = `@bob:${serverName}`;
});

/** A room of the given version with only its create event and the creator's join: no power levels event. */
async function roomWithoutPowerLevels(version: string, createContent: Record<string, unknown>): Promise<string> {
  const roomId = `!r${version}:${rooms.serverName}`;
  const templates: EventTemplate[] = [
    { type: 'm.room.create', sender: alice, state_key: '', content: { room_version: version, ...createContent } },
    { type: 'm.room.member', sender: alice, state_key: alice, content: { membership: 'join' } },
  ];
  await rooms.createRoom(roomId, version, templates);
  return roomId;
}

const refusal = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error);

describe('room policy: the power levels in force', () => {
  it('in v11, the creator (level 100 without power levels) is the create event sender, whatever content.creator says', async () => {
    const roomId = await roomWithoutPowerLevels('11', { creator: bob });
    const levels = await currentPowerLevels(rooms, roomId);
    expect(levels.user(alice)).toBe(100);
    expect(levels.user(bob)).toBe(0);
    await requireMayPublish(rooms, roomId, alice);
    const error = await refusal(requireMayPublish(rooms, roomId, bob));
    expect(error).toBeInstanceOf(RoomError);
    expect(error).toMatchObject({ code: 'forbidden', message: 'You may not change the room directory' });
  });

  it('before v11, the creator is content.creator', async () => {
    const roomId = await roomWithoutPowerLevels('10', { creator: alice });
    expect((await currentPowerLevels(rooms, roomId)).user(alice)).toBe(100);
    expect((await currentPowerLevels(rooms, roomId)).user(bob)).toBe(0);
  });

  it('reads stringy levels in the versions that allow them', async () => {
    const roomId = await roomWithoutPowerLevels('9', { creator: alice });
    await rooms.sendEvents(roomId, [{ type: 'm.room.power_levels', sender: alice, state_key: '', content: { users: { [alice]: '100', [bob]: ' 40 ' }, redact: '40', state_default: '60' } }]);
    const [message] = await rooms.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: 'hi' } }]);
    await requireMayRedact(rooms, roomId, bob, message!);
    expect(await refusal(requireMayPublish(rooms, roomId, bob))).toMatchObject({ code: 'forbidden' });
    await requireMayPublish(rooms, roomId, alice);
  });
});

describe('room policy: redaction, aliases, the directory', () => {
  let roomId: string;
  beforeEach(async () => {
    roomId = await roomWithoutPowerLevels('11', {});
    await rooms.sendEvents(roomId, [
      { type: 'm.room.power_levels', sender: alice, state_key: '', content: { users: { [alice]: 100 }, redact: 50, events: { 'm.room.canonical_alias': 50 } } },
      { type: 'm.room.join_rules', sender: alice, state_key: '', content: { join_rule: 'public' } },
    ]);
    await rooms.sendEvents(roomId, [{ type: 'm.room.member', sender: bob, state_key: bob, content: { membership: 'join' } }]);
  });

  it('lets anyone redact their own events and only the redact level redact others', async () => {
    const [mine] = await rooms.sendEvents(roomId, [{ type: 'm.room.message', sender: bob, content: { body: 'mine' } }]);
    const [theirs] = await rooms.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: 'theirs' } }]);
    await requireMayRedact(rooms, roomId, bob, mine!);
    await requireMayRedact(rooms, roomId, alice, mine!);
    expect(await refusal(requireMayRedact(rooms, roomId, bob, theirs!))).toMatchObject({ code: 'forbidden', message: 'You may not redact other users\' events' });
  });

  it('lets the alias creator or the canonical-alias level delete an alias, and takes it out of m.room.canonical_alias', async () => {
    const [mine, theirs] = [`#bob:${rooms.serverName}`, `#alice:${rooms.serverName}`];
    await rooms.createAlias(mine, roomId, bob);
    await rooms.createAlias(theirs, roomId, alice);
    await rooms.sendEvents(roomId, [{ type: 'm.room.canonical_alias', sender: alice, state_key: '', content: { alias: theirs, alt_aliases: [mine] } }]);
    await requireMayDeleteAlias(rooms, mine, roomId, bob);
    expect(await refusal(deleteRoomAlias(rooms, theirs, bob))).toMatchObject({ code: 'forbidden', message: 'You may not delete this alias' });
    expect(await refusal(deleteRoomAlias(rooms, `#none:${rooms.serverName}`, bob))).toMatchObject({ code: 'not_found' });

    // bob may not change the canonical alias event: his alias goes, the event stays.
    await deleteRoomAlias(rooms, mine, bob);
    expect(await rooms.resolveAlias(mine)).toBeUndefined();
    expect((await rooms.currentStateEvent(roomId, 'm.room.canonical_alias', ''))?.event.content).toEqual({ alias: theirs, alt_aliases: [mine] });

    await deleteRoomAlias(rooms, theirs, alice);
    expect(await rooms.resolveAlias(theirs)).toBeUndefined();
    expect((await rooms.currentStateEvent(roomId, 'm.room.canonical_alias', ''))?.event.content).toEqual({ alt_aliases: [mine] });
  });

  it('kicks only someone in the room and unbans only someone banned; bans anyone', async () => {
    const carol = `@carol:${rooms.serverName}`;
    await requireMembershipToChange(rooms, roomId, bob, 'kick');
    expect(await refusal(requireMembershipToChange(rooms, roomId, carol, 'kick'))).toMatchObject({ code: 'forbidden', message: `${carol} is not in the room` });
    expect(await refusal(requireMembershipToChange(rooms, roomId, bob, 'unban'))).toMatchObject({ code: 'forbidden', message: `${bob} is not banned` });
    await requireMembershipToChange(rooms, roomId, carol, 'ban');
    await rooms.sendEvents(roomId, [{ type: 'm.room.member', sender: alice, state_key: carol, content: { membership: 'invite' } }]);
    await requireMembershipToChange(rooms, roomId, carol, 'kick');
    await rooms.sendEvents(roomId, [{ type: 'm.room.member', sender: alice, state_key: carol, content: { membership: 'ban' } }]);
    await requireMembershipToChange(rooms, roomId, carol, 'unban');
    expect(await refusal(requireMembershipToChange(rooms, roomId, carol, 'kick'))).toMatchObject({ code: 'forbidden' });
  });

  it('forgets a room only once left', async () => {
    expect(await refusal(requireLeftBeforeForget(rooms, roomId, bob))).toMatchObject({ code: 'still_in_room', status: 400, errcode: 'M_UNKNOWN' });
    await rooms.sendEvents(roomId, [{ type: 'm.room.member', sender: bob, state_key: bob, content: { membership: 'leave' } }]);
    await requireLeftBeforeForget(rooms, roomId, bob);
    await requireLeftBeforeForget(rooms, `!unknown:${rooms.serverName}`, bob);
  });

  it('lets only the state_default level list the room', async () => {
    expect(await refusal(setRoomVisibility(rooms, roomId, bob, 'public'))).toMatchObject({ code: 'forbidden' });
    await setRoomVisibility(rooms, roomId, alice, 'public');
    expect(await rooms.isPublished(roomId)).toBe(true);
    await setRoomVisibility(rooms, roomId, alice, 'private');
    expect(await rooms.isPublished(roomId)).toBe(false);
    expect(await refusal(setRoomVisibility(rooms, `!unknown:${rooms.serverName}`, alice, 'public'))).toMatchObject({ code: 'not_found', message: 'Unknown room' });
  });
});

describe('room policy: what a client may send', () => {
  it('a relation: an annotation with a string key of at most 500 characters, to an event of the same room, and no thread from a child', async () => {
    const roomId = await roomWithoutPowerLevels('11', {});
    const otherRoom = await roomWithoutPowerLevels('10', { creator: alice });
    const [root] = await rooms.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { msgtype: 'm.text', body: 'root' } }]);
    const [reply] = await rooms.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { msgtype: 'm.text', body: 'in thread', 'm.relates_to': { rel_type: 'm.thread', event_id: root!.event.event_id } } }]);
    const annotation = (eventId: string, key: string | number): JsonObject => ({ 'm.relates_to': { rel_type: 'm.annotation', event_id: eventId, key } });
    const thread = (eventId: string): JsonObject => ({ 'm.relates_to': { rel_type: 'm.thread', event_id: eventId } });
    await requireSendableRelation(rooms, roomId, 'm.reaction', annotation(root!.event.event_id, '👍'));
    await requireSendableRelation(rooms, roomId, 'm.room.message', thread(root!.event.event_id));
    for (const [target, type, content, message] of [
      [roomId, 'm.reaction', annotation(root!.event.event_id, 5), 'an annotation needs a string key'],
      [roomId, 'm.reaction', annotation(root!.event.event_id, 'k'.repeat(501)), 'the annotation key is too long'],
      [otherRoom, 'm.reaction', annotation(root!.event.event_id, '👍'), 'relations must be in the same room'],
      [roomId, 'm.room.message', thread(reply!.event.event_id), 'cannot start a thread from an event with a relation'],
    ] as const) {
      expect(await refusal(requireSendableRelation(rooms, target, type, content as never))).toMatchObject({ status: 400, errcode: 'M_BAD_JSON', message });
    }
  });

  it('a canonical alias: only valid aliases that point to this room', async () => {
    const roomId = await roomWithoutPowerLevels('11', {});
    const otherRoom = await roomWithoutPowerLevels('10', { creator: alice });
    const ours = `#ours:${rooms.serverName}`;
    const theirs = `#theirs:${rooms.serverName}`;
    await rooms.createAlias(ours, roomId, alice);
    await rooms.createAlias(theirs, otherRoom, alice);
    await requireOwnAliases(rooms, roomId, { alias: ours, alt_aliases: [ours] });
    expect(await refusal(requireOwnAliases(rooms, roomId, { alias: 'no alias' }))).toMatchObject({ status: 400, errcode: 'M_INVALID_PARAM' });
    expect(await refusal(requireOwnAliases(rooms, roomId, { alias: ours, alt_aliases: [theirs] }))).toMatchObject({ status: 400, errcode: 'M_BAD_ALIAS' });
  });
});
