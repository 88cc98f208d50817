import { describe, expect, it } from 'vitest';
import { CodedError } from '../util/coded-error.ts';
import { BoundedChunks, BodyTooLargeError, readBounded } from './bounded-body.ts';
import { badJson, MatrixError } from './matrix-error.ts';
import { integerQuery } from './query.ts';
import { toMatrixError } from './to-matrix-error.ts';

const refusal = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    return error instanceof MatrixError ? [error.status, error.errcode, error.message] : error;
  }
  return undefined;
};

describe('integerQuery', () => {
  it('takes digits only by default, capped, with the fallback for absent or empty', () => {
    const options = { fallback: 10, max: 100 };
    expect([undefined, '', '7', '500'].map((raw) => integerQuery('limit', raw, options))).toEqual([10, 10, 7, 100]);
    expect(refusal(() => integerQuery('limit', '-0', options))).toEqual([400, 'M_INVALID_PARAM', 'limit must be a non-negative integer']);
    expect(refusal(() => integerQuery('limit', 'x', { ...options, refuse: badJson }))).toEqual([400, 'M_BAD_JSON', 'limit must be a non-negative integer']);
  });
  it('refuses an empty value when asked, and below a minimum naming it', () => {
    expect(refusal(() => integerQuery('limit', '', { fallback: 10, emptyIsInvalid: true }))).toEqual([400, 'M_INVALID_PARAM', 'limit must be a non-negative integer']);
    expect(refusal(() => integerQuery('limit', '0', { fallback: 5, min: 1 }))).toEqual([400, 'M_INVALID_PARAM', 'limit must be an integer of at least 1']);
    expect(integerQuery('max_depth', '-0', { fallback: 5, min: 0 })).toBe(-0);
  });
});

describe('toMatrixError', () => {
  it('keeps a MatrixError, answers a CodedError by its own status, and anything else as 500', () => {
    const matrix = badJson('bad');
    expect(toMatrixError(matrix)).toBe(matrix);
    expect(toMatrixError(new CodedError(429, 'M_LIMIT_EXCEEDED', 'slow down', { retry_after_ms: 5 })).toJSON()).toEqual({ errcode: 'M_LIMIT_EXCEEDED', error: 'slow down', retry_after_ms: 5 });
    expect([toMatrixError(new Error('boom')).status, toMatrixError('boom').errcode]).toEqual([500, 'M_UNKNOWN']);
  });
});

describe('bounded bodies', () => {
  it('keep chunks up to the bound and nothing once past it', () => {
    const chunks = new BoundedChunks(4);
    expect([chunks.add(new Uint8Array([1, 2])), chunks.add(new Uint8Array([3, 4])), chunks.add(new Uint8Array([5])), chunks.add(new Uint8Array(0))]).toEqual([true, true, false, false]);
    expect([...chunks.join()]).toEqual([1, 2, 3, 4]);
  });
  it('refuse a stream by its declared length or as it passes the bound', async () => {
    const stream = () => new Response(new Uint8Array(10)).body;
    await expect(readBounded(stream(), 10)).resolves.toHaveLength(10);
    await expect(readBounded(stream(), 9)).rejects.toBeInstanceOf(BodyTooLargeError);
    await expect(readBounded(stream(), 100, '101')).rejects.toBeInstanceOf(BodyTooLargeError);
  });
  it('give a body of one chunk that fills its buffer as it is, and a part of a buffer as a copy of its own', () => {
    const whole = new Uint8Array([1, 2, 3]);
    const one = new BoundedChunks(10);
    one.add(whole);
    expect(one.join()).toBe(whole);
    const part = new BoundedChunks(10);
    part.add(new Uint8Array([9, 1, 2, 3, 9]).subarray(1, 4));
    const joined = part.join();
    expect([...new Uint8Array(joined.buffer)]).toEqual([1, 2, 3]);
  });
});
