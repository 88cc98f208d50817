// CRC-32 (IEEE 802.3, the zlib/PNG polynomial), slicing-by-8 so a 100 MB
// snapshot checks in a few hundred milliseconds. Used to detect torn or
// damaged log records and snapshots, not as a defence against tampering.

const TABLES = makeTables();
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

function makeTables(): Uint32Array {
  // Eight 256-entry tables back to back: table t at offset t * 256.
  const tables = new Uint32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    tables[n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    let c = tables[n]!;
    for (let t = 1; t < 8; t++) {
      c = tables[c & 0xff]! ^ (c >>> 8);
      tables[t * 256 + n] = c >>> 0;
    }
  }
  return tables;
}

/** Continues a CRC over more bytes: crc32(b, crc32(a)) === crc32(a ++ b). */
export function crc32(bytes: Uint8Array, previous = 0): number {
  const t = TABLES;
  let crc = ~previous >>> 0;
  let i = 0;
  // Bytes up to a 4-byte boundary, then whole little-endian words (fewer loads), then the rest.
  const head = Math.min(bytes.length, (4 - ((bytes.byteOffset + i) % 4)) % 4);
  for (; i < head; i++) crc = t[(crc ^ bytes[i]!) & 0xff]! ^ (crc >>> 8);
  const words = (bytes.length - i) >>> 3 << 1;
  if (words > 0 && LITTLE_ENDIAN) {
    const view = new Uint32Array(bytes.buffer, bytes.byteOffset + i, words);
    for (let w = 0; w < words; w += 2) {
      const lo = crc ^ view[w]!;
      const hi = view[w + 1]!;
      crc =
        t[1792 + (lo & 0xff)]! ^ t[1536 + ((lo >>> 8) & 0xff)]! ^ t[1280 + ((lo >>> 16) & 0xff)]! ^ t[1024 + (lo >>> 24)]! ^
        t[768 + (hi & 0xff)]! ^ t[512 + ((hi >>> 8) & 0xff)]! ^ t[256 + ((hi >>> 16) & 0xff)]! ^ t[hi >>> 24]!;
    }
    i += words * 4;
  }
  for (; i < bytes.length; i++) crc = t[(crc ^ bytes[i]!) & 0xff]! ^ (crc >>> 8);
  return ~crc >>> 0;
}
