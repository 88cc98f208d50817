// PUT /send throughput and /sync wake-up latency on the Node host, each against
// a floor measured in the same run: sign, hash and insert the same events.
import { Agent, request as httpRequest } from 'node:http';
import { defaultEd25519Backend } from '../src/crypto/ed25519.ts';
import { computeEventId, hashAndSignEvent } from '../src/events/pdu.ts';
import { requireRoomVersion } from '../src/events/room-versions.ts';
import { createHomeserver, homeserverSchemas } from '../src/homeserver.ts';
import { startHttpServer } from '../src/node/http-server.ts';
import { percentile, report } from './harness.ts';
import { openBenchDatabase } from './bench-database.ts';

const EVENTS = 1000;
const WAKEUPS = 200;

async function floor(): Promise<number> {
  // The least any homeserver must do per message: sign, hash, derive the ID, and
  // durably insert the event row with its index in one transaction.
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
  let prev = '$' + 'a'.repeat(43);
  const start = performance.now();
  for (let i = 0; i < EVENTS; i++) {
    const signed = await hashAndSignEvent({
      room_id: '!room:server', sender: '@alice:server', type: 'm.room.message', content: { msgtype: 'm.text', body: `message ${i}` },
      origin_server_ts: Date.now(), depth: i + 10, prev_events: [prev], auth_events: ['$' + 'b'.repeat(43), '$' + 'c'.repeat(43), '$' + 'd'.repeat(43)], origin: 'server',
    }, version, 'server', 'ed25519:hearth', key);
    const id = computeEventId(signed, version);
    await db.transaction((tx) => tx.run('INSERT INTO events (event_id, room_id, stream, json) VALUES (?, ?, ?, ?)', [id, '!room:server', i, JSON.stringify(signed)]));
    prev = id;
  }
  const elapsed = performance.now() - start;
  await close();
  return elapsed;
}

export async function run(): Promise<void> {
  await floor(); // warm-up
  const floorMs = await floor();
  const { db, close, kind } = await openBenchDatabase(homeserverSchemas);
  const homeserver = await createHomeserver({ database: db, seed: new Uint8Array(32).fill(9), rateLimits: false, passwordIterations: 1000 });
  const http = await startHttpServer(homeserver.fetch);
  // node:http with keep-alive: undici's fetch costs ~1 ms more per request on the client side.
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  const call = (method: string, path: string, token?: string, body?: unknown) =>
    new Promise<any>((resolve, reject) => {
      const request = httpRequest(http.url + path, {
        method, agent, headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      }, (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve(JSON.parse(text)));
      });
      request.on('error', reject);
      request.end(body === undefined ? undefined : JSON.stringify(body));
    });
  const account = await call('POST', '/_matrix/client/v3/register', undefined, { username: 'bench', password: 'bench', auth: { type: 'm.login.dummy' } });
  const token = account.access_token as string;
  const roomId = (await call('POST', '/_matrix/client/v3/createRoom', token, {})).room_id as string;
  const sendPath = (txn: string) => `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/${txn}`;
  for (let i = 0; i < 200; i++) await call('PUT', sendPath(`warm${i}`), token, { msgtype: 'm.text', body: 'warm-up' });

  const start = performance.now();
  for (let i = 0; i < EVENTS; i++) await call('PUT', sendPath(`t${i}`), token, { msgtype: 'm.text', body: `message ${i}` });
  const sendMs = performance.now() - start;

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
  agent.destroy();
  await http.close();
  await homeserver.close();
  await close();

  const perEvent = sendMs / EVENTS;
  const floorPerEvent = floorMs / EVENTS;
  report('client API on the Node host', `${EVENTS} sequential PUT /send over HTTP, ${kind} storage`, [
    ['PUT /send', 1000 / perEvent, 'events/s', `${perEvent.toFixed(2)} ms each`],
    ['floor: sign + hash + insert', 1000 / floorPerEvent, 'events/s', `${floorPerEvent.toFixed(2)} ms each`],
    ['send path / floor', perEvent / floorPerEvent, '×', 'target ≤ 3×'],
    ['/sync wake-up p50 after send completes', percentile(wakeups, 50), 'ms', 'target ≤ 5 ms'],
    ['/sync wake-up p90', percentile(wakeups, 90), 'ms'],
  ]);
}
