import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { link, open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { StorageError } from '../storage/errors.ts';

/**
 * An exclusive lock on a database directory, held by one process: a lock file
 * created with O_EXCL holding the owner's pid and host. A lock file left by a
 * process that died (or is a zombie, dead but not yet reaped) is stale and is
 * taken over; one whose owner is alive (or on another host, where we cannot
 * tell) refuses the second opener.
 */
export interface FileLock {
  release(): Promise<void>;
}

interface LockOwner {
  pid: number;
  host: string;
  /** Distinguishes two locks by the same pid (a container restart reuses pids). */
  nonce: string;
}

/** Paths this process holds: a lock file naming our own pid that is not in here is a previous incarnation's. */
const heldByThisProcess = new Set<string>();

/** A lock file younger than this with unreadable content may be mid-creation; older, its creator died. */
const CREATION_GRACE_MS = 10_000;

function lockedError(path: string, detail: string): StorageError {
  return new StorageError('locked', `the database is in use (${detail}); lock file ${path}`);
}

/**
 * Whether pid is a running process. A zombie (dead, not yet reaped by its
 * parent) still answers kill(pid, 0), so on Linux its state in /proc decides:
 * Z (zombie) or X (being reaped) has exited, released its files and will write
 * nothing more. After a kill -9 of a process group, the owner is a zombie until
 * its parent reaps it, and forever under a PID 1 that never reaps.
 */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
    // EPERM: it exists, owned by someone else; a zombie can still be told apart below.
  }
  return !hasExited(pid);
}

/** Linux: the process's state in /proc/<pid>/stat is Z or X. Elsewhere (no /proc), false. */
function hasExited(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (error) {
    // Gone since kill(pid, 0) answered (ENOENT on Linux), or no /proc at all.
    return (error as NodeJS.ErrnoException).code === 'ENOENT' && existsSync('/proc/self/stat');
  }
  // "pid (comm) state ...": comm may hold spaces and parentheses, so read after the last ')'.
  const state = stat.slice(stat.lastIndexOf(')') + 1).trim()[0];
  return state === 'Z' || state === 'X';
}

function parseOwner(text: string): LockOwner | null {
  try {
    const owner = JSON.parse(text) as Partial<LockOwner>;
    if (typeof owner.pid === 'number' && typeof owner.host === 'string' && typeof owner.nonce === 'string') return owner as LockOwner;
  } catch {
    // torn or foreign content
  }
  return null;
}

async function tryCreate(path: string, owner: LockOwner): Promise<boolean> {
  let handle;
  try {
    handle = await open(path, 'wx');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
  try {
    await handle.writeFile(JSON.stringify(owner));
    await handle.sync();
  } finally {
    await handle.close();
  }
  return true;
}

/** Why the existing lock file must be respected, or null if it is stale. */
async function liveOwnerDetail(path: string, text: string): Promise<string | null> {
  const owner = parseOwner(text);
  if (!owner) {
    const age = Date.now() - (await stat(path)).mtimeMs;
    return age < CREATION_GRACE_MS ? 'another process is creating its lock' : null;
  }
  if (owner.host !== hostname()) return `held by pid ${owner.pid} on host ${owner.host}`;
  if (owner.pid === process.pid) return null; // not in heldByThisProcess: left by an earlier process with our pid
  return isAlive(owner.pid) ? `held by live process ${owner.pid}` : null;
}

export async function acquireFileLock(lockPath: string): Promise<FileLock> {
  const path = resolve(lockPath);
  if (heldByThisProcess.has(path)) throw lockedError(path, 'already open in this process');
  heldByThisProcess.add(path);
  try {
    const owner: LockOwner = { pid: process.pid, host: hostname(), nonce: randomBytes(8).toString('hex') };
    for (let attempt = 0; attempt < 3; attempt++) {
      if (await tryCreate(path, owner)) return { release: () => releaseLock(path, owner) };
      let text: string;
      try {
        text = await readFile(path, 'utf8');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue; // released meanwhile
        throw error;
      }
      const detail = await liveOwnerDetail(path, text);
      if (detail) throw lockedError(path, detail);
      // Stale. Move it aside rather than unlink it, then check we moved the file
      // we judged: another process may have replaced it in between.
      const aside = `${path}.stale-${owner.nonce}`;
      try {
        await rename(path, aside);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw error;
      }
      if ((await readFile(aside, 'utf8')) !== text) {
        await link(aside, path).catch(() => undefined); // put back the live lock we took by mistake
        await unlink(aside).catch(() => undefined);
        throw lockedError(path, 'another process took the lock over');
      }
      await unlink(aside);
    }
    throw lockedError(path, 'could not take over a stale lock');
  } catch (error) {
    heldByThisProcess.delete(path);
    throw error;
  }
}

async function releaseLock(path: string, owner: LockOwner): Promise<void> {
  if (!heldByThisProcess.delete(path)) return;
  try {
    // Only remove it if it is still ours.
    if (parseOwner(await readFile(path, 'utf8'))?.nonce === owner.nonce) await unlink(path);
  } catch {
    // already gone
  }
}
