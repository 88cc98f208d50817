import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Persistence, PersistenceHooks } from '../storage/persistence.ts';
import { acquireFileLock } from './file-lock.ts';
import { openFilePersistence } from './file-persistence.ts';

let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), 'hearth-files-'));
});

afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

/** A pid that certainly belongs to no running process: one that just exited. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '0']).pid!;
}

const entry = (seq: number, size = 10): { seq: number; bytes: Uint8Array } => ({ seq, bytes: new Uint8Array(size).fill(seq) });

describe('file lock', () => {
  const lockPath = (): string => join(directory, 'LOCK');
  const writeOwner = (owner: object): Promise<void> => writeFile(lockPath(), JSON.stringify(owner));

  it('refuses a second holder in this process and while a live process holds it', async () => {
    const lock = await acquireFileLock(lockPath());
    await expect(acquireFileLock(lockPath())).rejects.toMatchObject({ code: 'locked', message: /this process/ });
    await lock.release();
    await expect(stat(lockPath())).rejects.toMatchObject({ code: 'ENOENT' });

    await writeOwner({ pid: process.ppid, host: hostname(), nonce: 'parent' }); // our parent is alive
    await expect(acquireFileLock(lockPath())).rejects.toMatchObject({ code: 'locked', message: new RegExp(`live process ${process.ppid}`) });
  });

  it('takes over a lock left by a dead process, or by an earlier process with our pid', async () => {
    await writeOwner({ pid: deadPid(), host: hostname(), nonce: 'dead' });
    const first = await acquireFileLock(lockPath());
    expect(JSON.parse(await readFile(lockPath(), 'utf8'))).toMatchObject({ pid: process.pid });
    await first.release();

    // A container restart: same pid, but this process never took it.
    await writeOwner({ pid: process.pid, host: hostname(), nonce: 'previous life' });
    const second = await acquireFileLock(lockPath());
    await second.release();
  });

  it.runIf(process.platform === 'linux')('takes over a lock whose owner is a zombie, which still answers kill(pid, 0)', async () => {
    // A grandchild that exits under a parent (sleep) that never reaps it: a zombie. It
    // alone holds our pipe, so the pipe's end means it has exited.
    const parent = spawn('sh', ['-c', 'exec 3>&1 >/dev/null; sh -c "echo \\$\\$ >&3" & exec sleep 60 3>&-'], { stdio: ['ignore', 'pipe', 'ignore'] });
    const parentExited = new Promise((resolve) => parent.once('exit', resolve));
    try {
      let output = '';
      parent.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      await new Promise((resolve) => parent.stdout!.once('end', resolve));
      const zombie = Number(output.trim());
      expect(zombie).toBeGreaterThan(0);
      // The kernel closes an exiting process's files a moment before it marks it a zombie: the
      // pipe's end can come first, so its state is read again until it changes (no other event says so).
      const state = () => readFile(`/proc/${zombie}/stat`, 'utf8').then((stat) => stat.replace(/^.*\) /s, '')[0]);
      for (let tries = 0; tries < 10_000 && (await state()) !== 'Z'; tries++) await new Promise((resolve) => setImmediate(resolve));
      expect(await state()).toBe('Z');
      expect(() => process.kill(zombie, 0)).not.toThrow(); // the trap

      await writeOwner({ pid: zombie, host: hostname(), nonce: 'zombie' });
      const lock = await acquireFileLock(lockPath());
      expect(JSON.parse(await readFile(lockPath(), 'utf8'))).toMatchObject({ pid: process.pid });
      await lock.release();
    } finally {
      parent.kill('SIGKILL');
      await parentExited;
    }
  });

  it('respects a lock from another host and a fresh half-written lock, not an old half-written one', async () => {
    await writeOwner({ pid: 1, host: 'elsewhere', nonce: 'x' });
    await expect(acquireFileLock(lockPath())).rejects.toMatchObject({ code: 'locked', message: /elsewhere/ });

    await writeFile(lockPath(), '');
    await expect(acquireFileLock(lockPath())).rejects.toMatchObject({ code: 'locked', message: /creating/ });
    const old = new Date(Date.now() - 60_000);
    await utimes(lockPath(), old, old);
    const lock = await acquireFileLock(lockPath());
    await lock.release();
  });
});

describe('file persistence', () => {
  let persistence: Persistence | undefined;
  afterEach(async () => {
    await persistence?.close();
    persistence = undefined;
  });

  async function reopen(hooks?: PersistenceHooks): Promise<Persistence> {
    await persistence?.close();
    persistence = await openFilePersistence({ directory, hooks });
    return persistence;
  }

  it('cuts off a partial frame when the flush fails, so the next entry follows the last good one', async () => {
    let failNext = false;
    const p = await reopen({
      at(step) {
        if (step === 'append:written' && failNext) {
          failNext = false;
          throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' });
        }
      },
    });
    await p.load();
    await p.append(entry(1));
    const segment = join(directory, (await readdir(directory)).find((n) => n.startsWith('log-'))!);
    const sizeBefore = (await stat(segment)).size;
    failNext = true;
    await expect(p.append(entry(2, 5000))).rejects.toMatchObject({ name: 'StorageError', code: 'io_error' });
    expect((await stat(segment)).size).toBe(sizeBefore);
    await p.append(entry(2));

    const reloaded = await (await reopen()).load();
    expect(reloaded.log.map((e) => e.seq)).toEqual([1, 2]);
    expect(reloaded.log[1]!.bytes).toEqual(entry(2).bytes);
  });

  it('drops whole segments once a snapshot covers them, rolling over to a new segment', async () => {
    const p = await reopen();
    await p.load();
    for (let seq = 1; seq <= 3; seq++) await p.append(entry(seq));
    const files = async (): Promise<string[]> => (await readdir(directory)).filter((n) => n !== 'LOCK').sort();

    await p.writeSnapshot({ coversSeq: 2, image: new Uint8Array([1, 2, 3]), checksum: 0 });
    await p.dropLogThrough(2); // the active segment still holds 3: keep it, start a new one
    expect(await files()).toEqual(['log-0000000000000001.bin', 'snapshot-0000000000000002.db']);
    await p.append(entry(4));
    await p.writeSnapshot({ coversSeq: 4, image: new Uint8Array([4]), checksum: 0 });
    await p.dropLogThrough(4);
    expect(await files()).toEqual(['snapshot-0000000000000004.db']);
    await p.append(entry(5));

    const loaded = await (await reopen()).load();
    expect(loaded.snapshot).toMatchObject({ coversSeq: 4, image: new Uint8Array([4]) });
    expect(loaded.log.map((e) => e.seq)).toEqual([5]);
  });

  it('ignores an interrupted snapshot and removes superseded ones at load', async () => {
    const p = await reopen();
    await p.load();
    await p.writeSnapshot({ coversSeq: 1, image: new Uint8Array([1]), checksum: 7 });
    await p.close();
    await writeFile(join(directory, 'snapshot-0000000000000001.db.tmp'), 'partial');
    await writeFile(join(directory, 'snapshot-0000000000000000.db'), 'superseded');
    const loaded = await (await reopen()).load();
    expect(loaded.snapshot).toMatchObject({ coversSeq: 1, checksum: 7 });
    expect((await readdir(directory)).filter((n) => n.startsWith('snapshot')).sort()).toEqual(['snapshot-0000000000000001.db']);
  });

  it('reports a damaged snapshot file as corrupt', async () => {
    await writeFile(join(directory, 'snapshot-0000000000000003.db'), new Uint8Array(40));
    await expect((await reopen()).load()).rejects.toMatchObject({ code: 'corrupt' });
  });
});
