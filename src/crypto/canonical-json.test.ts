import { describe, expect, it } from 'vitest';
import { SPEC_CANONICAL_EXAMPLES } from '../../test/unit/canonical-json-vectors.ts';
import { assertStrictJsonText, assertStrictValues, canonicalJson, CanonicalJsonError, utf8 } from './canonical-json.ts';

const hex = (text: string) => Array.from(utf8(text), (b) => b.toString(16).padStart(2, '0')).join('');

describe('canonical JSON: spec examples (spec-vectors §2a)', () => {
  const examples = SPEC_CANONICAL_EXAMPLES;
  it.each(examples)('%s', (input, output) => {
    expect(canonicalJson(JSON.parse(input))).toBe(output);
  });
});

describe('canonical JSON: gomatrixserverlib TestCanonicalConversion (§2b)', () => {
  const cases: [string, string][] = [
    ['{"\\u00F1":0}', '{"ñ":0}'],
    ['{"\\ud83d\\udc08":0}', '{"🐈":0}'],
    ['{"a":-0}', '{"a":0}'],
    ['{"b":0,"a":1}', '{"a":1,"b":0}'],
    ['{"a":[{"b":0,"a":1},{"b":0,"a":1}]}', '{"a":[{"a":1,"b":0},{"a":1,"b":0}]}'],
    ['{"a": 0}', '{"a":0}'],
    [
      '{ "\\u00F1": -0, "2": 0, "1": 9007199254740991, "4": [{"2": 0, "1": 0},{"2": 0, "1": 0}] }',
      '{"1":9007199254740991,"2":0,"4":[{"1":0,"2":0},{"1":0,"2":0}],"ñ":0}',
    ],
  ];
  it.each(cases)('%s', (input, output) => {
    expect(canonicalJson(JSON.parse(input))).toBe(output);
  });
});

describe('canonical JSON: escapes (TestCompactJSON, §2b)', () => {
  it.each([
    ['["\\u0008\\u0009\\u000A\\u000B\\u000C\\u000D\\u000E\\u000F"]', '["\\b\\t\\n\\u000b\\f\\r\\u000e\\u000f"]'],
    [
      '["\\u0018\\u0019\\u001A\\u001B\\u001C\\u001D\\u001E\\u001F"]',
      '["\\u0018\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f"]',
    ],
    ['["\\u0061\\u005C\\u0042\\u0022"]', '["a\\\\B\\""]'],
    ['["\\/"]', '["/"]'],
    ['["\\uD842\\uDC20"]', '["\u{20820}"]'],
  ])('%s → %s', (input, output) => {
    expect(canonicalJson(JSON.parse(input))).toBe(output);
  });
});

describe('canonical JSON: edge cases (§2c)', () => {
  it('escapes control characters like the spec snippet', () => {
    expect(canonicalJson(JSON.parse('{"a":"\\u0000\\u0001\\u0008\\u0009\\u000a\\u000b\\u000c\\u000d\\u001f"}'))).toBe(
      '{"a":"\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f"}',
    );
  });
  it('leaves DEL and C1 characters raw', () => {
    expect(hex(canonicalJson(JSON.parse('{"a":"\\u007f\\u0080"}')))).toBe('7b2261223a227fc280227d');
  });
  it('does not escape /', () => {
    expect(canonicalJson(JSON.parse('{"a":"\\"\\\\\\/"}'))).toBe('{"a":"\\"\\\\/"}');
  });
  it('leaves U+2028 and U+2029 raw', () => {
    expect(hex(canonicalJson(JSON.parse('{"a":"\\u2028\\u2029"}')))).toBe('7b2261223a22e280a8e280a9227d');
  });
  it('orders keys by code point, not UTF-16 unit', () => {
    const out = canonicalJson(JSON.parse('{"\\ud83d\\udc08":1,"\\uffff":2,"\\ue000":3}'));
    expect(hex(out)).toBe('7b22ee8080223a332c22efbfbf223a322c22f09f9088223a317d');
  });
  it('sorts booleans and null keys', () => {
    expect(canonicalJson({ t: true, f: false, n: null })).toBe('{"f":false,"n":null,"t":true}');
  });
  it('keeps the safe-integer bounds', () => {
    const text = '{"max":9007199254740991,"min":-9007199254740991}';
    expect(canonicalJson(JSON.parse(text), { strict: true })).toBe(text);
  });
});

describe('strict canonical JSON (room v6+)', () => {
  it.each(['{"a":-0}', '{"a":9007199254740992}', '{"a":-9007199254740992}', '{"a":1e5}', '{"a":1.5}'])(
    'rejects %s by lexical check (TestVerifyCanonical)',
    (text) => {
      expect(() => assertStrictJsonText(text)).toThrow(CanonicalJsonError);
    },
  );
  it('accepts the TestVerifyCanonical valid document', () => {
    const text = '{"1":9007199254740991,"2":0,"3":-9007199254740991,"4":[{"1":0,"2":0},{"1":0,"2":0}],"ñ":0}';
    expect(() => assertStrictJsonText(text)).not.toThrow();
    expect(() => assertStrictValues(JSON.parse(text))).not.toThrow();
  });
  it('ignores number-like text inside strings', () => {
    expect(() => assertStrictJsonText('{"a":"1.5e5 -0","b\\"1.5":2}')).not.toThrow();
  });
  it('rejects parsed values out of range, floats and -0', () => {
    expect(() => canonicalJson({ a: -0 }, { strict: true })).toThrow(CanonicalJsonError);
    expect(() => canonicalJson({ a: 1.5 }, { strict: true })).toThrow(CanonicalJsonError);
    expect(() => canonicalJson({ a: 2 ** 53 }, { strict: true })).toThrow(CanonicalJsonError);
  });
  it('TestJSONIntegerRanges: valid in v1, invalid in v6', () => {
    const value = JSON.parse('{"foo": 9007199254740991, "bar": {"baz": 9007199254740991, "qux": {"another": [9007199254740998]}}}');
    expect(() => canonicalJson(value)).not.toThrow();
    expect(() => canonicalJson(value, { strict: true })).toThrow(CanonicalJsonError);
  });
  it('TestJSONFloats: valid in v1, invalid in v6', () => {
    expect(canonicalJson({ foo: 1.1 })).toBe('{"foo":1.1}');
    expect(() => canonicalJson({ foo: 1.1 }, { strict: true })).toThrow(CanonicalJsonError);
  });
});
