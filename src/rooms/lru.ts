/**
 * A least-recently-used cache on top of Map's insertion order, bounded by a count and, when
 * given a weight per value, by their total weight too (values of very different sizes: a
 * room's state is 20 entries in a small room and 20,000 in a big one).
 */
export class LruCache<K, V> {
  private readonly map = new Map<K, V>();
  private readonly weights = new Map<K, number>();
  private totalWeight = 0;

  constructor(
    private readonly capacity: number,
    private readonly bound?: { maxWeight: number; weigh: (value: V) => number },
  ) {}

  get(key: K): V | undefined {
    const value = this.map.get(key);
    if (value !== undefined) {
      this.map.delete(key);
      this.map.set(key, value);
    }
    return value;
  }

  set(key: K, value: V): void {
    this.delete(key);
    this.map.set(key, value);
    if (this.bound) {
      const weight = this.bound.weigh(value);
      this.weights.set(key, weight);
      this.totalWeight += weight;
    }
    // The newest value stays, however heavy.
    while (this.map.size > 1 && (this.map.size > this.capacity || (this.bound && this.totalWeight > this.bound.maxWeight))) {
      this.delete(this.map.keys().next().value as K);
    }
  }

  delete(key: K): void {
    this.map.delete(key);
    const weight = this.weights.get(key);
    if (weight !== undefined) {
      this.totalWeight -= weight;
      this.weights.delete(key);
    }
  }

  clear(): void {
    this.map.clear();
    this.weights.clear();
    this.totalWeight = 0;
  }
}
