import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { startNodeHost as startHost, type NodeHostOptions } from '../../src/node/node-host.ts';
import { api, register } from './harness.ts';

// The Node host on real files: what it acknowledged survives a restart and a kill.

const directories: string[] = [];
const children: ChildProcess[] = [];
/** Process groups of hosts started under a parent that never reaps them. */
const groups: number[] = [];
afterEach(async () => {
  for (const group of groups.splice(0)) {
    try {
      process.kill(-group, 'SIGKILL');
    } catch {
      // gone
    }
  }
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      process.kill(-child.pid!, 'SIGKILL'); // a detached child leads its own process group
    } catch {
      child.kill('SIGKILL');
    }
    await exited;
  }
  for (const dir of directories.splice(0)) await rm(dir, { recursive: true, force: true });
});

interface SpawnOptions {
  /** Its own process group, so the whole group can be killed as a crash would. */
  detached?: boolean;
  /**
   * In a process group and session of its own (setsid), under a parent outside it that
   * never reaps (as under a container's PID 1 that does not): killed, it stays a zombie.
   */
  neverReaped?: boolean;
}

function spawnServe(dir: string, args: string[], options: SpawnOptions): ChildProcess {
  const command = [process.execPath, inject('hearthServeEntry'), '--data', dir, '--no-rate-limits', ...(args.includes('--port') ? [] : ['--port', '0']), ...args];
  if (options.neverReaped) {
    // sh prints the host's pid (its process group's id, as setsid makes it a leader) and becomes sleep, which reaps nothing.
    const child = spawn('sh', ['-c', 'setsid "$0" "$@" & echo "serve pid $!"; exec sleep 600', ...command], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    return child;
  }
  const child = spawn(command[0]!, command.slice(1), {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached ?? false,
  });
  children.push(child);
  return child;
}

/** `serve` as a child process, resolved once it prints its URL; group: the process group to kill for a crash. */
function serveProcess(dir: string, args: string[] = [], options: SpawnOptions = {}): Promise<{ child: ChildProcess; url: string; group: number }> {
  return new Promise((resolve, reject) => {
    const child = spawnServe(dir, args, options);
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const pid = options.neverReaped ? /^serve pid (\d+)$/m.exec(output)?.[1] : String(child.pid);
      if (options.neverReaped && pid && !groups.includes(Number(pid))) groups.push(Number(pid));
      const match = /listening on (http:\S+)/.exec(output);
      if (match && pid) resolve({ child, url: match[1]!, group: Number(pid) });
    });
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('exit', (code) => reject(new Error(`serve exited with ${code}: ${output}`)));
  });
}

/** `serve` as a child process that is expected not to start: its exit code and what it printed. */
function serveFailsProcess(dir: string, args: string[] = [], options: SpawnOptions = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawnServe(dir, args, options);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** One line, no stack trace. */
function expectOneClearLine(stderr: string, pattern: RegExp): void {
  const lines = stderr.trim().split('\n');
  expect(lines, stderr).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
  expect(stderr).not.toMatch(/^\s+at /m);
}

async function dataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'hearth-host-'));
  directories.push(dir);
  return dir;
}

const enc = encodeURIComponent;

// Every test on both engines the host can keep its database in: native SQLite (the default) and sql.js with its redo log.
describe.each(['native', 'sqljs'] as const)('the Node host on %s storage', (storage) => {
  const startNodeHost = (options: NodeHostOptions) => startHost({ ...options, storage });
  const serve = (dir: string, args: string[] = [], options: SpawnOptions = {}) => serveProcess(dir, ['--storage', storage, ...args], options);
  const serveFails = (dir: string, args: string[] = [], options: SpawnOptions = {}) => serveFailsProcess(dir, ['--storage', storage, ...args], options);

  it('keeps its identity, accounts, rooms and sync tokens across a restart', async () => {
    const dir = await dataDir();
    const first = await startNodeHost({ dataDir: dir, port: 0, rateLimits: false });
    const alice = await register(first, 'alice');
    const roomId = (await api(first, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { name: 'kept' } })).body.room_id;
    const since = (await api(first, 'GET', '/_matrix/client/v3/sync', { token: alice.accessToken })).body.next_batch;
    const serverName = first.homeserver.serverName;
    await first.close();

    const second = await startNodeHost({ dataDir: dir, port: 0, rateLimits: false });
    try {
      expect(second.homeserver.serverName).toBe(serverName);
      expect((await api(second, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.name`, { token: alice.accessToken })).body).toEqual({ name: 'kept' });
      await api(second, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/after`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'after restart' } });
      const sync = await api(second, 'GET', `/_matrix/client/v3/sync?since=${since}`, { token: alice.accessToken });
      expect(sync.body.rooms.join[roomId].timeline.events.map((e: any) => e.content.body)).toEqual(['after restart']);
    } finally {
      await second.close();
    }
  });

  it('refuses a second host on the same data directory', async () => {
    const dir = await dataDir();
    const first = await startNodeHost({ dataDir: dir, port: 0 });
    try {
      await expect(startNodeHost({ dataDir: dir, port: 0 })).rejects.toThrow(/lock|in use|another/i);
    } finally {
      await first.close();
    }
  });

  it('loses nothing it acknowledged when the process is killed', async () => {
    const dir = await dataDir();
    const start = () => serve(dir);
    const first = await start();
    const alice = await register(first, 'alice');
    const roomId = (await api(first, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: {} })).body.room_id;
    const acknowledged: string[] = [];
    for (let i = 0; i < 25; i++) {
      const r = await api(first, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/k${i}`, { token: alice.accessToken, body: { msgtype: 'm.text', body: `k${i}` } });
      acknowledged.push(r.body.event_id);
    }
    first.child.kill('SIGKILL');
    await new Promise((resolve) => first.child.once('exit', resolve));

    const second = await start();
    const messages = await api(second, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=100`, { token: alice.accessToken });
    const stored = messages.body.chunk.map((e: any) => e.event_id);
    for (const id of acknowledged) expect(stored).toContain(id);
    second.child.kill('SIGTERM');
  });

  it('restarts at once after its whole process group is killed, 20 times, losing nothing it acknowledged', async () => {
    const dir = await dataDir();
    // Every other host runs under a parent that never reaps it, so its successor finds the lock held by a zombie.
    const options = (round: number): SpawnOptions => (round % 2 === 0 ? { detached: true } : { neverReaped: true });
    let host = await serve(dir, [], options(0));
    const alice = await register(host, 'alice');
    const roomId = (await api(host, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: {} })).body.room_id;
    const acknowledged: string[] = [];
    for (let round = 0; round < 20; round++) {
      const sent = await api(host, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/round${round}`, { token: alice.accessToken, body: { msgtype: 'm.text', body: `round ${round}` } });
      expect(sent.status).toBe(200);
      acknowledged.push(sent.body.event_id);
      process.kill(-host.group, 'SIGKILL');
      // At once, not after its exit: the killed process may be dying or an unreaped zombie holding the lock.
      host = await serve(dir, [], options(round + 1));
      const messages = await api(host, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=100`, { token: alice.accessToken });
      expect(messages.body.chunk.map((e: any) => e.event_id)).toEqual(expect.arrayContaining(acknowledged));
    }
    // 21 starts of a compiled host take 20–30 s on an idle 2-core machine: room for one that is busy.
  }, 120_000);

  it('refuses, in one line, to start on a database another live process holds', async () => {
    const dir = await dataDir();
    const first = await serve(dir);
    const second = await serveFails(dir);
    expect(second.code).not.toBe(0);
    expectOneClearLine(second.stderr, /database is in use \(held by live process \d+\)/);
    // The first is untouched.
    expect((await api(first, 'GET', '/_matrix/client/versions')).status).toBe(200);
  });

  it('refuses, in one line, to start on a port that is taken, and leaves no database behind', async () => {
    const parent = await dataDir();
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as AddressInfo).port;
      const dir = join(parent, 'data');
      const result = await serveFails(dir, ['--port', String(port)]);
      expect(result.code).not.toBe(0);
      expectOneClearLine(result.stderr, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use`));
      await expect(stat(dir)).rejects.toMatchObject({ code: 'ENOENT' });
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });

  it('refuses, in one line, to start on a data folder it cannot write', async ({ skip }) => {
    const parent = await dataDir();
    const dir = join(parent, 'data');
    await mkdir(dir);
    await chmod(dir, 0o555);
    // Permissions do not stop root, and running the host as another user needs every folder above
    // the checkout to be open to that user (a clone under /root or a mktemp -d folder is not):
    // as root, the folder is made immutable instead, which root cannot write either (EPERM).
    const asRoot = process.getuid?.() === 0;
    if (asRoot) {
      try {
        execFileSync('chattr', ['+i', dir], { stdio: 'ignore' });
      } catch {
        skip('running as root on a filesystem without chattr +i: nothing here can refuse root a write');
      }
    }
    try {
      const result = await serveFails(dir);
      expect(result.code).not.toBe(0);
      expectOneClearLine(result.stderr, asRoot ? /data folder .*data is not writable \(EPERM\)/ : /data folder .*data is not writable \(EACCES\)/);
    } finally {
      if (asRoot) execFileSync('chattr', ['-i', dir]);
    }
  });
});

describe('the Node host moving to native SQLite', () => {
  it('migrates a sql.js data folder killed mid-use at its first native start, losing nothing it acknowledged', async () => {
    const dir = await dataDir();
    const old = await serveProcess(dir, ['--storage', 'sqljs']);
    const alice = await register(old, 'alice');
    const roomId = (await api(old, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { name: 'moved' } })).body.room_id;
    const acknowledged: string[] = [];
    for (let i = 0; i < 10; i++) {
      const sent = await api(old, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/m${i}`, { token: alice.accessToken, body: { msgtype: 'm.text', body: `m${i}` } });
      acknowledged.push(sent.body.event_id);
    }
    old.child.kill('SIGKILL');
    await new Promise((resolve) => old.child.once('exit', resolve));
    expect((await readdir(join(dir, 'db'))).some((name) => name.startsWith('log-'))).toBe(true);

    const moved = await startHost({ dataDir: dir, port: 0, rateLimits: false });
    try {
      expect((await readdir(join(dir, 'db'))).sort()).toEqual(['LOCK', 'hearth.sqlite', 'hearth.sqlite-wal']);
      expect((await api(moved, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.name`, { token: alice.accessToken })).body).toEqual({ name: 'moved' });
      const messages = await api(moved, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=100`, { token: alice.accessToken });
      expect(messages.body.chunk.map((e: any) => e.event_id)).toEqual(expect.arrayContaining(acknowledged));
    } finally {
      await moved.close();
    }
    // The sql.js engine does not take a migrated folder back.
    await expect(startHost({ dataDir: dir, port: 0, storage: 'sqljs' })).rejects.toThrow(/moved to native SQLite/);
  });
});
