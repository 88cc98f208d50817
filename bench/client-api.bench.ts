// PUT /send throughput and /sync wake-up latency on the Node host, each against
// a floor measured in the same run: sign, hash and durably insert the same events.
// The HTTP client runs in another process, as a real client does.
// HEARTH_BENCH_PROFILE_DIR writes a CPU profile of the host's process during the
// one-at-a-time sends (and of the floor's sequential run) there.
import { fork } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultEd25519Backend } from '../src/crypto/ed25519.ts';
import { computeEventId, hashAndSignEvent } from '../src/events/pdu.ts';
import { requireRoomVersion } from '../src/events/room-versions.ts';
import { createHomeserver, homeserverSchemas } from '../src/homeserver.ts';
import { startHttpServer } from '../src/node/http-server.ts';
import { openBenchDatabase } from './bench-database.ts';
import { percentile, report } from './harness.ts';

const EVENTS = 1000;
const CONCURRENCY = 8;
const WAKEUPS = 200;

/**
 * The least any homeserver must do per message: sign it, hash it, derive its ID,
 * and durably insert the event row with its index, `concurrency` at a time.
 */
async function floor(concurrency: number): Promise<number> {
  const ed25519 = await defaultEd25519Backend();
  const key = await ed25519.keyFromSeed(new Uint8Array(32).fill(3));
  const version = requireRoomVersion('10');
  const { db, close } = await openBenchDatabase([{
    component: 'floor',
    migrations: [{ version: 1, description: 'events', up: (tx) => {
      tx.run('CREATE TABLE events (nid INTEGER PRIMARY KEY, event_id TEXT UNIQUE, room_id TEXT, stream INTEGER, json TEXT)');
      tx.run('CREATE INDEX events_room ON events (room_id, stream)');
    } }],
  }]);
  let next = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < EVENTS) {
      const i = next++;
      const signed = await hashAndSignEvent({
        room_id: '!room:server', sender: '@alice:server', type: 'm.room.message', content: { msgtype: 'm.text', body: `message ${i}` },
        origin_server_ts: Date.now(), depth: i + 10, prev_events: ['$' + 'a'.repeat(43)], auth_events: ['$' + 'b'.repeat(43), '$' + 'c'.repeat(43), '$' + 'd'.repeat(43)], origin: 'server',
      }, version, 'server', 'ed25519:hearth', key);
      const id = computeEventId(signed, version);
      await db.transaction((tx) => tx.run('INSERT INTO events (event_id, room_id, stream, json) VALUES (?, ?, ?, ?)', [id, '!room:server', i, JSON.stringify(signed)]));
    }
  }));
  const elapsed = performance.now() - start;
  await close();
  return elapsed;
}

/** Runs `fn` under V8's CPU profiler when HEARTH_BENCH_PROFILE_DIR is set, writing `<name>.cpuprofile` there. */
async function profiled<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const dir = process.env.HEARTH_BENCH_PROFILE_DIR;
  if (!dir) return fn();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  try {
    return await fn();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(join(dir, `${name}.cpuprofile`), JSON.stringify(profile));
    session.disconnect();
  }
}

function loadGenerator(job: { url: string; token: string; paths: string[]; body: string; concurrency: number }): Promise<{ elapsedMs: number; latencies: number[] }> {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(new URL('./load-generator.ts', import.meta.url)), [], { execArgv: ['--import', 'tsx'] });
    child.once('message', (result) => resolve(result as { elapsedMs: number; latencies: number[] }));
    child.once('error', reject);
    child.send(job);
  });
}

export async function run(): Promise<void> {
  await floor(1); // warm-up
  const floorSequential = await profiled('floor', () => floor(1));
  const floorConcurrent = await floor(CONCURRENCY);

  const { db, close, kind } = await openBenchDatabase(homeserverSchemas);
  const homeserver = await createHomeserver({ database: db, seed: new Uint8Array(32).fill(9), rateLimits: false, passwordIterations: 1000 });
  // Server-side time per request, to tell the server's share from the transport's.
  const serverTimes: number[] = [];
  const http = await startHttpServer(async (request) => {
    const started = performance.now();
    const response = await homeserver.fetch(request);
    if (request.method === 'PUT') serverTimes.push(performance.now() - started);
    return response;
  });
  const call = async (method: string, path: string, token?: string, body?: unknown) => {
    const response = await fetch(http.url + path, {
      method, headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return (await response.json()) as any;
  };
  const account = await call('POST', '/_matrix/client/v3/register', undefined, { username: 'bench', password: 'bench', auth: { type: 'm.login.dummy' } });
  const token = account.access_token as string;
  // Events in one room are built one after another (each names the previous one),
  // so concurrent senders go to separate rooms, as concurrent users do.
  const rooms: string[] = [];
  for (let i = 0; i < CONCURRENCY; i++) rooms.push((await call('POST', '/_matrix/client/v3/createRoom', token, {})).room_id as string);
  const roomId = rooms[0]!;
  const sendPath = (txn: string, room = roomId) => `/_matrix/client/v3/rooms/${encodeURIComponent(room)}/send/m.room.message/${txn}`;
  const body = JSON.stringify({ msgtype: 'm.text', body: 'a message of ordinary length, say forty-odd characters' });
  const paths = (prefix: string, n: number, spread = 1) => Array.from({ length: n }, (_, i) => sendPath(`${prefix}${i}`, rooms[i % spread]));

  await loadGenerator({ url: http.url, token, paths: paths('warm', 200), body, concurrency: 1 });
  serverTimes.length = 0;
  const sequential = await profiled('send', () => loadGenerator({ url: http.url, token, paths: paths('s', EVENTS), body, concurrency: 1 }));
  const serverSequential = serverTimes.splice(0).sort((a, b) => a - b);
  const concurrent = await loadGenerator({ url: http.url, token, paths: paths('c', EVENTS, CONCURRENCY), body, concurrency: CONCURRENCY });
  // The same HTTP round trip with nothing durable behind it: an authenticated PUT with a JSON body
  // (typing off), so the send's cost splits into the transport and framework's and the engine's.
  const typingPath = `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/typing/${encodeURIComponent(account.user_id as string)}`;
  const noop = await loadGenerator({ url: http.url, token, paths: Array.from({ length: EVENTS }, () => typingPath), body: JSON.stringify({ typing: false }), concurrency: 1 });

  // Wake-up: a long-poll is waiting; measure from the send's response to the sync's response.
  let since = (await call('GET', '/_matrix/client/v3/sync?timeout=0', token)).next_batch as string;
  const wakeups: number[] = [];
  for (let i = 0; i < WAKEUPS; i++) {
    const polling = call('GET', `/_matrix/client/v3/sync?timeout=30000&since=${since}`, token).then((r) => ({ r, at: performance.now() }));
    await new Promise((resolve) => setTimeout(resolve, 5));
    await call('PUT', sendPath(`w${i}`), token, { msgtype: 'm.text', body: `wake ${i}` });
    const sentAt = performance.now();
    const { r, at } = await polling;
    since = r.next_batch;
    wakeups.push(at - sentAt);
  }
  wakeups.sort((x, y) => x - y);
  await http.close();
  await homeserver.close();
  await close();

  const perSend = sequential.elapsedMs / EVENTS;
  const perFloor = floorSequential / EVENTS;
  const sorted = sequential.latencies.sort((a, b) => a - b);
  report('client API on the Node host', `${EVENTS} PUT /send over HTTP from another thread, ${kind}`, [
    ['PUT /send, one at a time', 1000 / perSend, 'events/s', `${perSend.toFixed(2)} ms each, p50 ${percentile(sorted, 50).toFixed(2)} ms, p95 ${percentile(sorted, 95).toFixed(2)} ms`],
    ['  of which in the homeserver (request in → response out)', percentile(serverSequential, 50), 'ms p50', `mean ${(serverSequential.reduce((a, b) => a + b, 0) / serverSequential.length).toFixed(2)} ms; the rest is HTTP over loopback and the client`],
    ['floor, one at a time: sign + hash + insert', 1000 / perFloor, 'events/s', `${perFloor.toFixed(2)} ms each`],
    ['send path / floor, one at a time', perSend / perFloor, '×', 'issue 23: ≤ 2×'],
    ['  an authenticated no-op PUT (typing off), one at a time', noop.elapsedMs / EVENTS, 'ms each', `the transport, HTTP and framework alone; the send beyond it: ${(perSend - noop.elapsedMs / EVENTS).toFixed(2)} ms, ${((perSend - noop.elapsedMs / EVENTS) / perFloor).toFixed(2)}× the floor`],
    [`PUT /send, ${CONCURRENCY} in flight (${CONCURRENCY} rooms)`, (EVENTS / concurrent.elapsedMs) * 1000, 'events/s'],
    [`floor, ${CONCURRENCY} in flight`, (EVENTS / floorConcurrent) * 1000, 'events/s'],
    [`send path / floor, ${CONCURRENCY} in flight`, concurrent.elapsedMs / floorConcurrent, '×', 'target ≤ 3×'],
    ['/sync wake-up p50 after send completes', percentile(wakeups, 50), 'ms', 'target ≤ 5 ms'],
    ['/sync wake-up p90', percentile(wakeups, 90), 'ms'],
  ]);
}
