// Unpadded base64 (Matrix appendices §Unpadded Base64), standard and URL-safe.
// Written by hand: Buffer is Node-only, btoa/atob need binary strings, and no
// small maintained library offers both alphabets with lenient padding on decode.

const STANDARD = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const URL_SAFE = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

function buildDecodeTable(alphabet: string): Int16Array {
  const table = new Int16Array(128).fill(-1);
  for (let i = 0; i < alphabet.length; i++) table[alphabet.charCodeAt(i)] = i;
  return table;
}
const STANDARD_DECODE = buildDecodeTable(STANDARD);
const URL_SAFE_DECODE = buildDecodeTable(URL_SAFE);

function encode(bytes: Uint8Array, alphabet: string): string {
  let out = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + alphabet[(n >> 6) & 63]! + alphabet[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    out += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]!;
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + alphabet[(n >> 6) & 63]!;
  }
  return out;
}

export class Base64Error extends Error {
  override name = 'Base64Error';
}

function decode(text: string, table: Int16Array): Uint8Array {
  let end = text.length;
  // Padding is optional on input (the spec says decoders SHOULD accept both).
  while (end > 0 && text.charCodeAt(end - 1) === 61 /* = */ && text.length - end < 2) end--;
  if (end % 4 === 1) throw new Base64Error('invalid base64 length');
  if (end !== text.length && text.length % 4 !== 0) throw new Base64Error('invalid base64 padding');
  const out = new Uint8Array(Math.floor((end * 3) / 4));
  let acc = 0;
  let bits = 0;
  let o = 0;
  for (let i = 0; i < end; i++) {
    const c = text.charCodeAt(i);
    const v = c < 128 ? table[c]! : -1;
    if (v < 0) throw new Base64Error(`invalid base64 character at ${i}`);
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
    }
  }
  return out;
}

export const encodeBase64 = (bytes: Uint8Array): string => encode(bytes, STANDARD);
export const encodeBase64Url = (bytes: Uint8Array): string => encode(bytes, URL_SAFE);
export const decodeBase64 = (text: string): Uint8Array => decode(text, STANDARD_DECODE);
export const decodeBase64Url = (text: string): Uint8Array => decode(text, URL_SAFE_DECODE);
