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
import { MEDIA_OBJECT_STORE, type IdbMediaStore } from './media-idb.ts';
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

/** Whether the homeserver holds nothing a person made: no account. Only then may an archive replace it. */
export async function isEmptyCore(database: Database): Promise<boolean> {
  // The users component's table, read by the host that owns the whole database, for this one question.
  return ((await database.get<{ n: number }>('SELECT COUNT(*) AS n FROM users'))?.n ?? 0) === 0;
}

/**
 * Checks an archive whole (header, passphrase, every frame) and that this origin's homeserver is
 * empty, calling `stop` only then; stop closes the core so its storage can be replaced. Then the
 * database, media and peers are written, and the seed last. The page reloads afterwards.
 */
export async function importIntoOrigin(file: Blob, passphrase: string, core: { database: Database; stop(): Promise<void> }, onProgress?: (progress: ArchiveProgress) => void): Promise<ArchiveManifest> {
  const archive = await openArchive(blobSource(file), passphrase);
  await archive.check(onProgress);
  if (!(await isEmptyCore(core.database))) {
    throw new ArchiveError('not_empty', 'This browser already holds a homeserver with an account. Reset it first (export it before, to keep it), then import. Nothing was imported.');
  }
  // The seed is the last thing written: until then this origin keeps its own (empty) identity.
  let seed: Uint8Array | undefined;
  let image: Uint8Array | undefined;
  const media: { key: string; bytes: Uint8Array }[] = [];
  const peers: { key: string; value: Uint8Array }[] = [];
  await archive.restore(async (entry, data) => {
    if (entry.kind === 'identity') seed = await collect(data);
    else if (entry.kind === 'database') image = await collect(data); // sql.js needs the image whole in any case
    else if (entry.kind === 'media') media.push({ key: entry.name, bytes: await collect(data) });
    else if (entry.kind === 'peer') peers.push({ key: entry.name, value: await collect(data) });
    // 'file': a Node host's own files (signing keys of a DNS-named host) have no place in a browser.
  }, onProgress);
  if (!seed || !image) throw new ArchiveError('damaged', 'The archive lacks its identity or its database. Nothing was imported.');
  checkArchiveIdentity(archive.manifest, await serverNameFromSeed(seed));
  if (!/^[0-9a-f]{64}$/.test(archive.manifest.serverName)) throw new ArchiveError('bad_entry', `This archive is of ${archive.manifest.serverName}, a homeserver with a DNS name: it runs on a Node host with its certificate, not in a browser. Nothing was imported.`);
  portableSqliteHeader(image);

  await core.stop();
  await new Promise<void>((resolve, reject) => {
    const request = indexedDB.deleteDatabase(DATABASE_NAME);
    request.onsuccess = () => resolve();
    request.onerror = () => reject(request.error ?? new Error('could not clear the old database'));
  });
  const persistence = await openIndexedDbPersistence({ name: DATABASE_NAME });
  await persistence.writeSnapshot({ coversSeq: 0, image, checksum: crc32(image) });
  await persistence.close();
  const mediaDb = await openDB('hearth-media', 1, { upgrade: (d) => void d.createObjectStore(MEDIA_OBJECT_STORE) });
  const mediaTx = mediaDb.transaction(MEDIA_OBJECT_STORE, 'readwrite', { durability: 'strict' });
  await mediaTx.store.clear();
  for (const { key, bytes } of media) await mediaTx.store.put(new Blob([bytes as Uint8Array<ArrayBuffer>]), key);
  await mediaTx.done;
  mediaDb.close();
  const peerDb = await openDB(PEER_DATABASE, 1, { upgrade: (d) => void d.createObjectStore(PEER_STORE) });
  const peerTx = peerDb.transaction(PEER_STORE, 'readwrite', { durability: 'strict' });
  await peerTx.store.clear();
  for (const { key, value } of peers) await peerTx.store.put(value, key);
  await peerTx.done;
  peerDb.close();
  await storeSeed(seed);
  return archive.manifest;
}
