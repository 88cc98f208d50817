// Resident memory against database size under Node, for the two engines the Node host can
// keep its database in: sql.js (the image in memory, snapshot + redo log in files) and native
// SQLite (better-sqlite3, a WAL file; only SQLite's page cache in memory). Each figure is a
// fresh process that opens a database of that size, and reads every row of it once; the
// baseline in the same run is a process that loads the same modules and opens nothing.
// Then sql.js's peak RSS while it stores a snapshot of the 100 MB database: read copy-on-write
// from its file (memfs-image.ts), against the same snapshot through export() in the same run.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import initSqlJs from 'sql.js';
import { openFilePersistence } from '../src/node/file-persistence.ts';
import { openNativeDatabase } from '../src/node/native-database.ts';
import type { ComponentSchema, Database } from '../src/storage/database.ts';
import { openDurableDatabase } from '../src/storage/durable-database.ts';
import { report } from './harness.ts';

const schema: ComponentSchema = {
  component: 'bench',
  migrations: [{ version: 1, description: 'rows', up: (tx) => void tx.run('CREATE TABLE rows (id INTEGER PRIMARY KEY, body BLOB NOT NULL)') }],
};
const ROW_BYTES = 1000;
const SIZES_MB = [1, 100];
type Engine = 'sqljs' | 'native';

async function open(engine: Engine, directory: string, viaExport = false): Promise<Database> {
  if (engine === 'native') return openNativeDatabase({ file: join(directory, 'hearth.sqlite'), schemas: [schema] });
  const files = await openFilePersistence({ directory });
  // The baseline of the snapshot figure: the same files without writeSnapshotFrom, so durable-database.ts export()s.
  const persistence = viaExport ? { load: () => files.load(), discardLogFrom: (i: number) => files.discardLogFrom(i), append: files.append.bind(files), writeSnapshot: files.writeSnapshot.bind(files), dropLogThrough: files.dropLogThrough.bind(files), close: () => files.close() } : files;
  return openDurableDatabase({ sqlJs: await initSqlJs(), persistence, schemas: [schema], snapshotPolicy: { minLogBytes: Infinity, maxLogBytes: Infinity, idleMinLogBytes: Infinity } });
}

const rssMiB = (): number => process.memoryUsage().rss / (1 << 20);
const peakMiB = (): number => Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;

/** In a child process: fill (once), or open, scan and print RSS as JSON. */
async function child(mode: string, engine: Engine, directory: string, megabytes: number): Promise<void> {
  if (mode === 'baseline') {
    console.log(JSON.stringify({ rss: rssMiB() }));
    return;
  }
  const db = await open(engine, directory, mode === 'snapshot-export');
  if (mode.startsWith('snapshot')) {
    await db.transaction((tx) => void tx.run('INSERT INTO rows (body) VALUES (?)', [new Uint8Array(ROW_BYTES)]));
    globalThis.gc?.();
    await new Promise((resolve) => setTimeout(resolve, 500));
    writeFileSync('/proc/self/clear_refs', '5'); // resets VmHWM to the current RSS
    const before = peakMiB();
    const started = performance.now();
    await (db as unknown as { snapshot(): Promise<void> }).snapshot();
    console.log(JSON.stringify({ before, peak: peakMiB(), ms: performance.now() - started, copyOnWrite: (db as unknown as { stats(): { lastSnapshot?: { copyOnWrite: boolean } } }).stats().lastSnapshot?.copyOnWrite }));
    await db.close();
    return;
  }
  if (mode === 'fill') {
    const rows = Math.round((megabytes << 20) / (ROW_BYTES + 40));
    for (let done = 0; done < rows; done += 1000) {
      await db.transaction((tx) => {
        for (let i = done; i < Math.min(rows, done + 1000); i++) tx.run('INSERT INTO rows (body) VALUES (?)', [new Uint8Array(ROW_BYTES).fill(i & 255)]);
      });
    }
    await (db as { snapshot?: () => Promise<void> }).snapshot?.();
    await db.close();
    return;
  }
  const opened = rssMiB();
  const scan = await db.get<{ n: number; bytes: number }>('SELECT count(*) AS n, sum(length(body)) AS bytes FROM rows');
  for (let i = 0; i < 1000; i++) await db.get('SELECT body FROM rows WHERE id = ?', [1 + ((i * 7919) % scan!.n)]);
  const pages = await db.get<{ bytes: number }>('SELECT page_count * page_size AS bytes FROM pragma_page_count, pragma_page_size');
  console.log(JSON.stringify({ opened, scanned: rssMiB(), dbMiB: pages!.bytes / (1 << 20) }));
  await db.close();
}

function inChild(...args: string[]): string {
  // A fixed mmap threshold for the snapshot figures: glibc otherwise raises it after the first large free
  // (the image read at open), keeps later large buffers in its heap, and the RSS before a snapshot depends on that.
  const env = args[0]!.startsWith('snapshot') ? { ...process.env, MALLOC_MMAP_THRESHOLD_: String(128 * 1024) } : process.env;
  return execFileSync(process.execPath, ['--expose-gc', '--import', 'tsx', fileURLToPath(import.meta.url), 'child', ...args], { encoding: 'utf8', env }).trim().split('\n').at(-1)!;
}

export async function run(): Promise<void> {
  const baseline = JSON.parse(inChild('baseline', 'native', '', '0')) as { rss: number };
  const rows: Array<[string, number, string, string?]> = [['baseline: the same modules loaded, no database', baseline.rss, 'MiB']];
  for (const megabytes of SIZES_MB) {
    for (const engine of ['sqljs', 'native'] as const) {
      const directory = await mkdtemp(join(tmpdir(), `hearth-bench-rss-${engine}-`));
      try {
        inChild('fill', engine, directory, String(megabytes));
        const figures = JSON.parse(inChild('measure', engine, directory, String(megabytes))) as { opened: number; scanned: number; dbMiB: number };
        rows.push([`${engine}, ${megabytes} MB database: RSS opened`, figures.opened, 'MiB', `${figures.dbMiB.toFixed(1)} MiB of pages`]);
        rows.push([`${engine}, ${megabytes} MB database: RSS after reading every row`, figures.scanned, 'MiB']);
        if (engine === 'sqljs' && megabytes === 100) {
          for (const [mode, label] of [['snapshot-export', 'export()'], ['snapshot', 'copy-on-write']] as const) {
            const snap = JSON.parse(inChild(mode, engine, directory, String(megabytes))) as { before: number; peak: number; ms: number; copyOnWrite: boolean };
            rows.push([`sqljs, 100 MB: peak RSS during a snapshot, ${label}`, snap.peak, 'MiB', `+${(snap.peak - snap.before).toFixed(0)} MiB over ${snap.before.toFixed(0)} MiB before it, ${(snap.ms / 1000).toFixed(1)} s${snap.copyOnWrite ? ', read copy-on-write' : ''}`]);
          }
        }
      } finally {
        await rm(directory, { recursive: true, force: true });
      }
    }
  }
  report('storage memory under Node', 'RSS against database size, a fresh process each', rows);
}

if (process.argv[2] === 'child') await child(process.argv[3]!, process.argv[4] as Engine, process.argv[5]!, Number(process.argv[6]));
