import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import initSqlJs from 'sql.js';
import { describe, expect, it } from 'vitest';
import type { RoomEvent } from '../events/event.ts';
import { defaultEd25519Backend } from '../crypto/ed25519.ts';
import { HEARTH_KEY_ID, publicKeyFromServerName, serverNameFromPublicKey } from '../crypto/identity.ts';
import { webRandomBytes } from '../crypto/random.ts';
import { creationEvents } from '../rooms/create-room.ts';
import { Rooms, type StoredEvent } from '../rooms/rooms.ts';
import { roomsSchema } from '../rooms/schema.ts';
import type { Database } from '../storage/database.ts';
import { streamSchema } from '../storage/stream.ts';
import { openDurableDatabase } from '../storage/durable-database.ts';
import { openIndexedDbPersistence } from '../storage/indexeddb-persistence.ts';
import { openSqlJsDatabase } from '../storage/sqljs-database.ts';
import { parseSearchTerm } from './query.ts';
import { bm25 } from './rank.ts';
import { searchSchema } from './schema.ts';
import { SearchIndex } from './search-index.ts';

function stored(nid: number, content: Record<string, unknown>, extra: Partial<StoredEvent> = {}): StoredEvent {
  const event = { event_id: `$e${nid}`, room_id: '!r:hs', sender: '@a:hs', type: 'm.room.message', content, depth: nid, origin_server_ts: 0 } as unknown as RoomEvent;
  return { nid, event, streamOrdering: nid, stateSnapshot: 1, replacesState: null, outlier: false, rejected: null, softFailed: false, redactedBy: null, ...extra };
}

async function openIndex() {
  const db = await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [roomsSchema, searchSchema] });
  const index = new SearchIndex(db);
  const nids = async (term: string) => (await index.candidates(parseSearchTerm(term).match!, { roomIds: ['!r:hs'] })).map((c) => c.nid).sort((a, b) => a - b);
  return { db, index, nids };
}

describe('search terms as FTS4 queries', () => {
  it('quotes nothing the client wrote as syntax: words become lower-case prefixes, phrases stay phrases', () => {
    expect(parseSearchTerm('Martians AND men').match).toBe('martians* and* men*');
    expect(parseSearchTerm('"martians and men" -bob').match).toBe('"martians and men" NOT bob*');
    expect(parseSearchTerm('a OR b c').match).toBe('(a* OR b*) c*');
    expect(parseSearchTerm('NEAR* :) "" -only').match).toBe('near* NOT only*');
    expect(parseSearchTerm(':) "" -only').match).toBeUndefined();
    expect(parseSearchTerm('e-mail').match).toBe('"e mail"');
    expect(parseSearchTerm('Crème', ['content.body']).match).toBe('body:crème*');
    expect(parseSearchTerm('"two words"', ['content.name', 'content.topic']).match).toBe('("two words" (name:two OR topic:two) (name:words OR topic:words))');
    expect(parseSearchTerm('Crème Brûlée').words).toEqual(['crème', 'brûlée']);
  });
});

describe('the search index', () => {
  it('indexes accepted events with a body, name or topic, and leaves the rest out', async () => {
    const { db, index, nids } = await openIndex();
    await db.transaction((tx) => {
      index.stored(tx, stored(1, { body: 'hello world' }));
      index.stored(tx, stored(2, { name: 'hello room' }));
      index.stored(tx, stored(3, { topic: 'say hello' }));
      index.stored(tx, stored(4, { body: 'hello rejected' }, { rejected: 'auth' }));
      index.stored(tx, stored(5, { body: 'hello soft' }, { softFailed: true, streamOrdering: null }));
      index.stored(tx, stored(6, { body: 'hello outlier' }, { outlier: true, streamOrdering: null, stateSnapshot: null }));
      index.stored(tx, stored(7, { membership: 'join' }));
      index.stored(tx, stored(8, { body: 42 }));
    });
    expect(await nids('hello')).toEqual([1, 2, 3]);
    expect(await index.rows()).toBe(3);
  });

  it('takes out a redacted event and one rejected after all, and takes in a promoted outlier', async () => {
    const { db, index, nids } = await openIndex();
    await db.transaction((tx) => {
      index.stored(tx, stored(1, { body: 'zeppelin one' }));
      index.stored(tx, stored(2, { body: 'zeppelin two' }));
      index.stored(tx, stored(3, { body: 'zeppelin three' }, { outlier: true, streamOrdering: null }));
    });
    expect(await nids('zeppelin')).toEqual([1, 2]);
    await db.transaction((tx) => {
      index.dropped(tx, '$e1');
      // Rejected after all: the room engine tells the index it is dropped.
      index.dropped(tx, '$e2');
      index.stored(tx, stored(3, { body: 'zeppelin three' }));
    });
    expect(await nids('zeppelin')).toEqual([3]);
  });

  it('ranks with BM25 over matchinfo: rarer words and denser matches score higher', async () => {
    const { db, index } = await openIndex();
    await db.transaction((tx) => {
      index.stored(tx, stored(1, { body: 'common rare' }));
      index.stored(tx, stored(2, { body: 'common words in a much longer message about nothing rare at all' }));
      for (let n = 3; n < 20; n++) index.stored(tx, stored(n, { body: `common filler ${n}` }));
    });
    const score = async (term: string) => new Map((await index.candidates(parseSearchTerm(term).match!, { roomIds: ['!r:hs'] })).map((c) => [c.nid, bm25(c.matchinfo)]));
    const rare = await score('rare');
    expect(rare.get(1)!).toBeGreaterThan(rare.get(2)!);
    const common = await score('common');
    expect(rare.get(1)!).toBeGreaterThan(common.get(1)!);
    expect(await index.matchedWords(parseSearchTerm('RAR').match!, [1, 2])).toEqual(['rare']);
  });
});

describe('the first index (issue 37: the migration read the room engine\'s table)', () => {
  /** A room engine over `db`, as the composition root builds it. */
  async function roomEngine(db: Database, indexer?: SearchIndex) {
    const ed25519 = await defaultEd25519Backend();
    const signingKey = await ed25519.keyFromSeed(new Uint8Array(32).fill(7));
    const serverName = serverNameFromPublicKey(signingKey.publicKey);
    return new Rooms({
      db, serverName, keyId: HEARTH_KEY_ID, signingKey, ed25519, now: Date.now, random: webRandomBytes, notify: () => {},
      resolveVerifyKey: async (name, keyId) => (keyId === HEARTH_KEY_ID ? publicKeyFromServerName(name) : undefined),
      ...(indexer ? { indexer } : {}),
    });
  }

  it('indexes, through the room engine\'s API, the accepted events a server held before search existed, a batch per write', async () => {
    const sqlJs = await initSqlJs();
    // A server from before search: its events are in the room engine's table only.
    const before = await openSqlJsDatabase({ sqlJs, schemas: [streamSchema, roomsSchema] });
    const early = await roomEngine(before);
    const alice = `@alice:${early.serverName}`;
    const roomId = (await early.createRoom(undefined, '12', creationEvents({ creator: alice, creatorProfile: {}, preset: 'private_chat', room_version: '12', name: 'zeppelin room' })))[0]!.event.room_id;
    const say = async (body: string) => (await early.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { msgtype: 'm.text', body } }]))[0]!.event.event_id;
    await say('an old zeppelin');
    const redacted = await say('a redacted zeppelin');
    await early.sendEvents(roomId, [{ type: 'm.room.redaction', sender: alice, content: { redacts: redacted }, redacts: redacted }]);
    for (let i = 0; i < 5; i++) await say(`zeppelin number ${i}`);

    const after = await openSqlJsDatabase({ sqlJs, schemas: [streamSchema, roomsSchema, searchSchema], image: (before.freeStatements(), before.db.export()) });
    const index = new SearchIndex(after);
    const rooms = await roomEngine(after, index);
    // Before the first index runs, a new event reaches the index through the hook; the first index leaves it as it is.
    await rooms.sendEvents(roomId, [{ type: 'm.room.message', sender: alice, content: { msgtype: 'm.text', body: 'a new zeppelin' } }]);
    const found = async () => {
      const nids = (await index.candidates(parseSearchTerm('zeppelin').match!, { roomIds: [roomId] })).map((c) => c.nid);
      return Promise.all(nids.map(async (nid) => (await rooms.getEventByNid(nid))!.event.content['body'] ?? (await rooms.getEventByNid(nid))!.event.content['name']));
    };
    expect(await found()).toEqual(['a new zeppelin']);
    const writes: number[] = [];
    await index.buildFirstIndex({ replayTimeline: (afterNid, limit, take) => (writes.push(afterNid), rooms.replayTimeline(afterNid, limit, take)) }, 4);
    expect((await found()).sort()).toEqual(['a new zeppelin', 'an old zeppelin', 'zeppelin number 0', 'zeppelin number 1', 'zeppelin number 2', 'zeppelin number 3', 'zeppelin number 4', 'zeppelin room']);
    expect(writes.length).toBeGreaterThan(2);
    // Done once: the next start reads nothing of the room engine.
    writes.length = 0;
    await index.buildFirstIndex({ replayTimeline: (afterNid, limit, take) => (writes.push(afterNid), rooms.replayTimeline(afterNid, limit, take)) }, 4);
    expect(writes).toEqual([]);
  });
});

describe('the index on durable storage', () => {
  it('comes back whole after a restart, from the snapshot and from the redo log the FTS4 writes went into', async () => {
    const sqlJs = await initSqlJs();
    const factory = new IDBFactory();
    const open = async () => openDurableDatabase({ sqlJs, persistence: await openIndexedDbPersistence({ name: 'search', indexedDB: factory, locks: null }), schemas: [roomsSchema, searchSchema] });
    const first = await open();
    const index = new SearchIndex(first);
    await first.transaction((tx) => index.stored(tx, stored(1, { body: 'before the snapshot' })));
    await first.snapshot();
    await first.transaction((tx) => index.stored(tx, stored(2, { body: 'after the snapshot' })));
    await first.transaction((tx) => index.dropped(tx, '$e1'));
    await first.close();

    const second = await open();
    expect(second.stats().replayedAtOpen).toBe(2);
    const nids = async (term: string) => (await new SearchIndex(second).candidates(parseSearchTerm(term).match!, { roomIds: ['!r:hs'] })).map((c) => c.nid);
    expect(await nids('snapshot')).toEqual([2]);
    expect(await nids('before')).toEqual([]);
    await second.close();
  });
});
