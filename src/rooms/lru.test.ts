import { describe, expect, it } from 'vitest';
import { LruCache } from './lru.ts';

describe('LruCache', () => {
  it('drops the least recently used value past its count', () => {
    const cache = new LruCache<string, number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    expect(cache.get('a')).toBe(1); // a is now the most recent
    cache.set('c', 3);
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([1, undefined, 3]);
  });

  it('drops the least recently used values past their total weight, but keeps the newest however heavy', () => {
    const cache = new LruCache<string, number[]>(100, { maxWeight: 5, weigh: (v) => v.length });
    cache.set('a', [1, 1]);
    cache.set('b', [2, 2]);
    cache.set('c', [3, 3]); // 6 > 5: a goes
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([undefined, [2, 2], [3, 3]]);
    cache.set('b', [2]); // replaced: its old weight is given back
    cache.set('d', [4, 4]); // 1 + 2 + 2 = 5: all stay
    expect([cache.get('b'), cache.get('c'), cache.get('d')]).toEqual([[2], [3, 3], [4, 4]]);
    cache.set('heavy', [0, 0, 0, 0, 0, 0, 0]);
    expect([cache.get('b'), cache.get('c'), cache.get('d'), cache.get('heavy')?.length]).toEqual([undefined, undefined, undefined, 7]);
    cache.delete('heavy');
    cache.set('e', [5, 5, 5, 5, 5]);
    expect(cache.get('e')).toHaveLength(5);
  });

  it('keeps null as a value, apart from a value it does not hold', () => {
    const cache = new LruCache<string, number | null>(2);
    cache.set('none', null);
    expect([cache.get('none'), cache.get('absent')]).toEqual([null, undefined]);
  });
});
