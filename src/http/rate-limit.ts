import { limitExceeded } from '../http/matrix-error.ts';

export interface RateLimitConfig {
  /** Sustained requests per second per key. */
  perSecond: number;
  /** Burst size. */
  burst: number;
}

/**
 * A token bucket per key (device, or remote address before login). Only writes
 * are limited, like Synapse's default: reads and /sync long-polls are not.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; updated: number }>();

  constructor(
    private readonly config: RateLimitConfig,
    private readonly now: () => number,
  ) {}

  /** Takes one token or throws M_LIMIT_EXCEEDED with retry_after_ms. */
  take(key: string): void {
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.config.burst, updated: now };
    bucket.tokens = Math.min(this.config.burst, bucket.tokens + ((now - bucket.updated) / 1000) * this.config.perSecond);
    bucket.updated = now;
    if (bucket.tokens < 1) {
      this.buckets.set(key, bucket);
      throw limitExceeded(Math.ceil(((1 - bucket.tokens) / this.config.perSecond) * 1000));
    }
    bucket.tokens -= 1;
    this.buckets.set(key, bucket);
    if (this.buckets.size > 10_000) this.prune(now);
  }

  private prune(now: number): void {
    for (const [key, bucket] of this.buckets) {
      if (now - bucket.updated > (this.config.burst / this.config.perSecond) * 1000) this.buckets.delete(key);
    }
  }
}
