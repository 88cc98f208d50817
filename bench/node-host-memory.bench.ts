// The Node host's resident memory, as production runs it (the compiled JavaScript,
// `npm run serve`): idle after start-up, then after 10,000 stored events, beside the
// database's size on disk. The baseline in the same run is the same host started with
// the TypeScript loader (tsx), which is what production no longer pays for.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../scripts/build.ts';
import { buildNodeHost } from '../scripts/build-node.ts';
import { clientRequest, report } from './harness.ts';

const EVENTS = 10_000;
const CONCURRENCY = 8;

interface Host {
  child: ChildProcess;
  url: string;
  dataDir: string;
}

/** Starts a host on an OS-chosen port; resolves once it printed its data folder (its last start-up line). */
async function startHost(command: string[]): Promise<Host> {
  const dataDir = await mkdtemp(join(tmpdir(), 'hearth-bench-memory-'));
  const child = spawn(process.execPath, [...command, '--port', '0', '--data', dataDir, '--no-rate-limits'], { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const url = /listening on (http:\S+)/.exec(output)?.[1];
      if (url && /^data: /m.test(output)) resolve(url);
    });
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code) => reject(new Error(`the host exited (${code}) before it was up:\n${output}`)));
  });
  return { child, url, dataDir };
}

async function stopHost(host: Host): Promise<void> {
  const exited = new Promise((resolve) => host.child.once('exit', resolve));
  host.child.kill('SIGTERM');
  await exited;
  await rm(host.dataDir, { recursive: true, force: true });
}

/** Resident set size of a process in MiB (Linux: /proc/<pid>/status). */
async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1]);
  return kib / 1024;
}

async function folderMiB(dir: string): Promise<number> {
  let bytes = 0;
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) bytes += (await stat(join(entry.parentPath, entry.name))).size;
  }
  return bytes / 1024 / 1024;
}

/** Registers, creates a room and says hello: a host that has served a client, then left idle. */
async function warmUp(url: string): Promise<{ token: string; roomId: string }> {
  const fetchFn = (request: Request) => fetch(request);
  const account = await clientRequest(fetchFn, `${url}/_matrix/client/v3/register`, 'POST', undefined, { username: 'bench', password: 'bench-password-1', auth: { type: 'm.login.dummy' } });
  const { room_id: roomId } = await clientRequest(fetchFn, `${url}/_matrix/client/v3/createRoom`, 'POST', account.access_token, {});
  return { token: account.access_token, roomId };
}

export async function run(): Promise<void> {
  const entry = await buildNodeHost(undefined, { typeErrors: 'warn' });

  // Baseline: the same host under the TypeScript loader, idle after the same warm-up.
  const loaded = await startHost(['--import', 'tsx', 'src/node/serve.ts']);
  await warmUp(loaded.url);
  const loaderIdle = await rssMiB(loaded.child.pid!);
  await stopHost(loaded);

  const host = await startHost([entry]);
  const { token, roomId } = await warmUp(host.url);
  const idle = await rssMiB(host.child.pid!);
  const fetchFn = (request: Request) => fetch(request);
  let next = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    for (let i = next++; i < EVENTS; i = next++) {
      await clientRequest(fetchFn, `${host.url}/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/m${i}`, 'PUT', token, { msgtype: 'm.text', body: `message ${i} of the memory benchmark` });
    }
  }));
  const elapsedS = (performance.now() - started) / 1000;
  const loadedRss = await rssMiB(host.child.pid!);
  const database = await folderMiB(host.dataDir);
  await stopHost(host);

  const semi = await semiSpaceCost(entry);

  report('Node host memory', `compiled JavaScript, ${EVENTS.toLocaleString('en')} messages through the client API`, [
    ['resident, idle after start-up', idle, 'MiB', `${(idle / loaderIdle).toFixed(2)}× the same host under tsx: ${loaderIdle.toFixed(0)} MiB`],
    [`resident after ${EVENTS.toLocaleString('en')} events`, loadedRss, 'MiB', `${(loadedRss / idle).toFixed(2)}× idle`],
    ['data folder on disk', database, 'MiB', 'the native SQLite file and its WAL: memory holds its page cache, not the image'],
    ['resident growth per MiB of database', (loadedRss - idle) / database, 'MiB/MiB'],
    ['store rate while filling', EVENTS / elapsedS, 'events/s', `${CONCURRENCY} at a time`],
  ]);
  report('Node host: a young generation of 1 MiB (--max-semi-space-size=1)', `two hosts up at once, ${SEMI_ROUNDS} rounds of ${SEMI_SENDS} sends into each, alternating, one at a time`, [
    ['PUT /send, default semi-space, p50', semi.plain.p50, 'ms', `resident idle ${semi.plain.idle.toFixed(0)} MiB, after ${semi.plain.rss.toFixed(0)} MiB`],
    ['PUT /send, --max-semi-space-size=1, p50', semi.small.p50, 'ms', `resident idle ${semi.small.idle.toFixed(0)} MiB, after ${semi.small.rss.toFixed(0)} MiB`],
    ['  small / default', semi.small.p50 / semi.plain.p50, '×', `throughput ${semi.plain.rate.toFixed(0)} vs ${semi.small.rate.toFixed(0)} events/s`],
  ]);
}

const SEMI_ROUNDS = 4;
const SEMI_SENDS = 500;

/** The throughput cost of a 1 MiB young generation: the same compiled host with and without it, sends alternating. */
async function semiSpaceCost(entry: string) {
  const configs = { plain: [entry], small: ['--max-semi-space-size=1', entry] };
  const hosts = { plain: await startHost(configs.plain), small: await startHost(configs.small) };
  try {
    const out = {} as Record<'plain' | 'small', { p50: number; rate: number; idle: number; rss: number }>;
    const state = {} as Record<'plain' | 'small', { token: string; roomId: string; times: number[]; elapsed: number }>;
    for (const name of ['plain', 'small'] as const) state[name] = { ...(await warmUp(hosts[name].url)), times: [], elapsed: 0 };
    const idle = { plain: await rssMiB(hosts.plain.child.pid!), small: await rssMiB(hosts.small.child.pid!) };
    const fetchFn = (request: Request) => fetch(request);
    for (let round = 0; round < SEMI_ROUNDS; round++) {
      for (const name of ['plain', 'small'] as const) {
        const { token, roomId, times } = state[name];
        const started = performance.now();
        for (let i = 0; i < SEMI_SENDS; i++) {
          const t = performance.now();
          await clientRequest(fetchFn, `${hosts[name].url}/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/r${round}m${i}`, 'PUT', token, { msgtype: 'm.text', body: `message ${i} of round ${round}` });
          times.push(performance.now() - t);
        }
        state[name].elapsed += performance.now() - started;
      }
    }
    for (const name of ['plain', 'small'] as const) {
      const sorted = [...state[name].times].sort((a, b) => a - b);
      out[name] = { p50: sorted[Math.floor(sorted.length / 2)]!, rate: sorted.length / (state[name].elapsed / 1000), idle: idle[name], rss: await rssMiB(hosts[name].child.pid!) };
    }
    return out;
  } finally {
    await stopHost(hosts.plain);
    await stopHost(hosts.small);
  }
}
