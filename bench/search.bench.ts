// Server-side search over 100,000 stored messages: POST /search's work (the FTS4 index,
// BM25 in JS, history visibility, formatting) for rank and recent order at three word
// frequencies, against a LIKE '%word%' scan over the same rows in the same run; the index's
// build cost per message against a plain insert of the same rows; and the index's size.
import initSqlJs from 'sql.js';
import { defaultEd25519Backend } from '../src/crypto/ed25519.ts';
import { HEARTH_KEY_ID, publicKeyFromServerName, serverNameFromPublicKey } from '../src/crypto/identity.ts';
import { webRandomBytes } from '../src/crypto/random.ts';
import { creationEvents } from '../src/rooms/create-room.ts';
import { Rooms, type StoredEvent } from '../src/rooms/rooms.ts';
import { roomsSchema } from '../src/rooms/schema.ts';
import { searchSchema } from '../src/search/schema.ts';
import { SearchIndex } from '../src/search/search-index.ts';
import { Search } from '../src/search/search.ts';
import { openSqlJsDatabase, type SqlJsDriver } from '../src/storage/sqljs-database.ts';
import { streamSchema } from '../src/storage/stream.ts';
import { EventFormatter } from '../src/sync/format.ts';
import { Visibility } from '../src/sync/visibility.ts';
import { percentile, report, type Row } from './harness.ts';

const MESSAGES = Number(process.env.HEARTH_BENCH_SEARCH_MESSAGES ?? 100_000);
const ROOMS = 5;
const BATCH = 100;
const QUERIES = 40;
const VOCABULARY = 3000;

/** A deterministic PRNG (mulberry32), so every run searches the same text. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Made-up words drawn with Zipf's law (word k has weight 1/k), as in natural text. */
function textGenerator(random: () => number) {
  const syllables = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'ti', 'vo', 'ze', 'pa', 'qu', 'el', 'an', 'or', 'is', 'um'];
  const words: string[] = [];
  const seen = new Set<string>();
  while (words.length < VOCABULARY) {
    let word = '';
    const n = 2 + Math.floor(random() * 3);
    for (let i = 0; i < n; i++) word += syllables[Math.floor(random() * syllables.length)];
    if (!seen.has(word)) {
      seen.add(word);
      words.push(word);
    }
  }
  const cumulative: number[] = [];
  let total = 0;
  for (let k = 1; k <= VOCABULARY; k++) cumulative.push((total += 1 / k));
  const pick = (): string => {
    const x = random() * total;
    let lo = 0;
    let hi = cumulative.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < x) lo = mid + 1;
      else hi = mid;
    }
    return words[lo]!;
  };
  return { words, message: () => Array.from({ length: 4 + Math.floor(random() * 13) }, pick).join(' ') };
}

async function timeQueries(fn: () => Promise<unknown>): Promise<{ p50: number; p95: number }> {
  for (let i = 0; i < 3; i++) await fn();
  const times: number[] = [];
  for (let i = 0; i < QUERIES; i++) {
    const start = performance.now();
    await fn();
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p95: percentile(times, 95) };
}

const bytesOf = (db: SqlJsDriver): number => {
  const pages = db.db.exec('PRAGMA page_count')[0]!.values[0]![0] as number;
  const size = db.db.exec('PRAGMA page_size')[0]!.values[0]![0] as number;
  return pages * size;
};

export async function run(): Promise<void> {
  const sqlJs = await initSqlJs();
  const ed25519 = await defaultEd25519Backend();
  const signingKey = await ed25519.keyFromSeed(webRandomBytes(32));
  const serverName = serverNameFromPublicKey(signingKey.publicKey);
  const db = await openSqlJsDatabase({ sqlJs, schemas: [streamSchema, roomsSchema, searchSchema] });
  const index = new SearchIndex(db);
  const rooms = new Rooms({
    db, serverName, keyId: HEARTH_KEY_ID, signingKey, ed25519, now: Date.now, random: webRandomBytes, notify: () => {},
    resolveVerifyKey: async (name, keyId) => (keyId === HEARTH_KEY_ID ? publicKeyFromServerName(name) : undefined),
    indexer: index,
  });
  const search = new Search(rooms, index, new Visibility(rooms), new EventFormatter(rooms, Date.now));

  // 100,000 messages in five rooms, stored through the room engine, which fills the index as it stores them.
  const user = `@reader:${serverName}`;
  const roomIds: string[] = [];
  for (let r = 0; r < ROOMS; r++) {
    const roomId = `!search${r}:${serverName}`;
    await rooms.createRoom(roomId, '10', creationEvents({ creator: user, creatorProfile: {}, preset: 'private_chat' }));
    roomIds.push(roomId);
  }
  const text = textGenerator(prng(14));
  const messages: StoredEvent[] = [];
  const built = performance.now();
  for (let sent = 0; sent < MESSAGES; sent += BATCH) {
    const roomId = roomIds[(sent / BATCH) % ROOMS]!;
    const templates = Array.from({ length: Math.min(BATCH, MESSAGES - sent) }, () => ({ type: 'm.room.message', sender: user, content: { msgtype: 'm.text', body: text.message() } }));
    messages.push(...(await rooms.sendEvents(roomId, templates)));
  }
  const storeMs = performance.now() - built;

  // The index alone, built again from the same events into a database of its own, against a plain table of the same rows.
  const indexDb = await openSqlJsDatabase({ sqlJs, schemas: [roomsSchema, searchSchema] });
  const indexOnly = new SearchIndex(indexDb);
  const emptyIndexBytes = bytesOf(indexDb);
  const indexStart = performance.now();
  for (let i = 0; i < messages.length; i += BATCH) await indexDb.transaction((tx) => messages.slice(i, i + BATCH).forEach((m) => indexOnly.stored(tx, m)));
  const indexMs = performance.now() - indexStart;
  const indexBytes = bytesOf(indexDb) - emptyIndexBytes;

  const plain = await openSqlJsDatabase({ sqlJs, schemas: [{ component: 'plain', migrations: [{ version: 1, description: 'messages', up: (tx) => {
    tx.run('CREATE TABLE messages (nid INTEGER PRIMARY KEY, event_id TEXT NOT NULL UNIQUE, room_id TEXT NOT NULL, sender TEXT NOT NULL, type TEXT NOT NULL, stream INTEGER NOT NULL, body TEXT)');
    tx.run('CREATE INDEX messages_by_room ON messages (room_id, stream)');
  } }] }] });
  const emptyPlainBytes = bytesOf(plain);
  const plainStart = performance.now();
  for (let i = 0; i < messages.length; i += BATCH) {
    await plain.transaction((tx) => {
      for (const m of messages.slice(i, i + BATCH)) {
        tx.run('INSERT INTO messages (nid, event_id, room_id, sender, type, stream, body) VALUES (?, ?, ?, ?, ?, ?, ?)', [
          m.nid, m.event.event_id, m.event.room_id, m.event.sender, m.event.type, m.streamOrdering, m.event.content['body'] as string,
        ]);
      }
    });
  }
  const plainMs = performance.now() - plainStart;
  const plainBytes = bytesOf(plain) - emptyPlainBytes;
  const textBytes = messages.reduce((n, m) => n + new TextEncoder().encode(m.event.content['body'] as string).length, 0);

  // Words at three frequencies: how many messages hold each.
  const holding = async (word: string) => (await plain.get<{ n: number }>("SELECT count(*) AS n FROM messages WHERE (' ' || body || ' ') LIKE ?", [`% ${word} %`]))!.n;
  const probes: { label: string; term: string; count: number }[] = [];
  for (const [label, rank] of [['common', 0], ['middling', 60], ['rare', 1500]] as const) {
    const term = text.words[rank]!;
    probes.push({ label, term, count: await holding(term) });
  }
  const viewer = { userId: user };
  const rows: Row[] = [
    ['messages stored through the room engine (index filled in the same writes)', storeMs / messages.length * 1000, 'µs/message', `${BATCH} per write, sql.js in memory`],
    ['index build: SearchIndex.stored', indexMs / messages.length * 1000, 'µs/message', `baseline: plain row insert ${(plainMs / messages.length * 1000).toFixed(1)} µs/message`],
    ['index size (FTS4 + search_events)', indexBytes / 1024 / 1024, 'MiB', `${(indexBytes / messages.length).toFixed(0)} B/message; plain rows ${(plainBytes / 1024 / 1024).toFixed(1)} MiB; text ${(textBytes / 1024 / 1024).toFixed(1)} MiB`],
  ];
  for (const probe of probes) {
    const note = `"${probe.term}" in ${probe.count} messages`;
    for (const order of ['rank', 'recent'] as const) {
      const t = await timeQueries(() => search.roomEvents(viewer, { search_term: probe.term, order_by: order, filter: { limit: 10 } }));
      rows.push([`POST /search ${probe.label}, ${order}: p50`, t.p50, 'ms', note]);
      rows.push([`POST /search ${probe.label}, ${order}: p95`, t.p95, 'ms']);
    }
    const like = await timeQueries(() => plain.all("SELECT nid FROM messages WHERE body LIKE ? AND room_id IN (?, ?, ?, ?, ?) ORDER BY stream DESC LIMIT 11", [`%${probe.term}%`, ...roomIds]));
    rows.push([`baseline LIKE '%word%' scan, ${probe.label}, recent: p50`, like.p50, 'ms', 'newest 11: stops early; no ranking, no visibility']);
    rows.push([`baseline LIKE '%word%' scan, ${probe.label}, recent: p95`, like.p95, 'ms']);
    // Counting (or ranking) with LIKE reads every row: what /search's count costs it.
    const scan = await timeQueries(() => plain.get("SELECT count(*) FROM messages WHERE body LIKE ? AND room_id IN (?, ?, ?, ?, ?)", [`%${probe.term}%`, ...roomIds]));
    rows.push([`baseline LIKE '%word%' full scan (count), ${probe.label}: p50`, scan.p50, 'ms']);
  }
  const pair = `${probes[1]!.term} ${probes[0]!.term}`;
  const both = await timeQueries(() => search.roomEvents(viewer, { search_term: pair, order_by: 'rank' }));
  rows.push([`POST /search two words (middling + common), rank: p50`, both.p50, 'ms']);
  rows.push([`POST /search two words (middling + common), rank: p95`, both.p95, 'ms']);
  report('Search', `${messages.length} messages in ${ROOMS} rooms, FTS4 unicode61, sql.js in memory, ${QUERIES} queries each`, rows);
  await Promise.all([db.close(), indexDb.close(), plain.close()]);
}
