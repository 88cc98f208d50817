import initSqlJs from 'sql.js';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultEd25519Backend } from '../../src/crypto/ed25519.ts';
import { HEARTH_KEY_ID, publicKeyFromServerName, serverNameFromPublicKey } from '../../src/crypto/identity.ts';
import { webRandomBytes } from '../../src/crypto/random.ts';
import { creationEvents } from '../../src/rooms/create-room.ts';
import { Rooms } from '../../src/rooms/rooms.ts';
import { roomsSchema } from '../../src/rooms/schema.ts';
import { openDurableDatabase } from '../../src/storage/durable-database.ts';
import { StorageError } from '../../src/storage/errors.ts';
import { streamSchema } from '../../src/storage/stream.ts';
import { indexedDbBackend, type BackendFixture } from './storage/backends.ts';
import type { PersistenceHooks, PersistenceStep } from '../../src/storage/persistence.ts';

/** Fails one append, slowly, so later sends are already built on it when it fails. */
class SlowFailure implements PersistenceHooks {
  private appends = 0;
  failAppend: number | undefined;
  at(step: PersistenceStep): void | Promise<void> {
    if (step !== 'append:start') return;
    if (++this.appends !== this.failAppend) return;
    return new Promise((_, reject) => setTimeout(() => reject(new StorageError('io_error', 'disk went away')), 50));
  }
  get count(): number {
    return this.appends;
  }
}

// Sends in one room are pipelined: the next is built while the previous one is
// made durable. When persisting fails, nothing built on the failed write may
// survive, and the room must carry on from what was stored.

let fixture: BackendFixture | undefined;
afterEach(async () => fixture?.cleanup());

async function open(faults?: PersistenceHooks) {
  fixture ??= await indexedDbBackend.create();
  const db = await openDurableDatabase({ sqlJs: await initSqlJs(), persistence: await fixture.open(faults), schemas: [streamSchema, roomsSchema] });
  const ed25519 = await defaultEd25519Backend();
  const signingKey = await ed25519.keyFromSeed(new Uint8Array(32).fill(5));
  const rooms = new Rooms({
    db, serverName: serverNameFromPublicKey(signingKey.publicKey), keyId: HEARTH_KEY_ID, signingKey, ed25519, now: Date.now, random: webRandomBytes, notify: () => {},
    resolveVerifyKey: async (name, keyId) => (keyId === HEARTH_KEY_ID ? publicKeyFromServerName(name) : undefined),
  });
  return { db, rooms };
}

describe('room writes when storage fails', () => {
  it('drops a failed write and everything built on it, then carries on', async () => {
    const faults = new SlowFailure();
    const { db, rooms } = await open(faults);
    const alice = `@alice:${rooms.serverName}`;
    const roomId = `!r:${rooms.serverName}`;
    await rooms.createRoom(roomId, '10', creationEvents({ creator: alice, creatorProfile: {} }));
    faults.failAppend = faults.count + 2;

    const sends = Array.from({ length: 6 }, (_, i) =>
      rooms.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: `m${i}` } }]).then(
        ([stored]) => ({ ok: true as const, id: stored!.event.event_id }),
        (error: unknown) => ({ ok: false as const, error }),
      ),
    );
    const results = await Promise.all(sends);
    const outcomes = results.map((r) => (r.ok ? 'ok' : r.error instanceof StorageError ? 'storage' : 'built on it'));
    // The second send fails to persist; the ones built on it while it was being written fail too.
    expect(outcomes.slice(0, 2)).toEqual(['ok', 'storage']);
    expect(outcomes.slice(2)).toContain('built on it');

    // Every acknowledged event is stored, every refused one is not (a refused send has no
    // event ID to look for, so its message is looked for by its body), and the timeline is
    // one unbroken chain of prev_events.
    const stored = await db.all<{ event_id: string; json: string }>("SELECT event_id, json FROM events WHERE room_id = ? AND type = 'm.room.message'", [roomId]);
    const storedBodies = new Map(stored.map((r) => [(JSON.parse(r.json) as { content: { body: string } }).content.body, r.event_id]));
    results.forEach((result, i) => {
      expect(storedBodies.get(`m${i}`), `m${i}`).toBe(result.ok ? result.id : undefined);
    });
    expect(storedBodies.size).toBe(results.filter((r) => r.ok).length);
    const after = await rooms.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { body: 'after' } }]);
    const chain = await db.all<{ json: string }>('SELECT json FROM events WHERE room_id = ? ORDER BY stream_ordering', [roomId]);
    const events = chain.map((r) => JSON.parse(r.json) as { event_id: string; prev_events: string[] });
    for (let i = 1; i < events.length; i++) expect(events[i]!.prev_events).toEqual([events[i - 1]!.event_id]);
    expect(events.at(-1)!.event_id).toBe(after[0]!.event.event_id);
    await db.close();

    // And it all reopens from storage the same.
    const reopened = await open();
    const reloaded = await reopened.db.all<{ event_id: string }>('SELECT event_id FROM events WHERE room_id = ? ORDER BY stream_ordering', [roomId]);
    expect(reloaded.map((r) => r.event_id)).toEqual(events.map((e) => e.event_id));
    await reopened.db.close();
  });
});
