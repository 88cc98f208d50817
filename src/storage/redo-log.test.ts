import { describe, expect, it } from 'vitest';
import { crc32 } from './crc32.ts';
import { assertLoggable, decodeRedoPayload, encodeLogEntry, RedoRecordWriter, verifyLogEntry } from './redo-log.ts';

describe('crc32', () => {
  it('matches the standard check value and continues across calls', () => {
    const bytes = new TextEncoder().encode('123456789');
    expect(crc32(bytes)).toBe(0xcbf43926);
    expect(crc32(bytes.subarray(5), crc32(bytes.subarray(0, 5)))).toBe(0xcbf43926);
    expect(crc32(new Uint8Array(0))).toBe(0);
  });
});

describe('redo records', () => {
  it('round-trips statements with every kind of parameter, exactly', () => {
    const writer = new RedoRecordWriter();
    const blob = new Uint8Array([0, 1, 2, 255]);
    writer.add('CREATE TABLE t (a)', undefined, false);
    writer.add('INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', [
      null, 42, -7, 2 ** 31, 1_700_000_000_123, 0.1, -0, 'héllo 🐈', blob, 2n ** 62n,
    ], false);
    writer.add('UPDATE t SET a = $a WHERE a = :b', { $a: true, ':b': false }, true);
    writer.add('x'.repeat(300), [''.padEnd(200, 'é')], false); // multi-byte varint lengths
    const decoded = decodeRedoPayload(writer.finish());
    expect(decoded).toHaveLength(4);
    expect(decoded[0]).toEqual({ sql: 'CREATE TABLE t (a)', params: undefined, failed: false });
    const params = decoded[1]!.params as unknown[];
    expect(params.slice(0, 6)).toEqual([null, 42, -7, 2 ** 31, 1_700_000_000_123, 0.1]);
    expect(Object.is(params[6], -0)).toBe(true);
    expect(params.slice(7)).toEqual(['héllo 🐈', blob, 2n ** 62n]);
    expect(decoded[2]).toEqual({ sql: 'UPDATE t SET a = $a WHERE a = :b', params: { $a: true, ':b': false }, failed: true });
    expect(decoded[3]!.sql).toHaveLength(300);
    expect((decoded[3]!.params as string[])[0]).toHaveLength(200);
  });

  it('captures parameters when added, so later mutation by the caller cannot change the log', () => {
    const writer = new RedoRecordWriter();
    const params = [1];
    const blob = new Uint8Array([9]);
    writer.add('a', params, false);
    writer.add('b', [blob], false);
    params[0] = 2;
    blob[0] = 0;
    const decoded = decodeRedoPayload(writer.finish());
    expect(decoded[0]!.params).toEqual([1]);
    expect(decoded[1]!.params).toEqual([new Uint8Array([9])]);
  });

  it('rewinds to a mark, dropping a rolled-back transaction from the group', () => {
    const writer = new RedoRecordWriter();
    writer.add('kept', undefined, false);
    const mark = writer.mark();
    writer.add('rolled back', [1, 2, 3], false);
    writer.rewind(mark);
    writer.add('also kept', undefined, false);
    expect(decodeRedoPayload(writer.finish()).map((s) => s.sql)).toEqual(['kept', 'also kept']);
  });

  it('refuses parameters it could not replay', () => {
    expect(() => assertLoggable([undefined as never])).toThrow(/undefined/);
    expect(() => assertLoggable({ $a: {} as never })).toThrow(/object/);
    expect(() => assertLoggable([1, 'a', null, new Uint8Array(1), 1n, true])).not.toThrow();
  });

  it('detects a torn, damaged or misplaced log entry', () => {
    const writer = new RedoRecordWriter();
    writer.add('INSERT INTO t VALUES (?)', ['value'], false);
    const payload = writer.finish();
    const entry = encodeLogEntry(7, payload);
    expect(verifyLogEntry(7, entry)).toEqual(payload);
    expect(verifyLogEntry(8, entry)).toBeNull(); // stored under the wrong seq
    expect(verifyLogEntry(NaN, entry)).toBeNull();
    for (let cut = 0; cut < entry.length; cut++) expect(verifyLogEntry(7, entry.subarray(0, cut))).toBeNull();
    for (let i = 0; i < entry.length; i++) {
      const flipped = entry.slice();
      flipped[i]! ^= 0x10;
      expect(verifyLogEntry(7, flipped)).toBeNull();
    }
    expect(verifyLogEntry(7, new Uint8Array(entry.length))).toBeNull(); // zero-filled
  });
});
