import { crc32 } from './crc32.ts';

/**
 * The redo log's record format. One record holds the statements one committed
 * write (or one group of write transactions committed together) executed, in
 * order, with their bound parameters, so replaying it on the state before
 * reproduces the state after.
 *
 * Payload: statements back to back, each
 *   u8 flags (bit 0: the statement failed and the transaction caught the error)
 *   varint sqlLength, UTF-8 sql
 *   u8 paramsKind (0 none, 1 positional, 2 named), varint count,
 *   then per parameter: [varint nameLength, UTF-8 name if named] u8 tag, value.
 *
 * Log entry (what a Persistence stores under its sequence number):
 *   u32 magic, u32 payloadLength, payload, u32 crc
 * with the CRC over seq (f64) ‖ magic ‖ payloadLength ‖ payload, so a record
 * stored under the wrong sequence number fails the check as surely as a torn one.
 */

/** What sql.js can bind and the log can carry: SqlValue, plus what JS callers may pass regardless of types. */
export type BindValue = string | number | bigint | boolean | Uint8Array | null;
export type BindParams = readonly BindValue[] | Readonly<Record<string, BindValue>>;

export interface LoggedStatement {
  sql: string;
  params: BindValue[] | Record<string, BindValue> | undefined;
  /** The statement threw when first run and the transaction carried on; replay must see it throw too. */
  failed: boolean;
}

const FLAG_FAILED = 1;
const PARAMS_NONE = 0;
const PARAMS_POSITIONAL = 1;
const PARAMS_NAMED = 2;
const TAG_NULL = 0;
const TAG_INT32 = 1;
const TAG_FLOAT64 = 2;
const TAG_TEXT = 3;
const TAG_BLOB = 4;
const TAG_BIGINT = 5;
const TAG_FALSE = 6;
const TAG_TRUE = 7;

const ENTRY_MAGIC = 0x48524431; // "HRD1"
const ENTRY_HEADER_BYTES = 8;
const ENTRY_TRAILER_BYTES = 4;

const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

/** Throws before a statement runs if a parameter could not be logged (and so not replayed). */
export function assertLoggable(params: BindParams | undefined): void {
  if (params === undefined) return;
  const values = Array.isArray(params) ? params : Object.values(params);
  for (const value of values as unknown[]) {
    if (value === null || value instanceof Uint8Array) continue;
    const type = typeof value;
    if (type === 'string' || type === 'number' || type === 'bigint' || type === 'boolean') continue;
    throw new TypeError(`cannot bind a parameter of type ${value === undefined ? 'undefined' : type}; use null, a number, a string or a Uint8Array`);
  }
}

/**
 * Accumulates the statements of the write transactions in flight, encoded at
 * once so a caller mutating its params array afterwards cannot change the log.
 */
export class RedoRecordWriter {
  private buffer = new Uint8Array(4096);
  private view = new DataView(this.buffer.buffer);
  private length = 0;

  get isEmpty(): boolean {
    return this.length === 0;
  }

  get byteLength(): number {
    return this.length;
  }

  reset(): void {
    this.length = 0;
    if (this.buffer.length > 1 << 20) this.grow(0, 4096); // give back memory after a huge transaction
  }

  /** A position to rewind to when a transaction in the group rolls back. */
  mark(): number {
    return this.length;
  }

  rewind(mark: number): void {
    this.length = mark;
  }

  add(sql: string, params: BindParams | undefined, failed: boolean): void {
    this.u8(failed ? FLAG_FAILED : 0);
    this.text(sql);
    if (params === undefined) {
      this.u8(PARAMS_NONE);
    } else if (Array.isArray(params)) {
      this.u8(PARAMS_POSITIONAL);
      this.varint(params.length);
      for (const value of params as readonly BindValue[]) this.value(value);
    } else {
      const entries = Object.entries(params);
      this.u8(PARAMS_NAMED);
      this.varint(entries.length);
      for (const [name, value] of entries) {
        this.text(name);
        this.value(value as BindValue);
      }
    }
  }

  /** A tight copy of the payload (a view would drag the whole buffer into IndexedDB's structured clone). */
  finish(): Uint8Array {
    return this.buffer.slice(0, this.length);
  }

  private value(value: BindValue): void {
    if (value === null) return this.u8(TAG_NULL);
    switch (typeof value) {
      case 'number':
        // -0 must stay -0: sql.js would bind it as a double, as replay must.
        if (Number.isInteger(value) && value === (value | 0) && !Object.is(value, -0)) {
          this.u8(TAG_INT32);
          this.ensure(4);
          this.view.setInt32(this.length, value, true);
          this.length += 4;
        } else {
          this.u8(TAG_FLOAT64);
          this.ensure(8);
          this.view.setFloat64(this.length, value, true);
          this.length += 8;
        }
        return;
      case 'string':
        this.u8(TAG_TEXT);
        return this.text(value);
      case 'bigint':
        this.u8(TAG_BIGINT);
        this.ensure(8);
        this.view.setBigInt64(this.length, value, true);
        this.length += 8;
        return;
      case 'boolean':
        return this.u8(value ? TAG_TRUE : TAG_FALSE);
      default:
        if (value instanceof Uint8Array) {
          this.u8(TAG_BLOB);
          this.varint(value.length);
          this.ensure(value.length);
          this.buffer.set(value, this.length);
          this.length += value.length;
          return;
        }
        throw new TypeError(`cannot log a parameter of type ${typeof value}`);
    }
  }

  private text(value: string): void {
    // Worst case 3 bytes per UTF-16 unit; write after a 5-byte varint hole, then fix up.
    const max = value.length * 3;
    this.ensure(5 + max);
    const lengthAt = this.length;
    const { written } = utf8Encoder.encodeInto(value, this.buffer.subarray(lengthAt + 5, lengthAt + 5 + max));
    const varintBytes = varintLength(written);
    if (varintBytes !== 5) this.buffer.copyWithin(lengthAt + varintBytes, lengthAt + 5, lengthAt + 5 + written);
    this.varint(written);
    this.length = lengthAt + varintBytes + written;
  }

  private u8(value: number): void {
    this.ensure(1);
    this.buffer[this.length++] = value;
  }

  private varint(value: number): void {
    this.ensure(5);
    while (value >= 0x80) {
      this.buffer[this.length++] = (value & 0x7f) | 0x80;
      value >>>= 7;
    }
    this.buffer[this.length++] = value;
  }

  private ensure(extra: number): void {
    if (this.length + extra > this.buffer.length) this.grow(this.length, Math.max(this.buffer.length * 2, this.length + extra));
  }

  private grow(keep: number, size: number): void {
    const next = new Uint8Array(size);
    next.set(this.buffer.subarray(0, keep));
    this.buffer = next;
    this.view = new DataView(next.buffer);
  }
}

function varintLength(value: number): number {
  let bytes = 1;
  while (value >= 0x80) {
    value >>>= 7;
    bytes++;
  }
  return bytes;
}

/** Decodes a payload written by RedoRecordWriter. Throws on malformed input (a checksum already passed, so this means a bug). */
export function decodeRedoPayload(payload: Uint8Array): LoggedStatement[] {
  const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  let at = 0;
  const need = (n: number): void => {
    if (at + n > payload.length) throw new RangeError('redo record payload ends mid-statement');
  };
  const u8 = (): number => {
    need(1);
    return payload[at++]!;
  };
  const varint = (): number => {
    let result = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      const byte = u8();
      result += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return result;
    }
    throw new RangeError('redo record varint too long');
  };
  const text = (): string => {
    const length = varint();
    need(length);
    const value = utf8Decoder.decode(payload.subarray(at, at + length));
    at += length;
    return value;
  };
  const value = (): BindValue => {
    const tag = u8();
    switch (tag) {
      case TAG_NULL:
        return null;
      case TAG_INT32:
        need(4);
        at += 4;
        return view.getInt32(at - 4, true);
      case TAG_FLOAT64:
        need(8);
        at += 8;
        return view.getFloat64(at - 8, true);
      case TAG_TEXT:
        return text();
      case TAG_BLOB: {
        const length = varint();
        need(length);
        at += length;
        return payload.slice(at - length, at);
      }
      case TAG_BIGINT:
        need(8);
        at += 8;
        return view.getBigInt64(at - 8, true);
      case TAG_FALSE:
        return false;
      case TAG_TRUE:
        return true;
      default:
        throw new RangeError(`unknown parameter tag ${tag} in redo record`);
    }
  };

  const statements: LoggedStatement[] = [];
  while (at < payload.length) {
    const flags = u8();
    const sql = text();
    const kind = u8();
    let params: LoggedStatement['params'];
    if (kind === PARAMS_POSITIONAL) {
      const count = varint();
      params = [];
      for (let i = 0; i < count; i++) params.push(value());
    } else if (kind === PARAMS_NAMED) {
      const count = varint();
      params = {};
      for (let i = 0; i < count; i++) {
        const name = text();
        params[name] = value();
      }
    } else if (kind !== PARAMS_NONE) {
      throw new RangeError(`unknown parameter kind ${kind} in redo record`);
    }
    statements.push({ sql, params, failed: (flags & FLAG_FAILED) !== 0 });
  }
  return statements;
}

function entryChecksum(seq: number, header: Uint8Array, payload: Uint8Array): number {
  const seqBytes = new Uint8Array(8);
  new DataView(seqBytes.buffer).setFloat64(0, seq, true);
  return crc32(payload, crc32(header, crc32(seqBytes)));
}

/** Frames a payload as the log entry stored under seq. */
export function encodeLogEntry(seq: number, payload: Uint8Array): Uint8Array {
  const entry = new Uint8Array(ENTRY_HEADER_BYTES + payload.length + ENTRY_TRAILER_BYTES);
  const view = new DataView(entry.buffer);
  view.setUint32(0, ENTRY_MAGIC, true);
  view.setUint32(4, payload.length, true);
  entry.set(payload, ENTRY_HEADER_BYTES);
  const crc = entryChecksum(seq, entry.subarray(0, ENTRY_HEADER_BYTES), payload);
  view.setUint32(ENTRY_HEADER_BYTES + payload.length, crc, true);
  return entry;
}

/** The payload of a log entry, or null when it is torn, damaged or stored under the wrong seq. */
export function verifyLogEntry(seq: number, entry: Uint8Array): Uint8Array | null {
  if (!Number.isSafeInteger(seq) || entry.length < ENTRY_HEADER_BYTES + ENTRY_TRAILER_BYTES) return null;
  const view = new DataView(entry.buffer, entry.byteOffset, entry.byteLength);
  if (view.getUint32(0, true) !== ENTRY_MAGIC) return null;
  const payloadLength = view.getUint32(4, true);
  if (entry.length !== ENTRY_HEADER_BYTES + payloadLength + ENTRY_TRAILER_BYTES) return null;
  const payload = entry.subarray(ENTRY_HEADER_BYTES, ENTRY_HEADER_BYTES + payloadLength);
  const stored = view.getUint32(ENTRY_HEADER_BYTES + payloadLength, true);
  return entryChecksum(seq, entry.subarray(0, ENTRY_HEADER_BYTES), payload) === stored ? payload : null;
}
