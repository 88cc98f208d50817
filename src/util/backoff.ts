export interface BackoffPolicy {
  /** First wait after a failure. */
  initialMs: number;
  /** The cap on the exponential wait. */
  maxMs: number;
  /** First wait when the other side refused (4xx other than 429): it will likely refuse again. */
  refusedMs: number;
}

/** Whether an HTTP status says the other side refused, rather than failed or asked us to slow down. */
export const isRefusal = (status: number | undefined): boolean => status !== undefined && status >= 400 && status < 500 && status !== 429;

/**
 * The wait before retry number `failures` (1 for the first failure): doubling
 * from the policy's first wait, capped, and never shorter than a `Retry-After`.
 */
export function backoffDelay(policy: BackoffPolicy, failures: number, refused: boolean, retryAfterMs?: number): number {
  const wait = Math.min(policy.maxMs, (refused ? policy.refusedMs : policy.initialMs) * 2 ** (failures - 1));
  return retryAfterMs === undefined ? wait : Math.max(wait, retryAfterMs);
}
