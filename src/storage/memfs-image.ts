import type { Database as SqlJsDatabase } from 'sql.js';
import { crc32 } from './crc32.ts';

/**
 * A snapshot of the SQLite image read in slices straight from the file sql.js
 * keeps in Emscripten's MEMFS, instead of `db.export()`, which copies the whole
 * image at once (a 100 MB database then needs 200 MB while a snapshot is
 * stored). Hand-written because sql.js (1.17) offers no incremental export or
 * backup API and does not export its FS object.
 *
 * Consistency is copy-on-write: from the moment the source opens (between write
 * groups, no transaction open) until it is released, the first write to each
 * block of the file that has not yet been read out saves the block's old bytes,
 * and so does a truncation for the blocks it cuts. A slice read later is the
 * file's current bytes with the saved blocks laid over them: exactly the image
 * at open time, whatever commits in between (including pages SQLite spills or
 * rolls back). Reads must go in order, so a block already read out is never
 * saved: the extra memory is the blocks written during the snapshot ahead of
 * the reader, plus the slices in flight.
 *
 * The file's bytes are read as `node.contents` each time and never held across
 * a turn: MEMFS reallocates that array when the file grows, and holding the old
 * one would keep a second image alive. (That reallocation is MEMFS's own
 * transient 2× of the file on growth, with or without a snapshot.)
 *
 * How MEMFS is reached without an exported FS: `export()` of a small probe
 * database calls `Object.create(file.stream_ops)` on MEMFS's shared file stream
 * operations, which gives that table; a write of the probe through it gives a
 * node, whose parent directory holds every database file by name. Every step is
 * checked, and `openImageSource` returns null (use `export()`) when sql.js does
 * not look as expected. SQLite must not mmap the file (mmap_size is 0 in
 * sql.js): msync would write past the hook.
 */
export interface ImageSource {
  readonly byteLength: number;
  /** A copy of the next `length` bytes of the image as it was at open; reads go in order from 0. */
  read(length: number): Uint8Array;
  /** CRC-32 of the whole image, once every byte has been read. */
  checksum(): number;
  /** Stops the copy-on-write and frees what it saved. */
  release(): void;
}

/** A MEMFS node; sql.js's release builds minify its property names, so they are found at run time (FileKeys). */
type MemfsNode = Record<string, unknown> & { parent: MemfsNode; name: string };
type WriteOp = (stream: { node: MemfsNode }, ...rest: unknown[]) => number;
type StreamOps = { read: unknown; write: WriteOp };
type SetAttr = (node: MemfsNode, attr: { size?: number }) => void;

interface FileKeys {
  /** The file's bytes (a Uint8Array, possibly longer than the file). */
  contents: string;
  /** The file's length. */
  usedBytes: string;
}

interface Memfs {
  /** The directory holding every database file, and the key of its name → node map. */
  root: MemfsNode;
  dirContents: string;
  keys: FileKeys;
  /** Copy-on-write images by file node; the shared write and setattr operations consult it. */
  active: Map<MemfsNode, CopyOnWriteImage>;
}

const BLOCK = 4096; // SQLite's page size here: its writes are whole pages.
const SQLITE_HEADER = 'SQLite format 3\0';
const found = new WeakMap<object, Memfs | null>();

function isStreamOps(value: unknown): value is StreamOps {
  const ops = value as Partial<StreamOps> | null;
  return typeof ops?.read === 'function' && typeof ops.write === 'function';
}

/** The one key of `object` whose value passes `test`, or undefined when none or several do. */
function onlyKey(object: Record<string, unknown>, test: (value: unknown) => boolean): string | undefined {
  const keys = Object.keys(object).filter((key) => test(object[key]));
  return keys.length === 1 ? keys[0] : undefined;
}

function findMemfs(Database: new () => SqlJsDatabase): Memfs | null {
  const probe = new Database();
  try {
    let ops: StreamOps | undefined;
    const create = Object.create;
    Object.create = function (proto: object | null, properties?: PropertyDescriptorMap) {
      if (!ops && isStreamOps(proto)) ops = proto;
      return properties === undefined ? create(proto) : create(proto, properties);
    } as typeof Object.create;
    try {
      probe.export();
    } finally {
      Object.create = create;
    }
    if (!ops) return null;
    const write = ops.write;
    let written: MemfsNode | undefined;
    ops.write = function (stream, ...rest) {
      written ??= stream.node;
      return write.call(this, stream, ...rest);
    };
    try {
      probe.run('CREATE TABLE probe (x)');
    } finally {
      ops.write = write;
    }
    const filename = (probe as unknown as { filename?: unknown }).filename;
    const root = written?.parent;
    if (typeof filename !== 'string' || !root) return null;
    const dirContents = onlyKey(root, (value) => typeof value === 'object' && value !== null && filename in value);
    if (!dirContents) return null;
    const node = (root[dirContents] as Record<string, MemfsNode>)[filename]!;
    const size = probe.exec('SELECT page_count * page_size FROM pragma_page_count, pragma_page_size')[0]?.values[0]?.[0];
    const usedBytes = onlyKey(node, (value) => value === size);
    const contents = onlyKey(node, (value) => value instanceof Uint8Array && value.length >= Number(size)
      && new TextDecoder().decode(value.subarray(0, 16)) === SQLITE_HEADER);
    // The file's node operations are getattr and setattr: setattr returns nothing (resizing to the same size is a no-op).
    const nodeOpsKey = onlyKey(node, (value) => typeof value === 'object' && value !== null && value !== ops
      && Object.values(value).length === 2 && Object.values(value).every((f) => typeof f === 'function'));
    if (!usedBytes || !contents || !nodeOpsKey || onlyKey(node, (value) => value === ops) === undefined) return null;
    const nodeOps = node[nodeOpsKey] as Record<string, SetAttr>;
    const setattrKey = onlyKey(nodeOps, (f) => (f as SetAttr)(node, { size: Number(size) }) === undefined);
    if (!setattrKey || node[usedBytes] !== size) return null;
    const memfs: Memfs = { root, dirContents, keys: { contents, usedBytes }, active: new Map() };
    ops.write = function (stream, ...rest) {
      if (memfs.active.size > 0) memfs.active.get(stream.node)?.beforeWrite(rest[3] as number, rest[2] as number);
      return write.call(this, stream, ...rest);
    };
    const setattr = nodeOps[setattrKey]!;
    nodeOps[setattrKey] = function (this: unknown, target, attr) {
      if (attr.size !== undefined && memfs.active.size > 0) memfs.active.get(target)?.beforeResize(attr.size);
      return setattr.call(this, target, attr);
    };
    return memfs;
  } catch {
    return null;
  } finally {
    probe.close();
  }
}

class CopyOnWriteImage implements ImageSource {
  private readonly saved = new Map<number, Uint8Array>();
  private readThrough = 0;
  private crc = 0;

  constructor(
    private readonly node: MemfsNode,
    private readonly keys: FileKeys,
    readonly byteLength: number,
    private readonly onRelease: () => void,
  ) {}

  private contents(): Uint8Array {
    return this.node[this.keys.contents] as Uint8Array;
  }

  private usedBytes(): number {
    return this.node[this.keys.usedBytes] as number;
  }

  beforeWrite(position: number, length: number): void {
    this.save(position, position + length);
  }

  beforeResize(size: number): void {
    this.save(size, this.byteLength);
  }

  private save(from: number, to: number): void {
    const end = Math.min(to, this.byteLength);
    const contents = this.contents();
    for (let block = Math.floor(Math.max(from, this.readThrough) / BLOCK); block * BLOCK < end; block++) {
      if (this.saved.has(block)) continue;
      this.saved.set(block, contents.slice(block * BLOCK, Math.min((block + 1) * BLOCK, this.byteLength, this.usedBytes())));
    }
  }

  read(length: number): Uint8Array {
    const at = this.readThrough;
    const end = Math.min(at + length, this.byteLength);
    const out = new Uint8Array(end - at);
    const current = Math.min(end, this.usedBytes());
    if (current > at) out.set(this.contents().subarray(at, current));
    for (let block = Math.floor(at / BLOCK); block * BLOCK < end; block++) {
      const old = this.saved.get(block);
      if (!old) continue;
      const start = block * BLOCK;
      const from = Math.max(at, start);
      out.set(old.subarray(from - start, Math.min(old.length, end - start)), from - at);
      if (start + BLOCK <= end) this.saved.delete(block);
    }
    this.readThrough = end;
    this.crc = crc32(out, this.crc);
    return out;
  }

  checksum(): number {
    if (this.readThrough !== this.byteLength) throw new Error('the image has not been read to its end');
    return this.crc;
  }

  release(): void {
    this.saved.clear();
    this.onRelease();
  }
}

/**
 * Opens a copy-on-write view of `db`'s file, of `byteLength` bytes (page_count ×
 * page_size). Call between write groups. Null when MEMFS cannot be reached or
 * the file does not match: the caller falls back to `export()`.
 */
export function openImageSource(db: SqlJsDatabase, byteLength: number): ImageSource | null {
  const Database = db.constructor as new () => SqlJsDatabase;
  if (!found.has(Database)) found.set(Database, findMemfs(Database));
  const memfs = found.get(Database);
  const filename = (db as unknown as { filename?: string }).filename;
  if (!memfs || !filename) return null;
  const node = (memfs.root[memfs.dirContents] as Record<string, MemfsNode | undefined>)[filename];
  if (!node || !(node[memfs.keys.contents] instanceof Uint8Array) || node[memfs.keys.usedBytes] !== byteLength || memfs.active.has(node)) return null;
  const image = new CopyOnWriteImage(node, memfs.keys, byteLength, () => memfs.active.delete(node));
  memfs.active.set(node, image);
  return image;
}

/**
 * `new sqlJs.Database(image)` without sql.js's copy of the image (it writes it into a
 * new MEMFS file, so a 100 MB database is in memory twice while it opens): the file is
 * created empty, then made to own `image`, before SQLite reads a byte of it (sqlite3_open
 * of an empty file reads nothing; the first statement reads the header and page 1).
 * The caller gives `image` up. Falls back to the copy when MEMFS cannot be reached or
 * `image` is a view into a larger buffer.
 */
export function openDatabaseOwning(Database: new (data?: ArrayLike<number> | null) => SqlJsDatabase, image: Uint8Array): SqlJsDatabase {
  if (!found.has(Database)) found.set(Database, findMemfs(Database));
  const memfs = found.get(Database);
  const whole = image.constructor === Uint8Array && image.byteOffset === 0 && image.byteLength === image.buffer.byteLength;
  if (!memfs || !whole || image.length === 0) return new Database(image);
  const db = new Database(new Uint8Array(0));
  const filename = (db as unknown as { filename?: string }).filename;
  const node = filename === undefined ? undefined : (memfs.root[memfs.dirContents] as Record<string, MemfsNode | undefined>)[filename];
  if (!node || node[memfs.keys.usedBytes] !== 0) {
    db.close();
    return new Database(image);
  }
  node[memfs.keys.contents] = image;
  node[memfs.keys.usedBytes] = image.length;
  return db;
}
