// CRC-32 (IEEE 802.3, the zlib/PNG polynomial), slicing-by-4 so a 100 MB
// snapshot checks in well under a second. Used to detect torn or damaged log
// records and snapshots, not as a defence against tampering.

const TABLES = makeTables();

function makeTables(): Uint32Array[] {
  const tables = Array.from({ length: 4 }, () => new Uint32Array(256));
  const t0 = tables[0]!;
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t0[n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    let c = t0[n]!;
    for (let t = 1; t < 4; t++) {
      c = t0[c & 0xff]! ^ (c >>> 8);
      tables[t]![n] = c >>> 0;
    }
  }
  return tables;
}

/** Continues a CRC over more bytes: crc32(b, crc32(a)) === crc32(a ++ b). */
export function crc32(bytes: Uint8Array, previous = 0): number {
  const [t0, t1, t2, t3] = TABLES as [Uint32Array, Uint32Array, Uint32Array, Uint32Array];
  let crc = ~previous >>> 0;
  let i = 0;
  const end4 = bytes.length - (bytes.length % 4);
  for (; i < end4; i += 4) {
    crc ^= bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    crc = t3[crc & 0xff]! ^ t2[(crc >>> 8) & 0xff]! ^ t1[(crc >>> 16) & 0xff]! ^ t0[crc >>> 24]!;
  }
  for (; i < bytes.length; i++) crc = t0[(crc ^ bytes[i]!) & 0xff]! ^ (crc >>> 8);
  return ~crc >>> 0;
}
