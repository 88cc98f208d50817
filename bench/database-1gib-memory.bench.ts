// The Node host's resident memory on a 1 GiB database (native SQLite), idle and while 10 clients
// long-poll /sync as messages arrive; the baseline in the same run is the same scenario on a fresh,
// small database. Issue 23's goals: ≤ 100 MiB idle, ≤ 150 MiB with the 10 clients.
//
// The 1 GiB is the scenario's own room plus filler: ~1 KB events of 100 other rooms, inserted
// straight through the storage layer as outliers (no stream position: no /sync ever returns them),
// so the figure says whether memory grows with what is on disk. The database is built once and kept
// under build/bench-cache/ (HEARTH_BENCH_DB_MIB sets its size, default 1024).
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../scripts/build.ts';
import { buildNodeHost } from '../scripts/build-node.ts';
import { HOST_NODE_FLAGS } from '../scripts/host-flags.ts';
import { openNativeDatabase } from '../src/node/native-database.ts';
import { homeserverSchemas } from '../src/homeserver.ts';
import { clientRequest, report } from './harness.ts';
import { folderMiB, rssMiB, startHost, stopHost, type Host } from './node-host-memory.bench.ts';

const CLIENTS = 10;
const MESSAGES = 50;
const TARGET_MIB = Number(process.env['HEARTH_BENCH_DB_MIB'] ?? 1024);
const CACHE = join(PROJECT_ROOT, 'build', 'bench-cache', `host-${TARGET_MIB}mib`);

interface Scenario {
  tokens: string[];
  roomId: string;
}

const fetchFn = (request: Request) => fetch(request);

/** Ten accounts in one room with a little history: what each run's clients sync. */
async function setUp(url: string): Promise<Scenario> {
  const tokens: string[] = [];
  for (let i = 0; i < CLIENTS; i++) {
    const account = await clientRequest(fetchFn, `${url}/_matrix/client/v3/register`, 'POST', undefined, { username: `client${i}`, password: 'bench-password-1', auth: { type: 'm.login.dummy' } });
    tokens.push(account.access_token);
  }
  const { room_id: roomId } = await clientRequest(fetchFn, `${url}/_matrix/client/v3/createRoom`, 'POST', tokens[0], { preset: 'public_chat' });
  for (const token of tokens.slice(1)) await clientRequest(fetchFn, `${url}/_matrix/client/v3/join/${encodeURIComponent(roomId)}`, 'POST', token, {});
  for (let i = 0; i < 20; i++) await send(url, tokens[i % CLIENTS]!, roomId, `history ${i}`);
  return { tokens, roomId };
}

let txn = 0;
async function send(url: string, token: string, roomId: string, body: string): Promise<string> {
  const answer = await clientRequest(fetchFn, `${url}/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/b${Date.now()}-${txn++}`, 'PUT', token, { msgtype: 'm.text', body });
  return answer.event_id as string;
}

/** Fills the stopped host's database with outlier events of other rooms until the file holds `targetMiB`. */
async function fill(dataDir: string, targetMiB: number): Promise<void> {
  const db = await openNativeDatabase({ file: join(dataDir, 'db', 'hearth.sqlite'), schemas: homeserverSchemas });
  try {
    const padding = 'x'.repeat(800);
    for (let batch = 0; ; batch++) {
      const { bytes } = (await db.get<{ bytes: number }>('SELECT page_count * page_size AS bytes FROM pragma_page_count, pragma_page_size'))!;
      if (bytes >= targetMiB * 1024 * 1024) break;
      await db.transaction((tx) => {
        for (let i = 0; i < 5000; i++) {
          const n = batch * 5000 + i;
          const roomId = `!filler${n % 100}:bench.invalid`;
          const event = { type: 'm.room.message', room_id: roomId, sender: '@filler:bench.invalid', origin_server_ts: n, depth: n, content: { msgtype: 'm.text', body: `filler ${n} ${padding}` } };
          tx.run('INSERT INTO events (event_id, room_id, type, sender, depth, origin_server_ts, json, outlier) VALUES (?, ?, ?, ?, ?, ?, ?, 1)', [`$filler${n}`, roomId, event.type, event.sender, n, n, JSON.stringify(event)]);
        }
      });
    }
  } finally {
    await db.close();
  }
}

/** The cached 1 GiB data folder, built on first use. */
async function fixture(entry: string): Promise<Scenario> {
  const marker = join(CACHE, 'scenario.json');
  if (existsSync(marker)) return JSON.parse(await readFile(marker, 'utf8')) as Scenario;
  await rm(CACHE, { recursive: true, force: true });
  await mkdir(CACHE, { recursive: true });
  const host = await startHost([...HOST_NODE_FLAGS, entry], CACHE);
  const scenario = await setUp(host.url);
  await stopHost(host);
  await fill(CACHE, TARGET_MIB);
  await writeFile(marker, JSON.stringify(scenario));
  return scenario;
}

/** Idle RSS after one client's /sync; then the peak while 10 clients long-poll /sync and 50 messages arrive, each seen by all. */
async function measure(host: Host, { tokens, roomId }: Scenario): Promise<{ idle: number; peak: number; after: number }> {
  const sync = (token: string, since?: string) =>
    clientRequest(fetchFn, `${host.url}/_matrix/client/v3/sync?timeout=${since ? 10000 : 0}${since ? `&since=${since}` : ''}`, 'GET', token);
  await sync(tokens[0]!);
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const idle = await rssMiB(host.child.pid!);
  await writeFile(`/proc/${host.child.pid}/clear_refs`, '5'); // VmHWM from here
  let last: string | undefined;
  let sending = true;
  const clients = tokens.map(async (token) => {
    let { next_batch: since } = await sync(token);
    const seen = new Set<string>();
    while (sending || !last || !seen.has(last)) {
      const answer = await sync(token, since);
      since = answer.next_batch;
      for (const event of answer.rooms?.join?.[roomId]?.timeline?.events ?? []) seen.add(event.event_id);
    }
  });
  for (let i = 0; i < MESSAGES; i++) last = await send(host.url, tokens[i % CLIENTS]!, roomId, `live ${i}`);
  sending = false;
  await Promise.all(clients);
  return { idle, peak: await rssMiB(host.child.pid!, 'VmHWM'), after: await rssMiB(host.child.pid!) };
}

export async function run(): Promise<void> {
  const entry = await buildNodeHost(undefined, { typeErrors: 'warn' });
  const small = await startHost([...HOST_NODE_FLAGS, entry]);
  const baseline = await measure(small, await setUp(small.url));
  const smallMiB = await folderMiB(join(small.dataDir, 'db'));
  await stopHost(small);

  const scenario = await fixture(entry);
  const large = await startHost([...HOST_NODE_FLAGS, entry], CACHE);
  const figures = await measure(large, scenario);
  await stopHost(large);
  const largeMiB = await folderMiB(join(CACHE, 'db'));

  report(`Node host memory on a ${(largeMiB / 1024).toFixed(2)} GiB database`, `native SQLite, the compiled host with ${HOST_NODE_FLAGS.join(' ')}; baseline: the same scenario on a fresh ${smallMiB.toFixed(1)} MiB database`, [
    ['resident idle, large database', figures.idle, 'MiB', `baseline ${baseline.idle.toFixed(0)} MiB (${(figures.idle / baseline.idle).toFixed(2)}×); goal ≤ 100 MiB`],
    [`peak with ${CLIENTS} clients long-polling /sync, ${MESSAGES} messages`, figures.peak, 'MiB', `baseline ${baseline.peak.toFixed(0)} MiB (${(figures.peak / baseline.peak).toFixed(2)}×); goal ≤ 150 MiB`],
    ['  resident after', figures.after, 'MiB', `baseline ${baseline.after.toFixed(0)} MiB`],
  ]);
}
