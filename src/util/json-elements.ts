/**
 * A JSON object whose big arrays are kept as the bytes of each element, each parsed only
 * when read. A room's state answer (send_join, /state) is ~18 MiB for 10,000 members, and
 * ~3× that as parsed objects: split, it is held once, as bytes, while its events are checked
 * and stored one window at a time.
 *
 * Written by hand because what it needs is only where each element starts and ends:
 * JSON.parse (native) still parses every element and every other member, so what is
 * accepted is what JSON.parse accepts. A streaming JSON parser in JavaScript
 * (@streamparser/json) tokenizes every byte itself and was measured at 6× JSON.parse here.
 */

/** The elements of one array, as byte ranges of the body they came in. */
export class JsonElements {
  /** `bounds` holds each element's start and end (exclusive) in turn. */
  constructor(
    private readonly bytes: Uint8Array,
    private readonly bounds: Uint32Array,
  ) {}

  get length(): number {
    return this.bounds.length / 2;
  }

  /** Element `index`, parsed now (a new object each time). Throws a SyntaxError when it is not JSON. */
  parse(index: number): unknown {
    return JSON.parse(decoder.decode(this.bytes.subarray(this.bounds[2 * index], this.bounds[2 * index + 1])));
  }

  /** Each element, parsed in turn. */
  *[Symbol.iterator](): IterableIterator<unknown> {
    for (let i = 0; i < this.length; i++) yield this.parse(i);
  }
}

export interface SplitJsonObject {
  /** The object's other members, parsed. */
  fields: Record<string, unknown>;
  /** The members named in `arrayKeys` that are arrays. */
  arrays: Map<string, JsonElements>;
}

// Not fatal, as Response.text() is not: bytes that are no UTF-8 become U+FFFD (and fail what is signed).
const decoder = new TextDecoder();

// The bytes JSON's structure is made of. Inside UTF-8's multibyte sequences every byte is ≥ 0x80,
// so scanning bytes for these never stops inside a character.
const QUOTE = 0x22, BACKSLASH = 0x5c, COMMA = 0x2c, COLON = 0x3a;
const OPEN_OBJECT = 0x7b, CLOSE_OBJECT = 0x7d, OPEN_ARRAY = 0x5b, CLOSE_ARRAY = 0x5d;
const isSpace = (b: number | undefined) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

/**
 * Splits a JSON object: members named in `arrayKeys` whose values are arrays are kept as
 * elements; every other member is parsed. Throws a SyntaxError for what is not a JSON object
 * (an element that is not JSON is found when it is parsed).
 */
export function splitJsonObject(bytes: Uint8Array, arrayKeys: readonly string[]): SplitJsonObject {
  const fields: Record<string, unknown> = {};
  const arrays = new Map<string, JsonElements>();
  const fail = (what: string, at: number): never => {
    throw new SyntaxError(`not a JSON object: ${what} at byte ${at}`);
  };
  const skipSpace = (at: number) => {
    while (isSpace(bytes[at])) at++;
    return at;
  };
  const endOfString = (at: number) => {
    for (let i = at + 1; i < bytes.length; i++) {
      const b = bytes[i];
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) return i + 1;
    }
    return fail('an unterminated string', at);
  };
  /** Where the value starting at `at` ends; nested values are matched by depth, their content checked by JSON.parse later. */
  const endOfValue = (at: number): number => {
    const first = bytes[at];
    if (first === QUOTE) return endOfString(at);
    if (first !== OPEN_OBJECT && first !== OPEN_ARRAY) {
      let i = at;
      while (i < bytes.length && !isSpace(bytes[i]) && bytes[i] !== COMMA && bytes[i] !== CLOSE_OBJECT && bytes[i] !== CLOSE_ARRAY) i++;
      return i === at ? fail('a missing value', at) : i;
    }
    let depth = 0;
    for (let i = at; i < bytes.length; i++) {
      const b = bytes[i];
      if (b === QUOTE) i = endOfString(i) - 1;
      else if (b === OPEN_OBJECT || b === OPEN_ARRAY) depth++;
      else if ((b === CLOSE_OBJECT || b === CLOSE_ARRAY) && --depth === 0) return i + 1;
    }
    return fail('an unterminated value', at);
  };
  const parseSlice = (from: number, to: number): unknown => JSON.parse(decoder.decode(bytes.subarray(from, to)));

  let at = skipSpace(0);
  if (bytes[at] !== OPEN_OBJECT) fail('no object', at);
  at = skipSpace(at + 1);
  if (bytes[at] === CLOSE_OBJECT) at++;
  else {
    for (;;) {
      if (bytes[at] !== QUOTE) fail('no member name', at);
      const nameEnd = endOfString(at);
      const name = parseSlice(at, nameEnd) as string;
      at = skipSpace(nameEnd);
      if (bytes[at] !== COLON) fail('no colon', at);
      at = skipSpace(at + 1);
      if (arrayKeys.includes(name) && bytes[at] === OPEN_ARRAY) {
        const bounds: number[] = [];
        at = skipSpace(at + 1);
        if (bytes[at] === CLOSE_ARRAY) at++;
        else {
          for (;;) {
            const end = endOfValue(at);
            bounds.push(at, end);
            at = skipSpace(end);
            if (bytes[at] === CLOSE_ARRAY) break;
            if (bytes[at] !== COMMA) fail('no comma between elements', at);
            at = skipSpace(at + 1);
          }
          at++;
        }
        delete fields[name];
        arrays.set(name, new JsonElements(bytes, Uint32Array.from(bounds)));
      } else {
        const end = endOfValue(at);
        // As JSON.parse does: a member named __proto__ is a member, not the object's prototype.
        Object.defineProperty(fields, name, { value: parseSlice(at, end), enumerable: true, writable: true, configurable: true });
        arrays.delete(name);
        at = end;
      }
      at = skipSpace(at);
      if (bytes[at] === CLOSE_OBJECT) {
        at++;
        break;
      }
      if (bytes[at] !== COMMA) fail('no comma between members', at);
      at = skipSpace(at + 1);
    }
  }
  if (skipSpace(at) !== bytes.length) fail('more after the object', at);
  return { fields, arrays };
}
