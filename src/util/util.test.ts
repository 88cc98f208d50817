import { describe, expect, it } from 'vitest';
import { backoffDelay, isRefusal } from './backoff.ts';
import { KeyedLock } from './keyed-lock.ts';
import { IMPLEMENTATION } from './version.ts';

describe('KeyedLock', () => {
  it('runs tasks of one key in order and lets other keys run meanwhile', async () => {
    const lock = new KeyedLock();
    const order: string[] = [];
    let releaseFirst!: () => void;
    const first = lock.run('a', () => new Promise<void>((resolve) => (releaseFirst = () => { order.push('a1'); resolve(); })));
    const second = lock.run('a', async () => { order.push('a2'); });
    await lock.run('b', async () => { order.push('b1'); });
    expect(order).toEqual(['b1']);
    releaseFirst();
    await Promise.all([first, second]);
    expect(order).toEqual(['b1', 'a1', 'a2']);
  });

  it('runs the next task after one that failed', async () => {
    const lock = new KeyedLock();
    const failed = lock.run('a', async () => { throw new Error('boom'); });
    await expect(failed).rejects.toThrow('boom');
    await expect(lock.run('a', async () => 7)).resolves.toBe(7);
  });
});

describe('backoffDelay', () => {
  const policy = { initialMs: 1_000, maxMs: 10_000, refusedMs: 5_000 };
  it('doubles from the first wait up to the cap', () => {
    expect([1, 2, 3, 4, 5].map((n) => backoffDelay(policy, n, false))).toEqual([1_000, 2_000, 4_000, 8_000, 10_000]);
  });
  it('starts from the refused wait after a refusal, and honours a longer Retry-After', () => {
    expect(backoffDelay(policy, 1, true)).toBe(5_000);
    expect(backoffDelay(policy, 1, false, 3_000)).toBe(3_000);
    expect(backoffDelay(policy, 2, false, 500)).toBe(2_000);
  });
  it('counts 4xx other than 429 as a refusal', () => {
    expect([400, 403, 429, 500, undefined].map(isRefusal)).toEqual([true, true, false, false, false]);
  });
});

describe('IMPLEMENTATION', () => {
  it("carries package.json's version", async () => {
    const { readFile } = await import('node:fs/promises');
    const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(IMPLEMENTATION).toEqual({ name: 'Hearth', version: pkg.version });
  });
});
