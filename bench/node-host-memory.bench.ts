// The Node host's resident memory, as production runs it (the compiled JavaScript,
// `npm run serve`): idle after start-up, then after 10,000 stored events, beside the
// database's size on disk. The baseline in the same run is the same host started with
// the TypeScript loader (tsx), which is what production no longer pays for. Beside them: the
// same host federating over libp2p from the start (--listen), and the floor of the platform
// pieces any such host loads (an HTTP server, fetch's Request and Response, WebCrypto, SQLite).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../scripts/build.ts';
import { buildNodeHost } from '../scripts/build-node.ts';
import { HEAP_GROWING_FLAG, HOST_NODE_FLAGS, hostFlagsWithout, SEMI_SPACE_FLAG } from '../scripts/host-flags.ts';
import { clientRequest, report } from './harness.ts';

const EVENTS = 10_000;
const CONCURRENCY = 8;

export interface Host {
  child: ChildProcess;
  url: string;
  dataDir: string;
  /** A data folder given to startHost outlives the host. */
  keep: boolean;
}

/** Starts a host on an OS-chosen port (on `dataDir`, or a new temporary folder); resolves once it printed its data folder (its last start-up line). */
export async function startHost(command: string[], given?: string): Promise<Host> {
  const dataDir = given ?? (await mkdtemp(join(tmpdir(), 'hearth-bench-memory-')));
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
  return { child, url, dataDir, keep: given !== undefined };
}

export async function stopHost(host: Host): Promise<void> {
  const exited = new Promise((resolve) => host.child.once('exit', resolve));
  host.child.kill('SIGTERM');
  await exited;
  if (!host.keep) await rm(host.dataDir, { recursive: true, force: true });
}

/** Resident set size of a process in MiB (Linux: /proc/<pid>/status), or its peak so far (VmHWM). */
export async function rssMiB(pid: number, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]);
  return kib / 1024;
}

export async function folderMiB(dir: string): Promise<number> {
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
  const loaded = await startHost([...HOST_NODE_FLAGS, '--import', 'tsx', 'src/node/serve.ts']);
  await warmUp(loaded.url);
  const loaderIdle = await rssMiB(loaded.child.pid!);
  await stopHost(loaded);

  // The same host with a libp2p listen address: libp2p is loaded and started at start (lazy-p2p.ts).
  const federating = await startHost([...HOST_NODE_FLAGS, entry, '--listen', '/ip4/127.0.0.1/tcp/0']);
  await warmUp(federating.url);
  const federatingIdle = await rssMiB(federating.child.pid!);
  await stopHost(federating);
  const floor = platformFloor();

  const host = await startHost([...HOST_NODE_FLAGS, entry]);
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

  // Each of the host's flags against the host without it.
  const semi = await flagCost({ plain: [...hostFlagsWithout(SEMI_SPACE_FLAG), entry], small: [...HOST_NODE_FLAGS, entry] });
  const growing = await flagCost({ plain: [...hostFlagsWithout(HEAP_GROWING_FLAG), entry], small: [...HOST_NODE_FLAGS, entry] });

  report('Node host memory', `compiled JavaScript, ${EVENTS.toLocaleString('en')} messages through the client API`, [
    ['resident, idle after start-up', idle, 'MiB', `${(idle / loaderIdle).toFixed(2)}× the same host under tsx: ${loaderIdle.toFixed(0)} MiB`],
    ['  the same, federating over libp2p from the start (--listen)', federatingIdle, 'MiB', `+${(federatingIdle - idle).toFixed(0)} MiB: libp2p, its transports and the running node`],
    ['  floor: node with an HTTP server, Request/Response, WebCrypto, SQLite', floor.all, 'MiB', `plain node ${floor.plain.toFixed(0)} MiB; fetch's Request and Response alone +${floor.web.toFixed(0)} MiB`],
    [`resident after ${EVENTS.toLocaleString('en')} events`, loadedRss, 'MiB', `${(loadedRss / idle).toFixed(2)}× idle`],
    ['data folder on disk', database, 'MiB', 'the native SQLite file and its WAL: memory holds its page cache, not the image'],
    ['resident growth per MiB of database', (loadedRss - idle) / database, 'MiB/MiB'],
    ['store rate while filling', EVENTS / elapsedS, 'events/s', `${CONCURRENCY} at a time`],
  ]);
  report(`Node host: a young generation of 1 MiB (${SEMI_SPACE_FLAG})`, `the host's flags with and without it; two hosts up at once, ${SEMI_ROUNDS} rounds of ${SEMI_SENDS} sends into each, alternating, one at a time`, [
    ['PUT /send, default semi-space, p50', semi.plain.p50, 'ms', `resident idle ${semi.plain.idle.toFixed(0)} MiB, after ${semi.plain.rss.toFixed(0)} MiB`],
    [`PUT /send, ${SEMI_SPACE_FLAG}, p50`, semi.small.p50, 'ms', `resident idle ${semi.small.idle.toFixed(0)} MiB, after ${semi.small.rss.toFixed(0)} MiB`],
    ['  small / default', semi.small.p50 / semi.plain.p50, '×', `throughput ${semi.plain.rate.toFixed(0)} vs ${semi.small.rate.toFixed(0)} events/s`],
  ]);
  report(`Node host: V8's heap growing by at most half at each full GC (${HEAP_GROWING_FLAG})`, `the host's flags with and without it, as above`, [
    [`PUT /send, without it, p50`, growing.plain.p50, 'ms', `resident idle ${growing.plain.idle.toFixed(0)} MiB, after ${growing.plain.rss.toFixed(0)} MiB`],
    [`PUT /send, with ${HEAP_GROWING_FLAG}, p50`, growing.small.p50, 'ms', `resident idle ${growing.small.idle.toFixed(0)} MiB, after ${growing.small.rss.toFixed(0)} MiB`],
    ['  with / without', growing.small.p50 / growing.plain.p50, '×', `throughput ${growing.plain.rate.toFixed(0)} vs ${growing.small.rate.toFixed(0)} events/s`],
  ]);
}

/**
 * What the platform pieces every Node host uses cost before any of Hearth's code: an HTTP server and
 * a request to it, fetch's Request and Response (undici, loaded at their first use), WebCrypto's Ed25519 and PBKDF2,
 * and better-sqlite3 with a table, in a fresh process with the host's flag.
 */
function platformFloor(): { plain: number; web: number; all: number } {
  const script = `
    const rss = () => process.memoryUsage().rss / 1048576;
    const plain = rss();
    new Response('{}'); new Request('http://x/', { method: 'POST', body: '{}' });
    const web = rss() - plain;
    const { createServer } = await import('node:http');
    const server = createServer((_, res) => res.end('{}'));
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { get } = await import('node:http'); // a request as a client's arrives (the host never calls fetch() when idle)
    await new Promise((resolve) => get('http://127.0.0.1:' + server.address().port + '/', (res) => res.resume().on('end', resolve)));
    const key = await crypto.subtle.generateKey('Ed25519', true, ['sign', 'verify']);
    await crypto.subtle.sign('Ed25519', key.privateKey, new Uint8Array(100));
    const pbkdf2 = await crypto.subtle.importKey('raw', new Uint8Array(16), 'PBKDF2', false, ['deriveBits']);
    await crypto.subtle.deriveBits({ name: 'PBKDF2', hash: 'SHA-256', salt: new Uint8Array(16), iterations: 1000 }, pbkdf2, 256);
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(':memory:');
    db.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)');
    db.prepare('INSERT INTO t (v) VALUES (?)').run('x');
    await new Promise((resolve) => setTimeout(resolve, 500));
    console.log(JSON.stringify({ plain, web, all: rss() }));
    server.close();
    db.close();`;
  return JSON.parse(execFileSync(process.execPath, [...HOST_NODE_FLAGS, '--input-type=module', '-e', script], { cwd: PROJECT_ROOT, encoding: 'utf8' }).trim()) as { plain: number; web: number; all: number };
}

const SEMI_ROUNDS = 4;
const SEMI_SENDS = 500;

/** What V8 flags cost in throughput and memory: the same compiled host started two ways (`plain`, `small`), sends alternating. */
async function flagCost(configs: Record<'plain' | 'small', string[]>) {
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
