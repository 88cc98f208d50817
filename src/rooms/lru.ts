import { LRUCache } from 'lru-cache';

/** lru-cache keeps no null or undefined value; a null we keep stands in as this. */
const NULL = Symbol('null');

/**
 * A least-recently-used cache bounded by a count and, when given a weight per value, by their
 * total weight too (values of very different sizes: a room's state is 20 entries in a small room
 * and 20,000 in a big one). lru-cache does the work; this keeps the one shape our callers use.
 */
export class LruCache<K extends {}, V extends {} | null> {
  private readonly cache: LRUCache<K, Exclude<V, null> | typeof NULL>;

  constructor(capacity: number, bound?: { maxWeight: number; weigh: (value: V) => number }) {
    this.cache = new LRUCache({
      max: capacity,
      ...(bound
        ? {
            maxSize: bound.maxWeight,
            // lru-cache drops a value heavier than maxSize; we keep the newest however heavy, alone:
            // weighed as maxSize at most, it pushes every other value out and stays.
            sizeCalculation: (value: Exclude<V, null> | typeof NULL) => Math.max(1, Math.min(bound.maxWeight, bound.weigh((value === NULL ? null : value) as V))),
          }
        : {}),
    });
  }

  get(key: K): V | undefined {
    const value = this.cache.get(key);
    return value === NULL ? (null as V) : (value as V | undefined);
  }

  set(key: K, value: V): void {
    this.cache.set(key, value === null ? NULL : (value as Exclude<V, null>));
  }

  delete(key: K): void {
    this.cache.delete(key);
  }

  clear(): void {
    this.cache.clear();
  }
}
