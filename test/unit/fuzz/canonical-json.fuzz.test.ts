import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assertStrictJsonText, assertStrictValues, canonicalJson, CanonicalJsonError, CanonicalMembers, MAX_SAFE_INTEGER } from '../../../src/crypto/canonical-json.ts';
import { fuzzParameters, fuzzTimeout } from '../../support/fuzz.ts';
import { SPEC_CANONICAL_EXAMPLES } from '../canonical-json-vectors.ts';

// Properties of canonical JSON (appendices §Canonical JSON), anchored on the vectors of
// /work/shared/spec-vectors.md §2: whatever the key order, whitespace or escapes of the input,
// the output is the one the spec gives, and it parses back to the same value.

const params = fuzzParameters(200);
const bytes = (s: string) => Buffer.from(s, 'utf8');
/** The oracle for key order: compare by UTF-8 bytes (equivalent to code points), not UTF-16 units. */
const byUtf8 = (a: string, b: string) => Buffer.compare(bytes(a), bytes(b));
/** Any string, astral and lone surrogates included. */
const anyString = fc.string({ unit: 'binary', maxLength: 8 });
const anyKey = fc.oneof(anyString, fc.constantFrom('a', 'b', '\u{1F408}', '\uffff', '\ue000', '__proto__', 'constructor', '1', '10', '2'));
const jsonValue = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer({ min: -MAX_SAFE_INTEGER, max: MAX_SAFE_INTEGER }),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    anyString,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(anyKey, tie('value'), { maxKeys: 5, noNullPrototype: true }),
  ),
})).value;

/** The same value with every object's keys inserted in another order. */
function shuffled(value: unknown, rank: (key: string) => number): unknown {
  if (Array.isArray(value)) return value.map((v) => shuffled(v, rank));
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort((a, b) => rank(a) - rank(b))) {
    Object.defineProperty(out, key, { value: shuffled((value as Record<string, unknown>)[key], rank), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** JSON text for a value with every string escaped differently (\uXXXX for some characters) and arbitrary whitespace. */
function respelled(value: unknown, escape: (code: number) => boolean, space: string): string {
  const str = (s: string) => '"' + [...s].map((ch) => {
    const code = ch.codePointAt(0)!;
    if (code > 0xffff || !escape(code)) return JSON.stringify(ch).slice(1, -1);
    return '\\u' + code.toString(16).padStart(4, '0');
  }).join('') + '"';
  const go = (v: unknown): string => {
    if (Array.isArray(v)) return '[' + space + v.map(go).join(space + ',' + space) + space + ']';
    if (typeof v === 'object' && v !== null) {
      return '{' + space + Object.keys(v).map((k) => str(k) + space + ':' + space + go((v as Record<string, unknown>)[k])).join(',' + space) + space + '}';
    }
    return typeof v === 'string' ? str(v) : JSON.stringify(v);
  };
  return go(value);
}

const vectors: [string, string][] = [
  ...SPEC_CANONICAL_EXAMPLES,
  // §2b and §2c
  ['{ "\\u00F1": -0, "2": 0, "1": 9007199254740991, "4": [{"2": 0, "1": 0},{"2": 0, "1": 0}] }', '{"1":9007199254740991,"2":0,"4":[{"1":0,"2":0},{"1":0,"2":0}],"ñ":0}'],
  ['{"\\ud83d\\udc08":1,"\\uffff":2,"\\ue000":3}', '{"\ue000":3,"\uffff":2,"\u{1F408}":1}'],
  ['{"a":"\\u0000\\u0001\\u0008\\u0009\\u000a\\u000b\\u000c\\u000d\\u001f"}', '{"a":"\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f"}'],
  ['{"a":"\\"\\\\\\/"}', '{"a":"\\"\\\\/"}'],
  ['{"t":true,"f":false,"n":null}', '{"f":false,"n":null,"t":true}'],
];

describe('canonical JSON, fuzzed', { timeout: fuzzTimeout }, () => {
  it('each spec vector gives its output whatever the key order, escapes and whitespace of the input', () => {
    for (const [input, output] of vectors) {
      fc.assert(
        fc.property(fc.func(fc.integer()), fc.func(fc.boolean()), fc.constantFrom('', ' ', '\n  ', '\t', '\r\n'), (rank, escape, space) => {
          const text = respelled(shuffled(JSON.parse(input), rank), (c) => escape(c), space);
          expect(canonicalJson(JSON.parse(text)), text).toBe(output);
        }),
        fuzzParameters(20, 10),
      );
    }
  });

  it('round trip: the output parses back to the value (-0 as 0) and is its own canonical form', () => {
    fc.assert(
      fc.property(jsonValue, (value) => {
        const text = canonicalJson(value);
        const back = JSON.parse(text);
        expect(back).toEqual(JSON.parse(JSON.stringify(value)));
        expect(canonicalJson(back)).toBe(text);
      }),
      params,
    );
  });

  it('key order: by Unicode code point, never by UTF-16 code unit, and independent of insertion order', () => {
    fc.assert(
      fc.property(fc.uniqueArray(anyKey, { maxLength: 8 }), fc.func(fc.integer()), (keys, rank) => {
        const object: Record<string, unknown> = {};
        keys.forEach((k, i) => Object.defineProperty(object, k, { value: i, enumerable: true, writable: true, configurable: true }));
        const expected = '{' + [...keys].sort(byUtf8).map((k) => `${JSON.stringify(k)}:${keys.indexOf(k)}`).join(',') + '}';
        expect(canonicalJson(object)).toBe(expected);
        expect(canonicalJson(shuffled(object, rank))).toBe(expected);
      }),
      params,
    );
  });

  it('number limits: strict mode takes exactly the integers in ±(2^53−1), by value and by text', () => {
    const number = fc.oneof(
      fc.integer({ min: -MAX_SAFE_INTEGER, max: MAX_SAFE_INTEGER }),
      fc.constantFrom(MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 2 ** 60, -0, 0.5, 1e21, 5e-324),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
    );
    fc.assert(
      fc.property(number, (n) => {
        const allowed = Number.isInteger(n) && Math.abs(n) <= MAX_SAFE_INTEGER && !Object.is(n, -0);
        const byValue = () => assertStrictValues({ n, nested: [{ n }] });
        if (allowed) expect(byValue).not.toThrow();
        else expect(byValue).toThrow(CanonicalJsonError);
        // The text check and the value check agree on every number JSON.stringify writes (it writes -0 as 0).
        const text = JSON.stringify({ n });
        const textAllowed = allowed || Object.is(n, -0);
        if (textAllowed) expect(() => assertStrictJsonText(text)).not.toThrow();
        else expect(() => assertStrictJsonText(text), text).toThrow(CanonicalJsonError);
        // Non-strict output is always a plain integer or JSON's own number form.
        expect(JSON.parse(canonicalJson({ n })).n).toBe(Object.is(n, -0) ? 0 : n);
      }),
      params,
    );
  });

  it('the text check never mistakes digits, dashes or escapes inside strings for numbers', () => {
    fc.assert(
      fc.property(fc.dictionary(anyString, fc.oneof(anyString, fc.array(anyString, { maxLength: 3 }), fc.integer({ min: -MAX_SAFE_INTEGER, max: MAX_SAFE_INTEGER })), { maxKeys: 5 }), (value) => {
        expect(() => assertStrictJsonText(JSON.stringify(value))).not.toThrow();
        expect(() => assertStrictJsonText(canonicalJson(value))).not.toThrow();
      }),
      params,
    );
  });

  it('refuses what JSON cannot carry, with CanonicalJsonError and nothing else', () => {
    fc.assert(
      fc.property(fc.oneof(fc.constant(undefined), fc.constant(NaN), fc.constant(Infinity), fc.constant(() => 1), fc.constant(10n), fc.constant(Symbol('s'))), (bad) => {
        expect(() => canonicalJson([bad])).toThrow(CanonicalJsonError);
      }),
      params,
    );
  });

  it('an object joined from its members (some left out, some replaced) is the canonical JSON of that object, and its length is its UTF-8 length', () => {
    fc.assert(
      fc.property(fc.dictionary(anyKey, jsonValue, { maxKeys: 6, noNullPrototype: true }), fc.dictionary(anyKey, jsonValue, { maxKeys: 2, noNullPrototype: true }), fc.nat(), (object, replace, mask) => {
        const members = new CanonicalMembers(object);
        const keep = (key: string) => (members.keys.indexOf(key) + mask) % 3 !== 0;
        expect(members.join(() => true)).toBe(canonicalJson(object));
        expect(members.byteLength(keep)).toBe(bytes(members.join(keep)).length);
        const expected: Record<string, unknown> = {};
        for (const key of Object.keys(object)) if (keep(key) && !Object.hasOwn(replace, key)) Object.defineProperty(expected, key, { value: object[key], enumerable: true });
        for (const key of Object.keys(replace)) Object.defineProperty(expected, key, { value: replace[key], enumerable: true });
        expect(members.join(keep, replace)).toBe(canonicalJson(expected));
      }),
      params,
    );
  });
});
