import initSqlJs from 'sql.js';
import { beforeEach, describe, expect, it } from 'vitest';
import { defaultEd25519Backend } from '../crypto/ed25519.ts';
import { HEARTH_KEY_ID, publicKeyFromServerName, serverNameFromPublicKey } from '../crypto/identity.ts';
import { webRandomBytes } from '../crypto/random.ts';
import { stateKey } from '../events/event.ts';
import { hashAndSignEvent, type PDU } from '../events/pdu.ts';
import { requireRoomVersion } from '../events/room-versions.ts';
import type { Database } from '../storage/database.ts';
import { applyMigrations } from '../storage/migrations.ts';
import { openSqlJsDatabase } from '../storage/sqljs-database.ts';
import { streamSchema } from '../storage/stream.ts';
import { creationEvents } from './create-room.ts';
import { Rooms, type StoredEvent } from './rooms.ts';
import { roomsSchema } from './schema.ts';

// The relations index as the room engine keeps it: filled in the write that stores an
// event from this server or another, never for rejected or soft-failed events, emptied of
// redacted children, and rebuilt from the events table by its migration.

async function server(): Promise<{ rooms: Rooms; db: Database }> {
  const ed25519 = await defaultEd25519Backend();
  const signingKey = await ed25519.keyFromSeed(webRandomBytes(32));
  const serverName = serverNameFromPublicKey(signingKey.publicKey);
  const db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [streamSchema, roomsSchema] });
  const rooms = new Rooms({
    db, serverName, keyId: HEARTH_KEY_ID, signingKey, ed25519, now: Date.now, random: webRandomBytes, notify: () => {},
    resolveVerifyKey: async (name, keyId) => (keyId === HEARTH_KEY_ID ? publicKeyFromServerName(name) : undefined),
  });
  return { rooms, db };
}

const wire = (stored: StoredEvent): PDU => {
  const { event_id: _id, ...pdu } = stored.event;
  return pdu;
};

let a: { rooms: Rooms; db: Database };
let b: { rooms: Rooms; db: Database };
let alice: string;
let bob: string;
let roomId: string;
let parent: StoredEvent;

beforeEach(async () => {
  [a, b] = [await server(), await server()];
  alice = `@alice:${a.rooms.serverName}`;
  bob = `@bob:${b.rooms.serverName}`;
  roomId = `!room:${a.rooms.serverName}`;
  const history = await a.rooms.createRoom(roomId, '10', creationEvents({ creator: alice, creatorProfile: {}, preset: 'public_chat' }));
  await b.rooms.trackRemoteRoom(roomId, '10');
  for (const e of history) await b.rooms.receiveEvent(wire(e));
  const [join] = await b.rooms.sendEvents(roomId, [{ type: 'm.room.member', sender: bob, state_key: bob, content: { membership: 'join' } }]);
  await a.rooms.receiveEvent(wire(join!));
  parent = (await a.rooms.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: 'parent' } }]))[0]!;
  await b.rooms.receiveEvent(wire(parent));
});

const reaction = (key: string) => ({ 'm.relates_to': { rel_type: 'm.annotation', event_id: parent.event.event_id, key } });
const indexed = async (db: Database) => (await db.all<{ event_id: string; rel_type: string; aggregation_key: string | null }>('SELECT event_id, rel_type, aggregation_key FROM event_relations ORDER BY stream_ordering'));

/** A message from bob whose auth events leave out his membership: rejected wherever it arrives. */
async function unauthorised(content: Record<string, unknown>): Promise<PDU> {
  const state = await a.rooms.currentState(roomId);
  const authIds = [stateKey('m.room.create', ''), stateKey('m.room.power_levels', '')].map((k) => state.get(k)!.event.event_id);
  const key = (b.rooms as unknown as { options: { signingKey: Parameters<typeof hashAndSignEvent>[4] } }).options.signingKey;
  return (await hashAndSignEvent(
    { room_id: roomId, type: 'm.reaction', sender: bob, content, origin_server_ts: Date.now(), depth: parent.event.depth + 1, prev_events: [parent.event.event_id], auth_events: authIds, origin: b.rooms.serverName },
    requireRoomVersion('10'), b.rooms.serverName, HEARTH_KEY_ID, key,
  )) as unknown as PDU;
}

describe('relations index', () => {
  it('holds relations sent here and those from another server, not rejected or soft-failed ones', async () => {
    const [mine] = await a.rooms.sendEvents(roomId, [{ type: 'm.reaction', sender: alice, content: reaction('👍') }]);
    const [bobs] = await b.rooms.sendEvents(roomId, [{ type: 'm.reaction', sender: bob, content: reaction('🎉') }]);
    const received = await a.rooms.receiveEvent(wire(bobs!));
    expect(received.rejected).toBeNull();
    const rejected = await a.rooms.receiveEvent(await unauthorised(reaction('💥')));
    expect(rejected.rejected).toBeTruthy();
    // Soft-failed: bob reacts on his server while alice bans him on hers.
    const [late] = await b.rooms.sendEvents(roomId, [{ type: 'm.reaction', sender: bob, content: reaction('👀') }]);
    await a.rooms.sendEvents(roomId, [{ type: 'm.room.member', sender: alice, state_key: bob, content: { membership: 'ban' } }]);
    expect((await a.rooms.receiveEvent(wire(late!))).softFailed).toBe(true);

    expect(await indexed(a.db)).toEqual([
      { event_id: mine!.event.event_id, rel_type: 'm.annotation', aggregation_key: '👍' },
      { event_id: bobs!.event.event_id, rel_type: 'm.annotation', aggregation_key: '🎉' },
    ]);
    const summary = (await a.rooms.relations.summaries([parent.event.event_id], bob)).get(parent.event.event_id);
    expect(summary?.get('m.annotation')).toEqual({ count: 2, mine: 1 });
  });

  it('drops a redacted child, on this server and on the one the redaction reaches', async () => {
    const [reply] = await a.rooms.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: 'in the thread', 'm.relates_to': { rel_type: 'm.thread', event_id: parent.event.event_id } } }]);
    await b.rooms.receiveEvent(wire(reply!));
    expect(await b.rooms.relations.isThreadRoot(parent.event.event_id)).toBe(true);
    const [redaction] = await a.rooms.sendEvents(roomId, [{ type: 'm.room.redaction', sender: alice, content: { redacts: reply!.event.event_id }, redacts: reply!.event.event_id }]);
    await b.rooms.receiveEvent(wire(redaction!));
    expect(await indexed(a.db)).toEqual([]);
    expect(await indexed(b.db)).toEqual([]);
  });

  it("is rebuilt from the events table by its migration (a database from before the index)", async () => {
    await a.rooms.sendEvents(roomId, [{ type: 'm.reaction', sender: alice, content: reaction('👍') }]);
    await a.rooms.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: 'edit', 'm.relates_to': { rel_type: 'm.replace', event_id: parent.event.event_id } } }]);
    const before = await indexed(a.db);
    expect(before).toHaveLength(2);
    await a.db.transaction((tx) => {
      // As before version 3: later migrations (the bump-stamp index of version 4, the scoped transaction IDs of version 5,
      // the backfilled-events index of version 6, the redactions of version 7) not applied either.
      tx.run('DROP TABLE event_relations');
      tx.run('DROP TABLE redactions');
      tx.run('DROP INDEX events_by_room_type_stream');
      tx.run('DROP INDEX events_backfilled');
      tx.run("DELETE FROM schema_migrations WHERE component = 'rooms' AND version >= 3");
      applyMigrations(tx, [roomsSchema], Date.now());
    });
    expect(await indexed(a.db)).toEqual(before);
  });

  it('refuses a second identical annotation inside the write, even when both are sent at once', async () => {
    const results = await Promise.allSettled([1, 2].map(() => a.rooms.sendEvents(roomId, [{ type: 'm.reaction', sender: alice, content: reaction('👍') }])));
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    const failure = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(failure.reason).toMatchObject({ code: 'duplicate_annotation' });
    expect(await indexed(a.db)).toHaveLength(1);
  });
});
