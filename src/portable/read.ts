import {
  ArchiveError,
  concat,
  deriveKey,
  FORMAT_VERSION,
  frameAad,
  frameIv,
  fromBase64,
  MAGIC,
  MAX_CHUNK_BYTES,
  MAX_ITERATIONS,
  MAX_MANIFEST_BYTES,
  MAX_RECORD_JSON,
  readU32,
  TAG_BYTES,
  type ArchiveEntry,
  type ArchiveHeader,
  type ArchiveManifest,
  type ArchiveProgress,
} from './format.ts';

/** Random access to the archive's bytes (a file handle, a Blob), so it can be read twice: once to check, once to restore. */
export interface ArchiveSource {
  readonly size: number;
  read(offset: number, length: number): Promise<Uint8Array>;
}

/** An archive whose header, passphrase and manifest have been checked; its entries not yet. */
export interface OpenedArchive {
  readonly header: ArchiveHeader;
  readonly manifest: ArchiveManifest;
  /** Decrypts every frame and checks the records against the manifest, writing nothing: the whole file is sound when it resolves. */
  check(onProgress?: (progress: ArchiveProgress) => void): Promise<void>;
  /** Reads the entries in manifest order, each one's bytes as they are decrypted; `visit` must drain or ignore them before returning. */
  restore(visit: (entry: ArchiveEntry, data: AsyncIterable<Uint8Array>) => Promise<void>, onProgress?: (progress: ArchiveProgress) => void): Promise<void>;
}

const KINDS = new Set(['identity', 'database', 'media', 'peer', 'file']);

function damaged(detail: string): ArchiveError {
  return new ArchiveError('damaged', `The file is damaged or was altered: ${detail}. Nothing was imported.`);
}

function parseHeader(bytes: Uint8Array): ArchiveHeader {
  let header: ArchiveHeader;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) as ArchiveHeader;
  } catch {
    throw damaged('its header is not readable');
  }
  if (typeof header?.format !== 'number') throw damaged('its header has no format version');
  if (header.format > FORMAT_VERSION) {
    throw new ArchiveError('newer_format', `This archive was written by a newer Hearth (format ${header.format}); this one reads format ${FORMAT_VERSION}. Update Hearth and import it again.`);
  }
  const { kdf, cipher, chunkBytes } = header;
  const ok =
    header.format === FORMAT_VERSION &&
    kdf?.name === 'PBKDF2' &&
    kdf.hash === 'SHA-256' &&
    Number.isInteger(kdf.iterations) &&
    kdf.iterations >= 1 &&
    kdf.iterations <= MAX_ITERATIONS &&
    typeof kdf.salt === 'string' &&
    cipher?.name === 'AES-GCM' &&
    typeof cipher.noncePrefix === 'string' &&
    Number.isInteger(chunkBytes) &&
    chunkBytes >= 1 &&
    chunkBytes <= MAX_CHUNK_BYTES;
  if (!ok) throw damaged('its header is not one Hearth writes');
  try {
    if (fromBase64(cipher.noncePrefix).byteLength !== 8 || fromBase64(kdf.salt).byteLength < 16) throw new Error('size');
  } catch {
    throw damaged('its header is not one Hearth writes');
  }
  return header;
}

/** Pulls bytes across frame boundaries. */
class PlainReader {
  private parts: Uint8Array[] = [];
  private buffered = 0;
  private ended = false;

  constructor(private readonly frames: AsyncIterator<Uint8Array>) {}

  private async fill(): Promise<boolean> {
    if (this.ended) return false;
    const next = await this.frames.next();
    if (next.done) return !(this.ended = true);
    this.parts.push(next.value);
    this.buffered += next.value.byteLength;
    return true;
  }

  async exactly(n: number, what: string): Promise<Uint8Array> {
    while (this.buffered < n) if (!(await this.fill())) throw damaged(`it ends inside ${what}`);
    const all = this.parts.length === 1 ? this.parts[0]! : concat(this.parts);
    this.parts = all.byteLength > n ? [all.subarray(n)] : [];
    this.buffered -= n;
    return all.subarray(0, n);
  }

  /** Up to n bytes at a time, at most what one frame gave. */
  async *pieces(n: number, what: string): AsyncGenerator<Uint8Array> {
    let left = n;
    while (left > 0) {
      if (this.buffered === 0 && !(await this.fill())) throw damaged(`it ends inside ${what}`);
      const head = this.parts[0]!;
      const piece = head.byteLength <= left ? head : head.subarray(0, left);
      if (piece === head) this.parts.shift();
      else this.parts[0] = head.subarray(left);
      this.buffered -= piece.byteLength;
      left -= piece.byteLength;
      yield piece;
    }
  }

  async atEnd(): Promise<boolean> {
    while (this.buffered === 0) if (!(await this.fill())) return true;
    return false;
  }

  async record(): Promise<ArchiveEntry | { kind: 'manifest' | 'end'; name: string; size: number }> {
    const length = readU32(await this.exactly(4, 'a record'));
    if (length > MAX_RECORD_JSON) throw damaged('a record is too long');
    let record: ArchiveEntry;
    try {
      record = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(await this.exactly(length, 'a record'))) as ArchiveEntry;
    } catch (error) {
      if (error instanceof ArchiveError) throw error;
      throw damaged('a record is not readable');
    }
    if (typeof record?.kind !== 'string' || typeof record.name !== 'string' || !Number.isSafeInteger(record.size) || record.size < 0) throw damaged('a record is malformed');
    return record;
  }
}

/**
 * Opens an archive: checks the magic, refuses a newer format before asking anything of the
 * passphrase, derives the key, decrypts the first frame (a wrong passphrase fails here) and
 * reads the manifest. Every refusal is an ArchiveError that says what is wrong.
 */
export async function openArchive(source: ArchiveSource, passphrase: string): Promise<OpenedArchive> {
  if (source.size < MAGIC.byteLength + 4) throw new ArchiveError('not_an_archive', 'This is not a Hearth archive (it is too short).');
  const start = await source.read(0, MAGIC.byteLength + 4);
  if (!MAGIC.every((byte, i) => start[i] === byte)) throw new ArchiveError('not_an_archive', 'This is not a Hearth archive (it does not start as one).');
  const headerLength = readU32(start, MAGIC.byteLength);
  if (headerLength > 64 * 1024 || MAGIC.byteLength + 4 + headerLength > source.size) throw new ArchiveError('truncated', 'The file is truncated: it ends inside its header. Nothing was imported.');
  const headerBytes = await source.read(MAGIC.byteLength + 4, headerLength);
  const header = parseHeader(headerBytes);
  const prefix = concat([start, headerBytes]);
  const key = await deriveKey(passphrase, header);
  const noncePrefix = fromBase64(header.cipher.noncePrefix);
  const maxFrame = header.chunkBytes + TAG_BYTES;

  const open = async (index: number, sealed: Uint8Array, final: boolean): Promise<Uint8Array | undefined> => {
    try {
      return new Uint8Array(await crypto.subtle.decrypt({ name: 'AES-GCM', iv: frameIv(noncePrefix, index), additionalData: frameAad(prefix, index, final) }, key, sealed as Uint8Array<ArrayBuffer>));
    } catch {
      return undefined;
    }
  };

  /** The frames' plaintexts in order; the last one must be marked last and end the file. */
  async function* frames(onFrame?: (offset: number) => void): AsyncGenerator<Uint8Array> {
    let offset = prefix.byteLength;
    for (let index = 0; ; index++) {
      if (offset === source.size) throw new ArchiveError('truncated', 'The file is truncated: its last part is missing. Nothing was imported.');
      if (offset + 4 > source.size) throw new ArchiveError('truncated', 'The file is truncated. Nothing was imported.');
      const length = readU32(await source.read(offset, 4));
      if (length < TAG_BYTES || length > maxFrame) throw damaged(`part ${index + 1} has an impossible length`);
      if (offset + 4 + length > source.size) throw new ArchiveError('truncated', 'The file is truncated. Nothing was imported.');
      const sealed = await source.read(offset + 4, length);
      offset += 4 + length;
      const last = offset === source.size;
      const plain = await open(index, sealed, last);
      if (!plain) {
        if (index === 0 && !(await open(index, sealed, !last))) {
          throw new ArchiveError('wrong_passphrase', 'The passphrase is wrong (or the file was altered). Nothing was imported.');
        }
        // It opens with the other flag: a frame marked not-last ends the file (cut at a frame boundary), or the last one is followed by more.
        if (last && (await open(index, sealed, false))) throw new ArchiveError('truncated', 'The file is truncated: its last part is missing. Nothing was imported.');
        if (!last && (await open(index, sealed, true))) throw damaged('bytes follow its last part');
        throw damaged(`part ${index + 1} failed its integrity check`);
      }
      onFrame?.(offset);
      yield plain;
      if (last) return;
    }
  }

  async function readManifest(reader: PlainReader): Promise<ArchiveManifest> {
    const record = await reader.record();
    if (record.kind !== 'manifest' || record.size > MAX_MANIFEST_BYTES) throw damaged('it does not begin with a manifest');
    let manifest: ArchiveManifest;
    try {
      manifest = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(await reader.exactly(record.size, 'the manifest'))) as ArchiveManifest;
    } catch (error) {
      if (error instanceof ArchiveError) throw error;
      throw damaged('its manifest is not readable');
    }
    if (typeof manifest?.serverName !== 'string' || !Array.isArray(manifest.entries) || typeof manifest.createdAt !== 'number') throw damaged('its manifest is malformed');
    for (const entry of manifest.entries) {
      if (!KINDS.has(entry?.kind) || typeof entry.name !== 'string' || !Number.isSafeInteger(entry.size) || entry.size < 0) throw damaged('its manifest lists an entry Hearth does not know');
    }
    const count = (kind: string) => manifest.entries.filter((e) => e.kind === kind).length;
    if (count('identity') !== 1 || count('database') !== 1) throw damaged('it does not hold exactly one identity and one database');
    if (manifest.entries.find((e) => e.kind === 'identity')!.size !== 32) throw damaged('its identity is not a 32-byte seed');
    return manifest;
  }

  const first = new PlainReader(frames());
  const manifest = await readManifest(first);

  async function run(visit: ((entry: ArchiveEntry, data: AsyncIterable<Uint8Array>) => Promise<void>) | undefined, phase: ArchiveProgress['phase'], onProgress?: (progress: ArchiveProgress) => void): Promise<void> {
    const report = (offset: number) => onProgress?.({ phase, doneBytes: offset, totalBytes: source.size });
    const reader = new PlainReader(frames(report));
    await readManifest(reader);
    for (const expected of manifest.entries) {
      const record = await reader.record();
      if (record.kind !== expected.kind || record.name !== expected.name || record.size !== expected.size) throw damaged('its entries do not match its manifest');
      const data = reader.pieces(record.size, `${record.kind} ${record.name}`);
      if (visit) await visit(expected, data);
      // Whatever the visitor left unread is read (and so checked) here.
      for await (const _ of data) void _;
    }
    const end = await reader.record();
    if (end.kind !== 'end' || end.size !== 0 || !(await reader.atEnd())) throw damaged('it does not end where its manifest says');
  }

  return {
    header,
    manifest,
    check: (onProgress) => run(undefined, 'checking', onProgress),
    restore: (visit, onProgress) => run(visit, 'restoring', onProgress),
  };
}

/** The bytes of a small entry, whole (the identity, a peer record). */
export async function collect(data: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const part of data) parts.push(new Uint8Array(part));
  return concat(parts);
}

/** An archive held in memory (tests, small files). */
export function bytesSource(bytes: Uint8Array): ArchiveSource {
  return { size: bytes.byteLength, read: async (offset, length) => bytes.subarray(offset, offset + length) };
}

/** A Blob or File as a source (the browser's import). */
export function blobSource(blob: Blob): ArchiveSource {
  return { size: blob.size, read: async (offset, length) => new Uint8Array(await blob.slice(offset, offset + length).arrayBuffer()) };
}
