import { CodedError } from '../util/coded-error.ts';
import { FederationRequestError } from './client.ts';
import { RoomError } from '../rooms/errors.ts';
import { isRefusal } from '../util/backoff.ts';

/** Failure of a federated membership change, with what the remote server said. */
export class FederationJoinError extends CodedError {
  override name = 'FederationJoinError';
}

export function unique<T>(items: T[]): T[] {
  return [...new Set(items)];
}

/** The template of a make_join/make_leave/make_knock, checked to be what we asked for. */
export function checkTemplate(template: unknown, roomId: string, userId: string, membership: string): Record<string, unknown> {
  if (typeof template !== 'object' || template === null) throw new FederationJoinError(502, 'M_BAD_JSON', 'the make_ response has no event');
  const event = template as Record<string, unknown>;
  const content = event['content'] as Record<string, unknown> | undefined;
  if (event['type'] !== 'm.room.member' || event['room_id'] !== roomId || event['sender'] !== userId || event['state_key'] !== userId || content?.['membership'] !== membership) {
    throw new FederationJoinError(502, 'M_BAD_JSON', `the make_${membership} template is not a ${membership} of ${userId} in ${roomId}`);
  }
  if (!Array.isArray(event['prev_events']) || !Array.isArray(event['auth_events']) || typeof event['depth'] !== 'number') {
    throw new FederationJoinError(502, 'M_BAD_JSON', `the make_${membership} template lacks prev_events, auth_events or depth`);
  }
  return event;
}

export function asJoinError(error: unknown): Error {
  if (error instanceof FederationJoinError) return error;
  if (error instanceof FederationRequestError) {
    const status = error.status >= 400 && error.status < 500 ? error.status : 502;
    return new FederationJoinError(status, error.errcode, error.message);
  }
  if (error instanceof RoomError) return error;
  return new FederationJoinError(502, 'M_UNKNOWN', error instanceof Error ? error.message : String(error));
}

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
