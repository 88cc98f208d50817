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

/**
 * An object's members in canonical order, each encoded once as `"key":value`. Several
 * canonical forms of one object (an event for its size, without its hashes for the
 * content hash, redacted for its ID and signatures) are joined from the same pieces
 * instead of each being encoded afresh: an event's members are encoded once however
 * many of its forms are needed.
 */
export class CanonicalMembers {
  /** The keys with a defined value, in canonical order. */
  readonly keys: readonly string[];
  private readonly pieces: string[];
  private readonly strict: boolean;

  constructor(object: object, options: CanonicalOptions = {}) {
    const obj = object as Record<string, unknown>;
    this.strict = options.strict ?? false;
    this.keys = Object.keys(obj).filter((k) => obj[k] !== undefined).sort(compareCodePoints);
    this.pieces = this.keys.map((k) => JSON.stringify(k) + ':' + encodeValue(obj[k], this.strict));
  }

  /**
   * The canonical JSON of the object with only the members `keep` accepts, and with
   * `replace`'s members (kept or not, present or not) in place of the object's own.
   */
  join(keep: (key: string) => boolean, replace: Record<string, unknown> = {}): string {
    const replaced = Object.keys(replace).filter((k) => replace[k] !== undefined);
    const entries: [string, string][] = [];
    for (let i = 0; i < this.keys.length; i++) {
      const key = this.keys[i]!;
      if (keep(key) && !Object.hasOwn(replace, key)) entries.push([key, this.pieces[i]!]);
    }
    for (const key of replaced) entries.push([key, JSON.stringify(key) + ':' + encodeValue(replace[key], this.strict)]);
    if (replaced.length > 0) entries.sort((a, b) => compareCodePoints(a[0], b[0]));
    let out = '{';
    for (let i = 0; i < entries.length; i++) out += (i > 0 ? ',' : '') + entries[i]![1];
    return out + '}';
  }

  /** The UTF-8 length of join(keep), without building it. */
  byteLength(keep: (key: string) => boolean): number {
    let total = 2; // the braces
    let count = 0;
    for (let i = 0; i < this.keys.length; i++) {
      if (!keep(this.keys[i]!)) continue;
      total += utf8Length(this.pieces[i]!);
      count++;
    }
    return total + Math.max(0, count - 1);
  }
}

/** The UTF-8 length of a string (lone surrogates count as U+FFFD's 3 bytes, as TextEncoder writes them). */
export function utf8Length(text: string): number {
  let n = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 2; // a pair: 4 bytes for 2 units
      i++;
    } else n += 2;
  }
  return n;
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
