import { describe, expect, it } from 'vitest';
import { ArchiveError, bytesSource, checkArchiveIdentity, collect, concat, MAGIC, openArchive, portableSqliteHeader, readU32, writeArchive, type ArchiveEntry, type ArchiveManifest, type EntrySource } from './index.ts';

const ITERATIONS = 1_000; // the default (600,000) costs ~0.5 s a derivation; the format is the same

function entry(kind: ArchiveEntry['kind'], name: string, bytes: Uint8Array, pieceBytes = 7): EntrySource {
  return {
    kind,
    name,
    size: bytes.byteLength,
    *read() {
      for (let i = 0; i < bytes.byteLength; i += pieceBytes) yield bytes.subarray(i, i + pieceBytes);
    },
  };
}

const seed = Uint8Array.from({ length: 32 }, (_, i) => i);
const database = Uint8Array.from({ length: 5000 }, (_, i) => (i * 31) & 0xff);
const media = new TextEncoder().encode('a picture, pretend');

async function archive(options: { chunkBytes?: number; passphrase?: string; entries?: EntrySource[] } = {}): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  await writeArchive({
    passphrase: options.passphrase ?? 'correct horse',
    serverName: 'ab'.repeat(32),
    createdBy: 'test',
    entries: options.entries ?? [entry('identity', '', seed), entry('database', '', database), entry('media', 'abc123', media), entry('peer', '/peers/x', new Uint8Array())],
    write: (bytes) => void parts.push(new Uint8Array(bytes)),
    iterations: ITERATIONS,
    chunkBytes: options.chunkBytes ?? 1000,
    now: () => 1234,
  });
  return concat(parts);
}

async function restored(file: Uint8Array, passphrase = 'correct horse'): Promise<Map<string, Uint8Array>> {
  const opened = await openArchive(bytesSource(file), passphrase);
  await opened.check();
  const out = new Map<string, Uint8Array>();
  await opened.restore(async (e, data) => void out.set(`${e.kind}:${e.name}`, await collect(data)));
  return out;
}

async function refusal(promise: Promise<unknown>): Promise<ArchiveError> {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(ArchiveError);
  return error as ArchiveError;
}

/** The file with its plaintext header JSON rewritten by edit. */
function reheader(file: Uint8Array, edit: (json: string) => string): Uint8Array {
  const length = readU32(file, MAGIC.byteLength);
  const start = MAGIC.byteLength + 4;
  const json = new TextEncoder().encode(edit(new TextDecoder().decode(file.subarray(start, start + length))));
  const size = new Uint8Array(4);
  new DataView(size.buffer).setUint32(0, json.byteLength);
  return concat([MAGIC, size, json, file.subarray(start + length)]);
}

/** The offsets at which frames start (after the plaintext header). */
function frameOffsets(file: Uint8Array): number[] {
  const offsets: number[] = [];
  let at = MAGIC.byteLength + 4 + readU32(file, MAGIC.byteLength);
  while (at < file.byteLength) {
    offsets.push(at);
    at += 4 + readU32(file, at);
  }
  return offsets;
}

describe('the Hearth archive', () => {
  it('round-trips every entry, across many frames, with the manifest first', async () => {
    const file = await archive();
    expect(frameOffsets(file).length).toBeGreaterThan(5);
    const opened = await openArchive(bytesSource(file), 'correct horse');
    expect(opened.manifest).toMatchObject({ format: 1, serverName: 'ab'.repeat(32), createdAt: 1234, createdBy: 'test', totalBytes: 32 + 5000 + media.byteLength });
    expect(opened.manifest.entries.map((e) => `${e.kind}:${e.name}:${e.size}`)).toEqual(['identity::32', 'database::5000', `media:abc123:${media.byteLength}`, 'peer:/peers/x:0']);
    expect(opened.header.kdf).toMatchObject({ name: 'PBKDF2', hash: 'SHA-256', iterations: ITERATIONS });
    const out = await restored(file);
    expect(out.get('identity:')).toEqual(seed);
    expect(out.get('database:')).toEqual(database);
    expect(out.get('media:abc123')).toEqual(media);
    expect(out.get('peer:/peers/x')).toEqual(new Uint8Array());
  });

  it('writes 600,000 PBKDF2 iterations unless told otherwise', async () => {
    const parts: Uint8Array[] = [];
    await writeArchive({ passphrase: 'p', serverName: 's', createdBy: 't', entries: [entry('identity', '', seed), entry('database', '', database)], write: (b) => void parts.push(new Uint8Array(b)) });
    const file = concat(parts);
    expect((await openArchive(bytesSource(file), 'p')).header.kdf.iterations).toBe(600_000);
    // Nothing of the plaintext shows through.
    expect(new TextDecoder().decode(file)).not.toContain('"serverName"');
  });

  it('refuses a wrong passphrase, in words', async () => {
    const error = await refusal(openArchive(bytesSource(await archive()), 'wrong horse'));
    expect(error.code).toBe('wrong_passphrase');
    expect(error.message).toMatch(/passphrase is wrong/);
  });

  it('refuses a file cut at a frame boundary, inside a frame, or inside its header', async () => {
    const file = await archive();
    const offsets = frameOffsets(file);
    for (const cut of [offsets.at(-1)!, offsets[2]!, offsets[2]! + 10, file.byteLength - 1]) {
      const error = await refusal((async () => (await openArchive(bytesSource(file.subarray(0, cut)), 'correct horse')).check())());
      expect(error.code, `cut at ${cut}`).toBe('truncated');
    }
    expect((await refusal(openArchive(bytesSource(file.subarray(0, 20)), 'correct horse'))).code).toBe('truncated');
  });

  it('refuses an altered byte in any frame, an altered header, and frames swapped or appended', async () => {
    const file = await archive();
    const offsets = frameOffsets(file);
    for (const at of [offsets[3]! + 20, file.byteLength - 5]) {
      const altered = new Uint8Array(file);
      altered[at]! ^= 1;
      const error = await refusal((async () => (await openArchive(bytesSource(altered), 'correct horse')).check())());
      expect(error.code).toBe('damaged');
      expect(error.message).toMatch(/part \d+ failed its integrity check/);
    }
    // The header is bound into every frame: raising the iteration count by one breaks them all.
    const reheaded = reheader(file, (json) => json.replace(`"iterations":${ITERATIONS}`, `"iterations":${ITERATIONS + 1}`));
    expect(reheaded.byteLength).toBe(file.byteLength);
    expect((await refusal(openArchive(bytesSource(reheaded), 'correct horse'))).code).toBe('wrong_passphrase');
    // Frames 2 and 3 (same length) swapped.
    const [a, b, c] = [offsets[2]!, offsets[3]!, offsets[4]!];
    const swapped = concat([file.subarray(0, a), file.subarray(b, c), file.subarray(a, b), file.subarray(c)]);
    expect((await refusal((async () => (await openArchive(bytesSource(swapped), 'correct horse')).check())())).code).toBe('damaged');
    // A frame from the middle appended after the last.
    const appended = concat([file, file.subarray(a, b)]);
    expect((await refusal((async () => (await openArchive(bytesSource(appended), 'correct horse')).check())())).code).toBe('damaged');
  });

  it('refuses what is not an archive, and a newer format before asking the passphrase', async () => {
    expect((await refusal(openArchive(bytesSource(new TextEncoder().encode('SQLite format 3\0 and more bytes')), 'x'))).code).toBe('not_an_archive');
    const file = await archive();
    const newer = reheader(file, (json) => json.replace('"format":1', '"format":2'));
    const error = await refusal(openArchive(bytesSource(newer), 'correct horse'));
    expect(error.code).toBe('newer_format');
    expect(error.message).toMatch(/newer Hearth \(format 2\)/);
  });

  it('refuses an archive without exactly one identity and one database', async () => {
    const file = await archive({ entries: [entry('database', '', database)] });
    expect((await refusal(openArchive(bytesSource(file), 'correct horse'))).message).toMatch(/one identity and one database/);
  });

  it('says when an entry changed size while it was read', async () => {
    const liar: EntrySource = { kind: 'media', name: 'abc', size: 10, *read() { yield new Uint8Array(4); } };
    await expect(archive({ entries: [entry('identity', '', seed), liar] })).rejects.toThrow(/changed while it was read: 4 bytes, not 10/);
  });

  it('makes a WAL database copy an ordinary one, and refuses what is not SQLite', () => {
    const page = new Uint8Array(100);
    page.set(new TextEncoder().encode('SQLite format 3\0'));
    page[18] = 2;
    page[19] = 2;
    portableSqliteHeader(page);
    expect([page[18], page[19]]).toEqual([1, 1]);
    expect(() => portableSqliteHeader(new Uint8Array(100))).toThrow(/not an SQLite file/);
  });
});

describe('checkArchiveIdentity', () => {
  const manifest = (serverName: string) => ({ serverName }) as ArchiveManifest;
  const hex = (c: string) => c.repeat(64);
  it('refuses a seed that is not the Hearth server its manifest names, and passes the one that is, or a DNS name', () => {
    expect(() => checkArchiveIdentity(manifest(hex('a')), hex('b'))).toThrow(expect.objectContaining({ code: 'bad_entry', message: expect.stringContaining('Nothing was imported') }));
    expect(() => checkArchiveIdentity(manifest(hex('a')), hex('a'))).not.toThrow();
    expect(() => checkArchiveIdentity(manifest('hs.example.org'), hex('b'))).not.toThrow();
  });
});
