// Sliding sync's first screen against an initial /sync, for a user with 500 rooms of 20 messages, in one run
// on the same database: the first sliding sync answer for 20 rooms (1 event each), an initial /sync of the
// same account (its baseline), the ratio, and an incremental sliding sync after one new message.
import { createHomeserver, homeserverSchemas } from '../src/homeserver.ts';
import { openBenchDatabase } from './bench-database.ts';
import { clientRequest, percentile, report } from './harness.ts';

const ROOMS = 500;
const MESSAGES = 20;
const FIRST_SCREENS = 30;
const SYNCS = 5;
const INCREMENTALS = 100;
const BASE = 'http://hearth.bench';
const SS = `${BASE}/_matrix/client/unstable/org.matrix.simplified_msc3575/sync`;

const firstScreen = { lists: { rooms: { ranges: [[0, 19]], timeline_limit: 1, required_state: [['m.room.name', ''], ['m.room.avatar', ''], ['m.room.encryption', ''], ['m.room.member', '$ME']] } } };

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

export async function run(): Promise<void> {
  const { db, close, kind } = await openBenchDatabase(homeserverSchemas);
  const homeserver = await createHomeserver({ database: db, seed: new Uint8Array(32).fill(5), rateLimits: false, passwordIterations: 1000 });
  const call = (method: string, url: string, token?: string, body?: unknown) => clientRequest((r) => homeserver.fetch(r), url, method, token, body);
  const user = await call('POST', `${BASE}/_matrix/client/v3/register`, undefined, { username: 'many', password: 'bench password', auth: { type: 'm.login.dummy' } });
  const token = user.access_token as string;
  const roomIds: string[] = [];
  for (let i = 0; i < ROOMS; i++) {
    const { room_id: roomId } = await call('POST', `${BASE}/_matrix/client/v3/createRoom`, token, { name: `room ${i}` });
    // The room's messages in one write: the fill is not what is measured.
    await homeserver.services.rooms.sendEvents(roomId, Array.from({ length: MESSAGES }, (_, m) => ({ type: 'm.room.message', sender: user.user_id, content: { msgtype: 'm.text', body: `message ${m} in room ${i}` } })));
    roomIds.push(roomId);
  }

  // Each first screen is a new connection (no pos), as a client opening.
  const first: number[] = [];
  for (let i = 0; i < FIRST_SCREENS; i++) {
    first.push(await timed(async () => {
      const answer = await call('POST', SS, token, { ...firstScreen, conn_id: `c${i}` });
      if (Object.keys(answer.rooms).length !== 20) throw new Error('expected 20 rooms');
    }));
  }
  const full: number[] = [];
  for (let i = 0; i < SYNCS; i++) {
    full.push(await timed(async () => {
      const answer = await call('GET', `${BASE}/_matrix/client/v3/sync`, token);
      if (Object.keys(answer.rooms.join).length !== ROOMS) throw new Error(`expected ${ROOMS} rooms`);
    }));
  }

  // One connection kept: a message, then its answer.
  let pos = (await call('POST', SS, token, { ...firstScreen, conn_id: 'live' })).pos as string;
  const incremental: number[] = [];
  for (let i = 0; i < INCREMENTALS; i++) {
    await call('PUT', `${BASE}/_matrix/client/v3/rooms/${encodeURIComponent(roomIds[i % ROOMS]!)}/send/m.room.message/inc${i}`, token, { msgtype: 'm.text', body: `new ${i}` });
    incremental.push(await timed(async () => {
      const answer = await call('POST', `${SS}?pos=${pos}`, token, { ...firstScreen, conn_id: 'live' });
      if (Object.keys(answer.rooms).length !== 1) throw new Error('expected the one room');
      pos = answer.pos;
    }));
  }
  // The floor under an incremental answer: one durable commit of a position's size (a row and a room's row).
  await db.transaction((tx) => void tx.run('CREATE TABLE bench_commit (id INTEGER PRIMARY KEY, a INTEGER, b TEXT)'));
  const commits: number[] = [];
  for (let i = 0; i < INCREMENTALS; i++) {
    commits.push(await timed(() => db.transaction((tx) => {
      tx.run('INSERT INTO bench_commit (a, b) VALUES (?, ?)', [i, '{"subscriptions":{},"extensions":{}}']);
      tx.run('INSERT INTO bench_commit (a, b) VALUES (?, ?)', [i, '[]']);
    })));
  }
  await homeserver.close();
  await close();

  const p50 = (xs: number[]) => percentile([...xs].sort((a, b) => a - b), 50);
  const ratio = p50(full) / p50(first);
  report('sliding sync', `${ROOMS} rooms × ${MESSAGES} messages, ${kind}, through the client API in process`, [
    ['first sliding sync, 20 rooms × 1 event, p50', p50(first), 'ms', `p95 ${percentile([...first].sort((a, b) => a - b), 95).toFixed(1)} ms`],
    ['initial /sync, same user (baseline), p50', p50(full), 'ms'],
    ['initial /sync ÷ first sliding sync', ratio, '×', 'goal ≥ 10×'],
    ['incremental sliding sync after one message, p50', p50(incremental), 'ms', `p95 ${percentile([...incremental].sort((a, b) => a - b), 95).toFixed(2)} ms; goal ≤ 5 ms`],
    ['  floor: one durable commit of two rows, p50', p50(commits), 'ms', `the answer is ${(p50(incremental) / p50(commits)).toFixed(1)}× it`],
  ]);
}
