import {
  concat,
  DEFAULT_CHUNK_BYTES,
  DEFAULT_ITERATIONS,
  deriveKey,
  FORMAT_VERSION,
  frameAad,
  frameIv,
  MAGIC,
  MAX_CHUNK_BYTES,
  toBase64,
  u32,
  type ArchiveEntry,
  type ArchiveHeader,
  type ArchiveManifest,
  type ArchiveProgress,
} from './format.ts';

/** One entry to write: its size known up front (the manifest lists it), its bytes read when its turn comes. */
export interface EntrySource extends ArchiveEntry {
  read(): AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
}

export interface WriteArchiveOptions {
  passphrase: string;
  serverName: string;
  createdBy: string;
  entries: EntrySource[];
  /** Receives the file's bytes in order, a frame at a time; awaited, so a slow disk holds the writer back. */
  write(bytes: Uint8Array): Promise<void> | void;
  /** PBKDF2 iterations; default 600,000 (tests pass fewer). */
  iterations?: number;
  chunkBytes?: number;
  now?: () => number;
  onProgress?: (progress: ArchiveProgress) => void;
}

/** Writes a whole homeserver as one encrypted file (format.ts). Resolves with the manifest and the file's size. */
export async function writeArchive(options: WriteArchiveOptions): Promise<{ manifest: ArchiveManifest; bytes: number }> {
  if (options.passphrase.length === 0) throw new Error('an archive needs a passphrase');
  const chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK_BYTES;
  if (!Number.isInteger(chunkBytes) || chunkBytes < 1 || chunkBytes > MAX_CHUNK_BYTES) throw new Error(`chunkBytes must be 1 to ${MAX_CHUNK_BYTES}`);
  const noncePrefix = crypto.getRandomValues(new Uint8Array(8));
  const header: ArchiveHeader = {
    format: FORMAT_VERSION,
    kdf: { name: 'PBKDF2', hash: 'SHA-256', iterations: options.iterations ?? DEFAULT_ITERATIONS, salt: toBase64(crypto.getRandomValues(new Uint8Array(16))) },
    cipher: { name: 'AES-GCM', noncePrefix: toBase64(noncePrefix) },
    chunkBytes,
  };
  const headerJson = new TextEncoder().encode(JSON.stringify(header));
  const prefix = concat([MAGIC, u32(headerJson.byteLength), headerJson]);
  const key = await deriveKey(options.passphrase, header);

  const entries = options.entries.map(({ kind, name, size }) => ({ kind, name, size }));
  const manifest: ArchiveManifest = {
    format: FORMAT_VERSION,
    serverName: options.serverName,
    createdAt: (options.now ?? Date.now)(),
    createdBy: options.createdBy,
    entries,
    totalBytes: entries.reduce((n, e) => n + e.size, 0),
  };

  let written = 0;
  const emit = async (bytes: Uint8Array): Promise<void> => {
    await options.write(bytes);
    written += bytes.byteLength;
  };
  await emit(prefix);

  // Plaintext waits here until a whole chunk is ready; a full chunk is sent only once more follows, so the last one can say it is last.
  let parts: Uint8Array[] = [];
  let buffered = 0;
  let index = 0;
  const seal = async (plain: Uint8Array, final: boolean): Promise<void> => {
    const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: 'AES-GCM', iv: frameIv(noncePrefix, index), additionalData: frameAad(prefix, index, final) }, key, plain as Uint8Array<ArrayBuffer>));
    index++;
    await emit(concat([u32(sealed.byteLength), sealed]));
  };
  const take = (n: number): Uint8Array => {
    const all = parts.length === 1 ? parts[0]! : concat(parts);
    parts = all.byteLength > n ? [all.subarray(n)] : [];
    buffered -= n;
    return all.subarray(0, n);
  };
  const push = async (bytes: Uint8Array): Promise<void> => {
    if (bytes.byteLength === 0) return;
    parts.push(bytes);
    buffered += bytes.byteLength;
    while (buffered > chunkBytes) await seal(take(chunkBytes), false);
  };
  const record = async (json: object, bytes?: Uint8Array): Promise<void> => {
    const text = new TextEncoder().encode(JSON.stringify(json));
    await push(concat([u32(text.byteLength), text]));
    if (bytes) await push(bytes);
  };

  const manifestBytes = new TextEncoder().encode(JSON.stringify(manifest));
  await record({ kind: 'manifest', name: '', size: manifestBytes.byteLength }, manifestBytes);
  let done = 0;
  options.onProgress?.({ phase: 'writing', doneBytes: 0, totalBytes: manifest.totalBytes });
  for (const source of options.entries) {
    await record({ kind: source.kind, name: source.name, size: source.size });
    let seen = 0;
    for await (const piece of source.read()) {
      seen += piece.byteLength;
      if (seen > source.size) break;
      // A copy: the reader may reuse its buffer once this returns, and the bytes may wait here for the next chunk.
      await push(new Uint8Array(piece));
      done += piece.byteLength;
      options.onProgress?.({ phase: 'writing', doneBytes: done, totalBytes: manifest.totalBytes });
    }
    if (seen !== source.size) throw new Error(`${source.kind} ${source.name || ''} changed while it was read: ${seen} bytes, not ${source.size}`.replace('  ', ' '));
  }
  await record({ kind: 'end', name: '', size: 0 });
  await seal(take(buffered), true);
  return { manifest, bytes: written };
}
