// Canonical JSON (Matrix appendices §Canonical JSON). Written by hand because
// JSON.stringify cannot sort keys, and the common "canonicalize" packages sort
// by UTF-16 code unit (RFC 8785) where Matrix sorts by Unicode code point.

import { CodedError } from '../util/coded-error.ts';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export const MAX_SAFE_INTEGER = 2 ** 53 - 1;

/** A value canonical JSON cannot carry: an API answers 400 `M_BAD_JSON`. */
export class CanonicalJsonError extends CodedError {
  override name = 'CanonicalJsonError';
  constructor(message: string) {
    super(400, 'M_BAD_JSON', message);
  }
}

/** Maps a UTF-16 code unit so that plain numeric order equals code point order. */
function codePointRank(unit: number): number {
  if (unit >= 0xd800 && unit <= 0xdfff) return unit + 0x2000; // surrogates sort above the BMP
  if (unit >= 0xe000) return unit - 0x800;
  return unit;
}

/** Compares two strings by Unicode code point (equivalently by their UTF-8 bytes). */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

export interface CanonicalOptions {
  /** Room version 6+: only integers in ±(2^53−1), no floats, no -0. */
  strict?: boolean;
}

function encodeNumber(n: number, strict: boolean): string {
  if (!Number.isFinite(n)) throw new CanonicalJsonError(`non-finite number ${n}`);
  if (strict) {
    if (!Number.isInteger(n)) throw new CanonicalJsonError(`float ${n} is not allowed`);
    if (Math.abs(n) > MAX_SAFE_INTEGER) throw new CanonicalJsonError(`integer ${n} is out of range`);
    if (Object.is(n, -0)) throw new CanonicalJsonError('-0 is not allowed');
  }
  return JSON.stringify(n); // -0 → "0", 1e10 → "10000000000"
}

function encodeValue(value: unknown, strict: boolean): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return encodeNumber(value, strict);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) return '[' + value.map((v) => encodeValue(v, strict)).join(',') + ']';
      const obj = value as Record<string, unknown>;
      const keys = Object.keys(obj).filter((k) => obj[k] !== undefined).sort(compareCodePoints);
      let out = '{';
      for (let i = 0; i < keys.length; i++) {
        if (i > 0) out += ',';
        out += JSON.stringify(keys[i]) + ':' + encodeValue(obj[keys[i]!], strict);
      }
      return out + '}';
    }
    default:
      throw new CanonicalJsonError(`cannot encode ${typeof value} as JSON`);
  }
}

/** Encodes a value as canonical JSON. Throws CanonicalJsonError for values strict mode forbids. */
export function canonicalJson(value: unknown, options: CanonicalOptions = {}): string {
  return encodeValue(value, options.strict ?? false);
}

/** Checks a parsed value against strict canonical JSON's number rules. */
export function assertStrictValues(value: unknown): void {
  encodeValue(value, true);
}

/**
 * Checks the raw text of a JSON document for number tokens strict canonical JSON forbids.
 * Needed because JSON.parse turns `1e5` into 100000 and hides it; it also finds `-0`
 * and integers beyond ±(2^53−1). Assumes the text is otherwise valid JSON.
 */
export function assertStrictJsonText(text: string): void {
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      i++;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d === 92 /* \ */) i += 2;
        else if (d === 34) break;
        else i++;
      }
      i++;
      continue;
    }
    if (c === 45 /* - */ || (c >= 48 && c <= 57)) {
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if ((d >= 48 && d <= 57) || d === 46 || d === 101 || d === 69 || d === 43 || d === 45) j++;
        else break;
      }
      const token = text.slice(i, j);
      if (/[.eE]/.test(token)) throw new CanonicalJsonError(`number ${token} is not an integer literal`);
      if (token === '-0') throw new CanonicalJsonError('-0 is not allowed');
      const value = Number(token);
      if (Math.abs(value) > MAX_SAFE_INTEGER) throw new CanonicalJsonError(`integer ${token} is out of range`);
      i = j;
      continue;
    }
    i++;
  }
}

const encoder = new TextEncoder();
export const utf8 = (text: string): Uint8Array => encoder.encode(text);
