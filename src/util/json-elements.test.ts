import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { splitJsonObject, type JsonElements } from './json-elements.ts';

const encode = (text: string) => new TextEncoder().encode(text);
const elementsOf = (elements: JsonElements | undefined) => (elements ? [...elements] : undefined);
/** What the split gives back as one value, to compare with JSON.parse's. */
const joined = (text: string, keys: string[]) => {
  const { fields, arrays } = splitJsonObject(encode(text), keys);
  const out: Record<string, unknown> = { ...fields };
  for (const [key, elements] of arrays) out[key] = elementsOf(elements);
  return out;
};
const runs = Number(process.env['HEARTH_FUZZ_RUNS'] ?? 200);

describe('splitJsonObject', () => {
  it('keeps the named arrays as elements and parses the rest', () => {
    const { fields, arrays } = splitJsonObject(encode(' {"origin":"a","state":[{"x":"]}\\""} , [1,[2]] ,"é"],"n":-1.5e3,"auth_chain":[]} '), ['state', 'auth_chain', 'absent']);
    expect(fields).toEqual({ origin: 'a', n: -1500 });
    expect(elementsOf(arrays.get('state'))).toEqual([{ x: ']}"' }, [1, [2]], 'é']);
    expect(arrays.get('auth_chain')!.length).toBe(0);
    expect(arrays.has('absent')).toBe(false);
  });

  it('parses a named member that is not an array as any other, and the last of a repeated name wins', () => {
    expect(splitJsonObject(encode('{"state":{"a":1}}'), ['state']).fields).toEqual({ state: { a: 1 } });
    expect(joined('{"state":[1],"state":2}', ['state'])).toEqual({ state: 2 });
    expect(joined('{"state":2,"state":[1]}', ['state'])).toEqual({ state: [1] });
  });

  it('keeps __proto__ as a member, as JSON.parse does', () => {
    const { fields } = splitJsonObject(encode('{"__proto__":{"polluted":true}}'), []);
    expect(Object.getPrototypeOf(fields)).toBe(Object.prototype);
    expect(Object.keys(fields)).toEqual(['__proto__']);
  });

  it.each(['', '[]', '"x"', '{', '{"a"}', '{"a":}', '{"a":1,}', '{"a":1 "b":2}', '{"a":[1 2]}', '{"a":[1,]}', '{"a":1}x', '{"a":"\\"}', '{"a":tru e}', '\uFEFF{}'])(
    'refuses %j, which is no JSON object',
    (text) => {
      expect(() => elementsOf(splitJsonObject(encode(text), ['a']).arrays.get('a'))).toThrow(SyntaxError);
    },
  );

  it('gives what JSON.parse gives for any JSON object, however spaced', () => {
    const keys = ['state', 'auth_chain'];
    const object = fc.record({ state: fc.array(fc.jsonValue()), auth_chain: fc.jsonValue(), other: fc.jsonValue() }, { requiredKeys: [] });
    fc.assert(
      fc.property(object, fc.dictionary(fc.string(), fc.jsonValue()), fc.constantFrom(undefined, 1, '\t', ' \r\n'), (named, rest, space) => {
        const text = JSON.stringify({ ...rest, ...named }, null, space);
        expect(joined(text, keys)).toEqual(JSON.parse(text));
      }),
      { numRuns: runs, seed: 23 },
    );
  });

  it('accepts no text JSON.parse refuses: what it splits and parses, JSON.parse parses the same', () => {
    const nearJson = fc.oneof(
      fc.jsonValue().map((v) => JSON.stringify({ state: [v], v })),
      fc.string({ unit: fc.constantFrom(...'{}[],:" \\a1-.e\n'.split('')) }),
    ).chain((text) => fc.tuple(fc.constant(text), fc.nat(text.length), fc.string({ maxLength: 3, unit: fc.constantFrom(...'{}[],:" \\'.split('')) })));
    fc.assert(
      fc.property(nearJson, ([text, at, insert]) => {
        const mutated = text.slice(0, at) + insert + text.slice(at);
        let split: Record<string, unknown> | undefined;
        try {
          split = joined(mutated, ['state']);
        } catch (error) {
          expect(error).toBeInstanceOf(SyntaxError);
        }
        let parsed: unknown;
        let parseable = true;
        try {
          parsed = JSON.parse(mutated);
        } catch {
          parseable = false;
        }
        if (split !== undefined) expect(parsed).toEqual(split);
        if (parseable && typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) expect(split).toBeDefined();
      }),
      { numRuns: runs * 5, seed: 23 },
    );
  });
});
