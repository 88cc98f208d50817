/**
 * The browser's side of the Hearth archive (src/portable): the core's parts gathered into one
 * encrypted file, and an archive restored into this origin's IndexedDB. The parts, and where
 * they live here: identity (hearth-identity), database (hearth: sql.js snapshot + redo log),
 * media (hearth-media), peer store (hearth-peers). Run in the core's Worker.
 */
import { openDB } from 'idb';
import { serverNameFromSeed } from '../src/crypto/identity.ts';
import { ArchiveError, blobSource, checkArchiveIdentity, collect, openArchive, portableSqliteHeader, writeArchive, type ArchiveManifest, type ArchiveProgress, type EntrySource } from '../src/portable/index.ts';
import { crc32 } from '../src/storage/crc32.ts';
import type { Database } from '../src/storage/database.ts';
import { DurableDatabase } from '../src/storage/durable-database.ts';
import { openIndexedDbPersistence } from '../src/storage/indexeddb-persistence.ts';
import { storeSeed } from './identity.ts';
import { MEDIA_DATABASE, MEDIA_OBJECT_STORE, storesBlobs, type IdbMediaStore } from './media-idb.ts';
import { DATABASE_NAME } from './open-database.ts';
import { PEER_DATABASE, PEER_STORE } from './peer-datastore.ts';

export interface CoreParts {
  seed: Uint8Array;
  serverName: string;
  database: Database;
  media: IdbMediaStore;
}

async function peerRecords(): Promise<{ key: string; value: Uint8Array }[]> {
  const db = await openDB(PEER_DATABASE, 1, { upgrade: (d) => void d.createObjectStore(PEER_STORE) });
  try {
    const tx = db.transaction(PEER_STORE);
    const records: { key: string; value: Uint8Array }[] = [];
    for (let cursor = await tx.store.openCursor(); cursor; cursor = await cursor.continue()) records.push({ key: String(cursor.key), value: new Uint8Array(cursor.value as Uint8Array) });
    await tx.done;
    return records;
  } finally {
    db.close();
  }
}

/** The whole homeserver as one Blob: the database as it stands between two write groups, then media and peers. */
export async function exportCore(parts: CoreParts, passphrase: string, onProgress?: (progress: ArchiveProgress) => void): Promise<Blob> {
  if (!(parts.database instanceof DurableDatabase)) throw new Error('this database cannot be exported');
  const image = await parts.database.exportImage();
  portableSqliteHeader(image);
  const media: EntrySource[] = [];
  for (const key of await parts.media.keys()) {
    const blob = await parts.media.blob(key);
    if (blob) media.push({ kind: 'media', name: key, size: blob.size, read: async function* () { yield new Uint8Array(await blob.arrayBuffer()); } });
  }
  const peers: EntrySource[] = (await peerRecords()).map(({ key, value }) => ({ kind: 'peer', name: key, size: value.byteLength, read: () => [value] }));
  const chunks: BlobPart[] = [];
  await writeArchive({
    passphrase,
    serverName: parts.serverName,
    createdBy: 'browser',
    entries: [{ kind: 'identity', name: '', size: parts.seed.byteLength, read: () => [parts.seed] }, { kind: 'database', name: '', size: image.byteLength, read: () => [image] }, ...media, ...peers],
    write: (bytes) => void chunks.push(bytes as Uint8Array<ArrayBuffer>),
    onProgress,
  });
  return new Blob(chunks, { type: 'application/octet-stream' });
}

/** The name of the error an import throws when it failed after it began writing: the page reloads, and the next start cleans up. */
export const IMPORT_INTERRUPTED = 'ImportInterrupted';

/** Where an import notes that it has begun writing and not finished: cleared once the seed is written. */
const IMPORT_DATABASE = 'hearth-import';
const IMPORT_STORE = 'state';
const IMPORT_MARK = 'incomplete';
const openImportState = () => openDB(IMPORT_DATABASE, 1, { upgrade: (d) => void d.createObjectStore(IMPORT_STORE) });

async function writeImportMark(mark: { serverName: string } | undefined): Promise<void> {
  const db = await openImportState();
  try {
    const tx = db.transaction(IMPORT_STORE, 'readwrite', { durability: 'strict' });
    await Promise.all([mark ? tx.store.put(mark, IMPORT_MARK) : tx.store.delete(IMPORT_MARK), tx.done]);
  } finally {
    db.close();
  }
}

async function readImportMark(): Promise<{ serverName: string } | undefined> {
  const db = await openImportState();
  try {
    return (await db.get(IMPORT_STORE, IMPORT_MARK)) as { serverName: string } | undefined;
  } finally {
    db.close();
  }
}

/** Opens one of the origin's object stores, clears it, and hands back a writer to it (one strict transaction per put). */
async function clearedStore(name: string, store: string): Promise<{ put(key: string, value: unknown): Promise<void>; close(): void; storesBlobs(): Promise<boolean> }> {
  const db = await openDB(name, 1, { upgrade: (d) => void d.createObjectStore(store) });
  const clear = db.transaction(store, 'readwrite', { durability: 'strict' });
  await Promise.all([clear.store.clear(), clear.done]);
  return {
    storesBlobs: () => storesBlobs(db, store),
    async put(key, value) {
      const tx = db.transaction(store, 'readwrite', { durability: 'strict' });
      await Promise.all([tx.store.put(value, key), tx.done]);
    },
    close: () => db.close(),
  };
}

/** Deletes the homeserver's database and clears its media and peers: what an import replaces. The identity stays. */
async function clearOrigin(): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const request = indexedDB.deleteDatabase(DATABASE_NAME);
    request.onsuccess = () => resolve();
    request.onerror = () => reject(request.error ?? new Error('could not clear the old database'));
  });
  // Cleared rather than deleted: the page's node may hold the peer store open.
  for (const [name, store] of [[MEDIA_DATABASE, MEDIA_OBJECT_STORE], [PEER_DATABASE, PEER_STORE]] as const) (await clearedStore(name, store)).close();
}

/**
 * At the core's start, before its storage opens: an import that began writing and did not finish
 * (the tab closed or crashed midway) left part of another homeserver beside this origin's own
 * identity. That part is removed, and the sentence for the import card returned. An import whose
 * seed was written (it only missed clearing its mark) is complete: the mark goes, nothing else.
 */
export async function recoverInterruptedImport(serverName: string): Promise<string | undefined> {
  const mark = await readImportMark();
  if (!mark) return undefined;
  if (mark.serverName !== serverName) await clearOrigin();
  await writeImportMark(undefined);
  if (mark.serverName === serverName) return undefined;
  return 'The last import stopped before it finished (the tab was closed, the browser quit or the storage was full), so what it had written was removed. Nothing else changed: import the file again.';
}

/**
 * Checks an archive whole (header, passphrase, every frame), that this origin's homeserver is
 * empty, and the archive's identity, before anything is written. Then `stop` closes the core so
 * its storage can be replaced, and the entries are written as they are decrypted: the database
 * (sql.js needs its image whole in any case), each media file in turn, the peers, and the seed
 * last. From the first write until the seed is written a mark says the import is incomplete;
 * the next start removes what such an import left (recoverInterruptedImport). The page reloads afterwards.
 */
export async function importIntoOrigin(file: Blob, passphrase: string, core: { anyAccount(): Promise<boolean>; stop(): Promise<void> }, onProgress?: (progress: ArchiveProgress) => void): Promise<ArchiveManifest> {
  const archive = await openArchive(blobSource(file), passphrase);
  await archive.check(onProgress);
  // Only a homeserver with no account may be replaced: the users component says whether it has one.
  if (await core.anyAccount()) {
    throw new ArchiveError('not_empty', 'This browser already holds a homeserver with an account. Reset it first (export it before, to keep it), then import. Nothing was imported.');
  }
  const { manifest } = archive;
  if (!/^[0-9a-f]{64}$/.test(manifest.serverName)) throw new ArchiveError('bad_entry', `This archive is of ${manifest.serverName}, a homeserver with a DNS name: it runs on a Node host with its certificate, not in a browser. Nothing was imported.`);
  // Both hosts write the identity and the database first; what comes after them is written as it comes.
  const firstOther = manifest.entries.findIndex((e) => e.kind !== 'identity' && e.kind !== 'database');
  if (firstOther !== -1 && manifest.entries.slice(firstOther).some((e) => e.kind === 'identity' || e.kind === 'database')) {
    throw new ArchiveError('damaged', 'The archive lists media or peers before its identity and database, which no Hearth writes. Nothing was imported.');
  }
  let seed: Uint8Array | undefined;
  let image: Uint8Array | undefined;
  let mediaAsBlobs: boolean | undefined;
  let stores: { media: Awaited<ReturnType<typeof clearedStore>>; peers: Awaited<ReturnType<typeof clearedStore>> } | undefined;
  /** The first write: the mark, the core stopped, the old data gone, the database in. */
  const begin = async () => {
    if (stores) return stores;
    if (!seed || !image) throw new ArchiveError('damaged', 'The archive lacks its identity or its database. Nothing was imported.');
    await writeImportMark({ serverName: manifest.serverName });
    await core.stop();
    await clearOrigin();
    const persistence = await openIndexedDbPersistence({ name: DATABASE_NAME });
    await persistence.writeSnapshot({ coversSeq: 0, image, checksum: crc32(image) });
    await persistence.close();
    image = undefined;
    return (stores = { media: await clearedStore(MEDIA_DATABASE, MEDIA_OBJECT_STORE), peers: await clearedStore(PEER_DATABASE, PEER_STORE) });
  };
  try {
    await archive.restore(async (entry, data) => {
      if (entry.kind === 'identity') {
        seed = await collect(data);
        checkArchiveIdentity(manifest, await serverNameFromSeed(seed));
      } else if (entry.kind === 'database') {
        image = await collect(data);
        portableSqliteHeader(image);
      } else if (entry.kind === 'media') {
        // One file at a time: its decrypted pieces become one Blob (the browser may keep it on disk), never all media at once;
        // an ArrayBuffer where IndexedDB refuses Blobs (WebKit's ephemeral sessions), as IdbMediaStore keeps them there.
        const parts: Uint8Array<ArrayBuffer>[] = [];
        for await (const part of data) parts.push(part as Uint8Array<ArrayBuffer>);
        const { media } = await begin();
        mediaAsBlobs ??= await media.storesBlobs();
        await media.put(entry.name, mediaAsBlobs ? new Blob(parts) : await new Blob(parts).arrayBuffer());
      } else if (entry.kind === 'peer') {
        await (await begin()).peers.put(entry.name, await collect(data));
      }
      // 'file': a Node host's own files (signing keys of a DNS-named host) have no place in a browser.
    }, onProgress);
    await begin();
  } finally {
    stores?.media.close();
    stores?.peers.close();
  }
  await storeSeed(seed!);
  await writeImportMark(undefined);
  return manifest;
}
