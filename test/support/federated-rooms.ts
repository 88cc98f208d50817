// Two room engines sharing a room as federation would make them, without the
// federation layer: a join from afar (make_join/send_join) and a Backfiller that
// takes history from the other engine (/backfill). Both engines are real.
import initSqlJs from 'sql.js';
import { defaultEd25519Backend, type SigningKey } from '../../src/crypto/ed25519.ts';
import { HEARTH_KEY_ID, publicKeyFromServerName, serverNameFromPublicKey } from '../../src/crypto/identity.ts';
import { webRandomBytes } from '../../src/crypto/random.ts';
import { stateKey } from '../../src/events/event.ts';
import { referenceIds, signNewEvent, type PDU } from '../../src/events/pdu.ts';
import { requireRoomVersion } from '../../src/events/room-versions.ts';
import { Rooms, type StoredEvent } from '../../src/rooms/rooms.ts';
import { roomsSchema } from '../../src/rooms/schema.ts';
import { TIMELINE_END, TIMELINE_START } from '../../src/rooms/timeline.ts';
import { openSqlJsDatabase } from '../../src/storage/sqljs-database.ts';
import { streamSchema } from '../../src/storage/stream.ts';
import type { Backfiller } from '../../src/sync/history.ts';

/** A server's room engine with the key it signs with. */
export interface RoomServer {
  rooms: Rooms;
  signingKey: SigningKey;
}

/** A room engine of its own server, with its own database and key. */
export async function roomServer(): Promise<RoomServer & { db: Awaited<ReturnType<typeof openSqlJsDatabase>> }> {
  const ed25519 = await defaultEd25519Backend();
  const signingKey = await ed25519.keyFromSeed(webRandomBytes(32));
  const db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [streamSchema, roomsSchema] });
  const rooms = new Rooms({
    db, serverName: serverNameFromPublicKey(signingKey.publicKey), keyId: HEARTH_KEY_ID, signingKey, ed25519, now: Date.now, random: webRandomBytes, notify: () => {},
    resolveVerifyKey: async (name, keyId) => (keyId === HEARTH_KEY_ID ? publicKeyFromServerName(name) : undefined),
  });
  return { rooms, signingKey, db };
}

/** What a PDU looks like on the wire (room versions 3+ carry no event_id). */
export const wire = (stored: StoredEvent): PDU => {
  const { event_id: _id, ...pdu } = stored.event;
  return pdu;
};

/** The newest timeline event of a room. */
export async function newestEvent(rooms: Rooms, roomId: string): Promise<StoredEvent> {
  for await (const stored of rooms.timeline.paginate(roomId, TIMELINE_END, 'b', TIMELINE_START, 1)) return stored;
  throw new Error(`room ${roomId} has no timeline`);
}

/**
 * Joins a user of `local` to a public room (version 10) that lives on `remote`, as
 * make_join and send_join do: the local server signs the join, the remote accepts
 * it, and the local engine takes the room's state (as outliers) without its history.
 */
export async function joinFromAfar(remote: Rooms, local: RoomServer, roomId: string, userId: string): Promise<StoredEvent> {
  const version = requireRoomVersion('10');
  const state = await remote.currentState(roomId);
  const latest = await newestEvent(remote, roomId);
  const auth = ['m.room.create', 'm.room.power_levels', 'm.room.join_rules'].map((type) => state.get(stateKey(type, ''))!.event.event_id);
  const { event } = await signNewEvent({
    room_id: roomId, sender: userId, type: 'm.room.member', state_key: userId, content: { membership: 'join' },
    origin_server_ts: Date.now(), depth: latest.event.depth + 1, prev_events: [latest.event.event_id], auth_events: auth, origin: local.rooms.serverName,
  }, version, local.rooms.serverName, HEARTH_KEY_ID, local.signingKey);
  const join = event as unknown as PDU;
  await remote.receiveEvent(join);
  await local.rooms.trackRemoteRoom(roomId, version.id);
  const stateEvents = [...state.values()].sort((a, b) => a.event.depth - b.event.depth);
  for (const stored of stateEvents) await local.rooms.receiveEvent(wire(stored), { outlier: true });
  return local.rooms.receiveEvent(join, { stateBefore: stateEvents.map((e) => e.event.event_id) });
}

/** A Backfiller that takes history from another engine, as /backfill would, and records its calls. */
export function backfillFrom(remote: Rooms, local: Rooms): Backfiller & { calls: { fromEventIds: string[]; limit: number }[] } {
  const calls: { fromEventIds: string[]; limit: number }[] = [];
  // Auth chains and state come along as outliers, as /backfill and /state_ids would bring them.
  const hold = async (eventId: string): Promise<void> => {
    if (await local.getEvent(eventId)) return;
    const stored = (await remote.getEvent(eventId))!;
    for (const id of referenceIds(stored.event.auth_events)) await hold(id);
    await local.receiveEvent(wire(stored), { outlier: true });
  };
  return {
    calls,
    async backfill(roomId, fromEventIds, limit) {
      calls.push({ fromEventIds, limit });
      // Breadth first from the given events over prev events: the given ones first, then older.
      const queue = [...fromEventIds];
      const seen = new Set<string>();
      const found: StoredEvent[] = [];
      while (queue.length > 0 && found.length < limit) {
        const id = queue.shift()!;
        if (seen.has(id)) continue;
        seen.add(id);
        const stored = await remote.getEvent(id);
        if (!stored || stored.event.room_id !== roomId) continue;
        found.push(stored);
        queue.push(...referenceIds(stored.event.prev_events));
      }
      let added = 0;
      for (const stored of found) {
        const held = await local.getEvent(stored.event.event_id);
        if (held && !held.outlier) continue;
        const stateBefore = [...(await remote.loadStateEvents((await remote.stateAtEvent(stored.event.event_id, 'before'))!)).values()].map((e) => e.event.event_id);
        for (const id of [...stateBefore, ...referenceIds(stored.event.auth_events)]) await hold(id);
        await local.receiveEvent(wire(stored), { backfilled: true, stateBefore });
        added++;
      }
      return added;
    },
  };
}
