import { CodedError } from '../util/coded-error.ts';
import { isRefusal } from '../util/backoff.ts';
import { FederationRequestError } from './client.ts';

// Received PDUs that cannot be placed yet for want of events another server failed to serve:
// their transaction is left undone (503) so that its sender sends it again.

/** What /send answers: each PDU's outcome, by event ID. */
export interface TransactionAnswer {
  pdus: Record<string, { error?: string }>;
}

/**
 * A received event could not be placed for want of events that could not be had now: the
 * server that should serve them did not answer (unreachable, timed out, the stream reset) or
 * failed. Not a verdict on the event: its transaction is answered 503 and sent again.
 */
export class GapNotFilled extends CodedError {
  override name = 'GapNotFilled';
}

/** For a fetch's `.catch`: a refusal (4xx but 429) stands, as the verdict of who was asked; any other failure is a {@link GapNotFilled}. */
export const unfilled = (what: string) => (error: unknown): never => {
  if (error instanceof FederationRequestError && isRefusal(error.status)) throw error;
  throw new GapNotFilled(503, 'M_UNKNOWN', `${what} failed: ${error instanceof Error ? error.message : String(error)}`);
};

/**
 * How often each transaction has been left undone for PDUs that could not be placed: after
 * `limit` times it is answered with their errors instead, so that one PDU whose gap never fills
 * cannot stall its sender's queue to us for good. Kept in memory (a restart starts again), bounded.
 */
export class UndoneTransactions {
  private readonly attempts = new Map<string, number>();
  constructor(private readonly limit = 8, private readonly bound = 10_000) {}

  /** Whether this transaction may be left undone once more (counting this time). */
  mayLeaveUndone(key: string): boolean {
    const attempts = (this.attempts.get(key) ?? 0) + 1;
    if (attempts >= this.limit) return this.attempts.delete(key) && false;
    if (this.attempts.size >= this.bound) this.attempts.delete(this.attempts.keys().next().value!);
    this.attempts.set(key, attempts);
    return true;
  }

  done(key: string): void {
    this.attempts.delete(key);
  }
}
