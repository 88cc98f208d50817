// `npm run bench portable`: export and import of a Node data folder with a 100 MB database and 50 MB
// of media (issue 22), against a plain copy of the same folder (fs.cp) in the same run.
import { cp, mkdir, mkdtemp, open, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { exportNodeHomeserver, importNodeHomeserver } from '../src/node/portable.ts';

const DB_MB = Number(process.env['HEARTH_BENCH_PORTABLE_DB_MB'] ?? 100);
const MEDIA_MB = Number(process.env['HEARTH_BENCH_PORTABLE_MEDIA_MB'] ?? 50);

function random(bytes: number): Uint8Array {
  const out = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i += 65536) crypto.getRandomValues(out.subarray(i, i + 65536));
  return out;
}

async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const t0 = performance.now();
  const value = await fn();
  return [performance.now() - t0, value];
}

/** fsyncs every file under dir, as export and import do for what they write. */
async function syncTree(dir: string): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await syncTree(path);
    const handle = await open(path, 'r');
    await handle.sync();
    await handle.close();
  }
}

export async function run(): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'hearth-bench-portable-'));
  try {
    const data = join(root, 'data');
    await mkdir(join(data, 'db'), { recursive: true });
    await writeFile(join(data, 'identity.seed'), random(32));
    // A database of DB_MB (random rows: nothing compresses, and nothing is compressed).
    const db = new BetterSqlite3(join(data, 'db', 'hearth.sqlite'));
    db.exec('CREATE TABLE filler (id INTEGER PRIMARY KEY, bytes BLOB)');
    const insert = db.prepare('INSERT INTO filler (bytes) VALUES (?)');
    db.transaction(() => {
      for (let i = 0; i < DB_MB * 16; i++) insert.run(random(64 * 1024));
    })();
    db.close();
    for (let i = 0; i < MEDIA_MB; i++) {
      const key = `bench${String(i).padStart(4, '0')}`;
      await mkdir(join(data, 'media', key.slice(0, 2)), { recursive: true });
      await writeFile(join(data, 'media', key.slice(0, 2), key), random(1024 * 1024));
    }
    const dbBytes = (await stat(join(data, 'db', 'hearth.sqlite'))).size;

    const [copyMs] = await timed(() => cp(data, join(root, 'copy'), { recursive: true }));
    const [copySyncMs] = await timed(async () => (await cp(data, join(root, 'copy2'), { recursive: true }), await syncTree(join(root, 'copy2'))));
    const out = join(root, 'home.hearth');
    const [exportMs, exported] = await timed(() => exportNodeHomeserver({ dataDir: data, out, passphrase: 'bench passphrase' }));
    const [importMs] = await timed(() => importNodeHomeserver({ dataDir: join(root, 'imported'), input: out, passphrase: 'bench passphrase' }));
    const mb = (n: number) => `${(n / 1024 / 1024).toFixed(0)} MB`;
    console.log(`\n## portable: a ${mb(dbBytes)} database and ${MEDIA_MB} MB of media (archive ${mb(exported.bytes)})`);
    console.log(`| step | time | vs plain copy |\n|---|---|---|`);
    console.log(`| plain copy (fs.cp of the data folder) | ${copyMs.toFixed(0)} ms | 1.00× |`);
    console.log(`| plain copy, then fsync of every file | ${copySyncMs.toFixed(0)} ms | ${(copySyncMs / copyMs).toFixed(2)}× |`);
    console.log(`| npm run export (backup, PBKDF2 600k, AES-GCM, fsync) | ${exportMs.toFixed(0)} ms | ${(exportMs / copyMs).toFixed(2)}× |`);
    console.log(`| npm run import (check every frame, restore, integrity_check, fsync) | ${importMs.toFixed(0)} ms | ${(importMs / copyMs).toFixed(2)}× |`);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
