/**
 * `npm run export` and `npm run import` (portable-cli.ts): a Node host's data folder as one Hearth
 * archive (src/portable) and back. The parts of a data folder, and where they go:
 *   identity.seed → identity · db/ (native or sql.js) → database (a copy at one commit) ·
 *   media/<xx>/<key> → media · peers/ (libp2p's datastore) → peer · signing-keys.json → file.
 * listen.json stays behind: the ports belong to the machine, not to the homeserver.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, rmdir, stat, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { FsDatastore } from 'datastore-fs';
import { Key } from 'interface-datastore';
import { serverNameFromSeed } from '../crypto/identity.ts';
import { homeserverSchemas } from '../homeserver.ts';
import { ArchiveError, checkArchiveIdentity, collect, openArchive, portableSqliteHeader, writeArchive, type ArchiveManifest, type ArchiveProgress, type ArchiveSource, type EntrySource } from '../portable/index.ts';
import type { Database } from '../storage/database.ts';
import { DurableDatabase } from '../storage/durable-database.ts';
import { StorageError } from '../storage/errors.ts';
import { requestSnapshot } from './control-socket.ts';
import { fsyncDirectory } from './file-persistence.ts';
import { NATIVE_FILE } from './migrate-to-native.ts';
import { NativeDatabase, openNativeDatabase } from './native-database.ts';
import { openNodeDatabase } from './node-database.ts';

const PIECE_BYTES = 1024 * 1024;
/** Host files that travel with the homeserver (a DNS-named host's signing keys). */
const HOST_FILES = ['signing-keys.json'];
const MEDIA_KEY = /^[a-z0-9]{3,}$/;

export const MOVE_DONT_COPY =
  'Move, don\u2019t copy: run this homeserver in one place only. If the old copy keeps running too, the two sign different events as the same server and its rooms fork. Stop the old one (or reset it) before you start this one.';

/** Copies an open database of either engine to `file`, consistent at one commit, while the host goes on. */
export async function snapshotDatabase(database: Database, file: string): Promise<void> {
  if (database instanceof NativeDatabase) return database.backupTo(file);
  if (database instanceof DurableDatabase) {
    const handle = await open(file, 'wx', 0o600);
    try {
      await handle.writeFile(await database.exportImage());
      await handle.sync();
    } finally {
      await handle.close();
    }
    return;
  }
  throw new Error('this database engine cannot be copied');
}

async function* readFileInPieces(path: string, patchHeader = false): AsyncGenerator<Uint8Array> {
  const handle = await open(path, 'r');
  try {
    for (let first = true; ; first = false) {
      const buffer = new Uint8Array(PIECE_BYTES);
      const { bytesRead } = await handle.read(buffer, 0, PIECE_BYTES, null);
      if (bytesRead === 0) return;
      const piece = buffer.subarray(0, bytesRead);
      if (first && patchHeader) portableSqliteHeader(piece);
      yield piece;
    }
  } finally {
    await handle.close();
  }
}

function fileEntry(kind: EntrySource['kind'], name: string, path: string, size: number, patchHeader = false): EntrySource {
  return { kind, name, size, read: () => readFileInPieces(path, patchHeader) };
}

/**
 * A copy of the data folder's database at one commit: opened here when no host runs on the
 * folder, else asked of the running host over its control socket (control-socket.ts).
 */
async function databaseCopy(dataDir: string, log: (line: string) => void): Promise<string> {
  const directory = join(dataDir, 'db');
  const files = existsSync(directory) ? await readdir(directory) : [];
  const native = files.includes(NATIVE_FILE);
  if (!native && !files.some((f) => f.startsWith('snapshot-') || f.startsWith('log-'))) throw new Error(`${dataDir} holds no database (${directory} is empty or missing)`);
  let database: Database;
  try {
    database = await openNodeDatabase({ directory, schemas: homeserverSchemas, storage: native ? 'native' : 'sqljs', log });
  } catch (error) {
    if (!(error instanceof StorageError && error.code === 'locked')) throw error;
    log('the homeserver is running: asking it for a copy of its database');
    return requestSnapshot(dataDir);
  }
  const file = join(dataDir, `export-${randomBytes(8).toString('hex')}.sqlite`);
  try {
    await snapshotDatabase(database, file);
  } finally {
    await database.close();
  }
  return file;
}

async function mediaEntries(dataDir: string): Promise<EntrySource[]> {
  const root = join(dataDir, 'media');
  const entries: EntrySource[] = [];
  for (const folder of existsSync(root) ? await readdir(root) : []) {
    if (!/^[a-z0-9]{2}$/.test(folder)) continue;
    for (const key of await readdir(join(root, folder))) {
      if (!MEDIA_KEY.test(key)) continue; // a .tmp is a put never acknowledged
      const path = join(root, folder, key);
      entries.push(fileEntry('media', key, path, (await stat(path)).size));
    }
  }
  return entries;
}

async function peerEntries(dataDir: string): Promise<EntrySource[]> {
  const path = join(dataDir, 'peers');
  if (!existsSync(path)) return [];
  const store = new FsDatastore(path, { createIfMissing: false });
  await store.open();
  try {
    const entries: EntrySource[] = [];
    for await (const { key, value } of store.query({})) {
      const bytes = new Uint8Array(value);
      entries.push({ kind: 'peer', name: key.toString(), size: bytes.byteLength, read: () => [bytes] });
    }
    return entries;
  } finally {
    await store.close();
  }
}

export interface NodeExportOptions {
  dataDir: string;
  out: string;
  passphrase: string;
  onProgress?: (progress: ArchiveProgress) => void;
  log?: (line: string) => void;
  /** PBKDF2 iterations (tests); default the format's. */
  iterations?: number;
}

/** Writes the data folder as an archive at `out` (refused if it exists), whether or not a host runs on it. */
export async function exportNodeHomeserver(options: NodeExportOptions): Promise<{ manifest: ArchiveManifest; bytes: number }> {
  const log = options.log ?? (() => undefined);
  const dataDir = resolve(options.dataDir);
  if (existsSync(options.out)) throw new Error(`${options.out} exists already; name a new file`);
  let seed: Uint8Array;
  try {
    seed = new Uint8Array(await readFile(join(dataDir, 'identity.seed')));
  } catch {
    throw new Error(`${dataDir} holds no homeserver (no identity.seed)`);
  }
  const copy = await databaseCopy(dataDir, log);
  const partial = `${options.out}.partial-${randomBytes(4).toString('hex')}`;
  let handle: FileHandle | undefined;
  try {
    const hostFiles: EntrySource[] = [];
    for (const name of HOST_FILES) {
      const path = join(dataDir, name);
      if (existsSync(path)) hostFiles.push(fileEntry('file', name, path, (await stat(path)).size));
    }
    // Media after the database copy: every file the copy names was complete before it was made.
    const entries = [
      { kind: 'identity' as const, name: '', size: seed.byteLength, read: () => [seed] },
      fileEntry('database', '', copy, (await stat(copy)).size, true),
      ...(await mediaEntries(dataDir)),
      ...(await peerEntries(dataDir)),
      ...hostFiles,
    ];
    handle = await open(partial, 'wx', 0o600);
    const out = handle;
    const result = await writeArchive({
      passphrase: options.passphrase,
      serverName: await serverNameFromSeed(seed),
      createdBy: 'node',
      entries,
      write: async (bytes) => void (await out.write(bytes)),
      iterations: options.iterations,
      onProgress: options.onProgress,
    });
    await handle.sync();
    await handle.close();
    handle = undefined;
    await rename(partial, options.out);
    await fsyncDirectory(dirname(resolve(options.out)));
    return result;
  } catch (error) {
    await handle?.close().catch(() => undefined);
    await unlink(partial).catch(() => undefined);
    throw error;
  } finally {
    await unlink(copy).catch(() => undefined);
  }
}

/** A file as an archive source, read twice (check, then restore). */
export async function fileSource(path: string): Promise<ArchiveSource & { close(): Promise<void> }> {
  const handle = await open(path, 'r');
  const { size } = await handle.stat();
  return {
    size,
    read: async (offset, length) => {
      const buffer = new Uint8Array(length);
      const { bytesRead } = await handle.read(buffer, 0, length, offset);
      return buffer.subarray(0, bytesRead);
    },
    close: () => handle.close(),
  };
}

async function writeWhole(path: string, data: AsyncIterable<Uint8Array> | Iterable<Uint8Array>, patchHeader = false): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const handle = await open(path, 'wx+', 0o600);
  try {
    for await (const piece of data) await handle.write(piece);
    if (patchHeader) {
      // Read back from the file: the entry's first piece is what was left of a frame, maybe fewer than the header's 100 bytes.
      const head = new Uint8Array(100);
      const { bytesRead } = await handle.read(head, 0, head.byteLength, 0);
      portableSqliteHeader(head.subarray(0, bytesRead));
      await handle.write(head, 0, bytesRead, 0);
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export interface NodeImportOptions {
  dataDir: string;
  input: string;
  passphrase: string;
  onProgress?: (progress: ArchiveProgress) => void;
  log?: (line: string) => void;
}

/**
 * Restores an archive into an empty (or missing) data folder. Everything is checked first:
 * the folder's emptiness, the header, the passphrase, every frame. It is restored into a folder
 * beside it, whose database is opened and checked, and that folder is renamed into place last:
 * a refusal or a crash leaves the target as it was.
 */
export async function importNodeHomeserver(options: NodeImportOptions): Promise<ArchiveManifest> {
  const log = options.log ?? (() => undefined);
  const dataDir = resolve(options.dataDir);
  if (existsSync(dataDir) && (await readdir(dataDir)).length > 0) {
    throw new ArchiveError('not_empty', `${dataDir} is not empty: import only into a new or empty folder, so nothing there is overwritten. Nothing was imported.`);
  }
  const source = await fileSource(options.input);
  const staging = join(dirname(dataDir), `.${basename(dataDir)}.importing-${randomBytes(4).toString('hex')}`);
  try {
    const archive = await openArchive(source, options.passphrase);
    log(`archive of ${archive.manifest.serverName}, made ${new Date(archive.manifest.createdAt).toISOString()} by ${archive.manifest.createdBy}: ${archive.manifest.entries.length} entries, ${archive.manifest.totalBytes} bytes`);
    await archive.check(options.onProgress);
    await mkdir(staging, { mode: 0o700 });
    const peers: { key: string; value: Uint8Array }[] = [];
    await archive.restore(async (entry, data) => {
      switch (entry.kind) {
        case 'identity': {
          const seed = await collect(data);
          checkArchiveIdentity(archive.manifest, await serverNameFromSeed(seed));
          return writeWhole(join(staging, 'identity.seed'), [seed]);
        }
        case 'database':
          return writeWhole(join(staging, 'db', NATIVE_FILE), data, true);
        case 'media':
          if (!MEDIA_KEY.test(entry.name)) throw new ArchiveError('bad_entry', `The archive names a media file ${JSON.stringify(entry.name)} that Hearth never writes. Nothing was imported.`);
          return writeWhole(join(staging, 'media', entry.name.slice(0, 2), entry.name), data);
        case 'peer':
          peers.push({ key: entry.name, value: await collect(data) });
          return;
        case 'file':
          // A browser's archive has none; an unknown one is skipped rather than written anywhere it names.
          if (!HOST_FILES.includes(entry.name)) return log(`skipped ${entry.name}: not a file this host keeps`);
          return writeWhole(join(staging, entry.name), data);
      }
    }, options.onProgress);
    if (peers.length > 0) {
      const store = new FsDatastore(join(staging, 'peers'));
      await store.open();
      for (const { key, value } of peers) await store.put(new Key(key), value);
      await store.close();
    }
    // The database opens, passes its check and takes this Hearth's migrations before it goes in place.
    const database = await openNativeDatabase({ file: join(staging, 'db', NATIVE_FILE), schemas: homeserverSchemas, integrityCheck: 'full' });
    await database.close();
    for (const folder of ['db', 'media', '']) if (existsSync(join(staging, folder))) await fsyncDirectory(join(staging, folder));
    if (existsSync(dataDir)) await rmdir(dataDir); // empty, checked above
    await rename(staging, dataDir);
    await fsyncDirectory(dirname(dataDir));
    return archive.manifest;
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    throw error;
  } finally {
    await source.close();
  }
}
