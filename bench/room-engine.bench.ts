// Events per second through the room engine (signature and hash checks, auth,
// state, store) for events arriving from another server, against the bare cost
// of storing the same events, measured in the same run.
import { defaultEd25519Backend } from '../src/crypto/ed25519.ts';
import { HEARTH_KEY_ID, publicKeyFromServerName, serverNameFromPublicKey } from '../src/crypto/identity.ts';
import { webRandomBytes } from '../src/crypto/random.ts';
import type { PDU } from '../src/events/pdu.ts';
import { creationEvents } from '../src/rooms/create-room.ts';
import { Rooms, type EventTemplate, type StoredEvent } from '../src/rooms/rooms.ts';
import { roomsSchema } from '../src/rooms/schema.ts';
import { streamSchema } from '../src/storage/stream.ts';
import { openBenchDatabase } from './bench-database.ts';
import { report } from './harness.ts';

const MESSAGES = 2000;
const MEMBERS = 200;
const BATCH = 50;

async function engine() {
  const ed25519 = await defaultEd25519Backend();
  const signingKey = await ed25519.keyFromSeed(webRandomBytes(32));
  const serverName = serverNameFromPublicKey(signingKey.publicKey);
  const { db, close } = await openBenchDatabase([streamSchema, roomsSchema]);
  const rooms = new Rooms({
    db, serverName, keyId: HEARTH_KEY_ID, signingKey, ed25519, now: Date.now, random: webRandomBytes, notify: () => {},
    resolveVerifyKey: async (name, keyId) => (keyId === HEARTH_KEY_ID ? publicKeyFromServerName(name) : undefined),
  });
  return { rooms, db, close };
}

const wire = (stored: StoredEvent): PDU => {
  const { event_id: _id, ...pdu } = stored.event;
  return pdu;
};

export async function run(): Promise<void> {
  // The origin builds a room with many members and a long run of messages and state changes.
  const origin = await engine();
  const roomId = `!bench:${origin.rooms.serverName}`;
  const creator = `@creator:${origin.rooms.serverName}`;
  const events: StoredEvent[] = await origin.rooms.createRoom(roomId, '10', creationEvents({ creator, creatorProfile: {}, preset: 'public_chat' }));
  for (let i = 0; i < MEMBERS; i++) {
    const user = `@user${i}:${origin.rooms.serverName}`;
    events.push(...(await origin.rooms.sendEvents(roomId, [{ type: 'm.room.member', sender: user, state_key: user, content: { membership: 'join' } }])));
  }
  for (let i = 0; i < MESSAGES; i++) {
    const sender = `@user${i % MEMBERS}:${origin.rooms.serverName}`;
    const template: EventTemplate = i % 50 === 0
      ? { type: 'm.room.member', sender, state_key: sender, content: { membership: 'join', displayname: `user ${i}` } }
      : { type: 'm.room.message', sender, content: { msgtype: 'm.text', body: `message ${i}` } };
    events.push(...(await origin.rooms.sendEvents(roomId, [template])));
  }
  const pdus = events.map(wire);

  // Bare storage: the same events inserted with their index rows, one transaction each.
  const bareStore = async (batch: number): Promise<number> => {
    const bare = await openBenchDatabase([{ component: 'bare', migrations: [{ version: 1, description: 'events', up: (tx) => {
      tx.run('CREATE TABLE events (nid INTEGER PRIMARY KEY, event_id TEXT UNIQUE, room_id TEXT, type TEXT, state_key TEXT, stream INTEGER UNIQUE, json TEXT)');
      tx.run('CREATE INDEX events_by_room ON events (room_id, stream)');
    } }] }]);
    const started = performance.now();
    for (let from = 0; from < events.length; from += batch) {
      await Promise.all(events.slice(from, from + batch).map((stored, j) => bare.db.transaction((tx) => tx.run(
        'INSERT INTO events (event_id, room_id, type, state_key, stream, json) VALUES (?, ?, ?, ?, ?, ?)',
        [stored.event.event_id, roomId, stored.event.type, stored.event.state_key ?? null, from + j, JSON.stringify(pdus[from + j])],
      ))));
    }
    const elapsed = performance.now() - started;
    await bare.close();
    return elapsed;
  };

  // The receiving server takes every event through the full input path. In a
  // batch (as a federation /send transaction carries up to 50 PDUs) the engine
  // keeps them in order, one at a time per room, while it verifies the next ones
  // and makes the previous ones durable.
  let stateSize = 0;
  const throughEngine = async (batch: number): Promise<number> => {
    const receiver = await engine();
    await receiver.rooms.trackRemoteRoom(roomId, '10');
    const started = performance.now();
    for (let from = 0; from < pdus.length; from += batch) {
      await Promise.all(pdus.slice(from, from + batch).map((pdu) => receiver.rooms.receiveEvent(pdu)));
    }
    const elapsed = performance.now() - started;
    stateSize = (await receiver.rooms.currentState(roomId)).size;
    await receiver.close();
    return elapsed;
  };

  const engineOne = await throughEngine(1);
  const bareOne = await bareStore(1);
  const engineBatch = await throughEngine(BATCH);
  const bareBatch = await bareStore(BATCH);
  await origin.close();
  const rate = (ms: number) => (pdus.length / ms) * 1000;
  const each = (ms: number) => `${(ms / pdus.length).toFixed(3)} ms each`;

  report('room engine input', `${pdus.length} events from another server into a room of ${MEMBERS} members`, [
    ['one at a time: through the room engine', rate(engineOne), 'events/s', `${each(engineOne)}: verify, auth ×3, state, store`],
    ['one at a time: bare store', rate(bareOne), 'events/s', each(bareOne)],
    ['one at a time: engine / bare store', engineOne / bareOne, '×'],
    [`in batches of ${BATCH}: through the room engine`, rate(engineBatch), 'events/s', each(engineBatch)],
    [`in batches of ${BATCH}: bare store (group commit)`, rate(bareBatch), 'events/s', each(bareBatch)],
    [`in batches of ${BATCH}: engine / bare store`, engineBatch / bareBatch, '×'],
    ['current state entries at the end', stateSize, 'entries'],
  ]);
}
