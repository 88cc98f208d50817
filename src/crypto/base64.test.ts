import { describe, expect, it } from 'vitest';
import { decodeBase64, decodeBase64Url, encodeBase64, encodeBase64Url, Base64Error } from './base64.ts';
import { utf8 } from './canonical-json.ts';

// spec-vectors.md §1
const VECTORS: [string, string][] = [
  ['', ''],
  ['f', 'Zg'],
  ['fo', 'Zm8'],
  ['foo', 'Zm9v'],
  ['foob', 'Zm9vYg'],
  ['fooba', 'Zm9vYmE'],
  ['foobar', 'Zm9vYmFy'],
];

describe('unpadded base64', () => {
  it.each(VECTORS)('encodes %j as %j', (input, output) => {
    expect(encodeBase64(utf8(input))).toBe(output);
    expect(encodeBase64Url(utf8(input))).toBe(output);
  });

  it.each(VECTORS)('decodes %j with and without padding', (input, output) => {
    const padded = output + '='.repeat((4 - (output.length % 4)) % 4);
    expect(new TextDecoder().decode(decodeBase64(output))).toBe(input);
    expect(new TextDecoder().decode(decodeBase64(padded))).toBe(input);
    expect(new TextDecoder().decode(decodeBase64Url(padded))).toBe(input);
  });

  it('uses - and _ for indices 62 and 63 in the URL-safe alphabet', () => {
    const bytes = new Uint8Array([0xfb, 0xff, 0xbf]);
    expect(encodeBase64(bytes)).toBe('+/+/');
    expect(encodeBase64Url(bytes)).toBe('-_-_');
    expect(decodeBase64Url('-_-_')).toEqual(bytes);
    expect(() => decodeBase64('-_-_')).toThrow(Base64Error);
    expect(() => decodeBase64Url('+/+/')).toThrow(Base64Error);
  });

  it('round-trips every byte value', () => {
    const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
    expect(decodeBase64(encodeBase64(bytes))).toEqual(bytes);
    expect(decodeBase64Url(encodeBase64Url(bytes))).toEqual(bytes);
  });

  it('takes a last character whose unused bits are not zero, as Synapse does (multiformats alone refuses it)', () => {
    expect(decodeBase64('Zh')).toEqual(utf8('f'));
    expect(decodeBase64('Zm9')).toEqual(utf8('fo'));
    expect(decodeBase64Url('Zm_')).toEqual(decodeBase64('Zm/'));
  });

  it.each(['Z', 'Zm9v!', 'Zm=9', 'Zg=', 'Z===', 'Zg==='])('rejects malformed input %j', (bad) => {
    expect(() => decodeBase64(bad)).toThrow(Base64Error);
  });
});
