import { MatrixApiError } from '../chat.ts';
import type { MatrixApi, SyncResponse } from './matrix.ts';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A long-poll's wait: the first /sync answers at once, later ones wait up to this long for something new. */
const SYNC_TIMEOUT_MS = 30_000;

export interface SyncLoopHandlers {
  /** Each /sync response, in order: takes it in (a throw retries from the same point). */
  apply(response: SyncResponse): void;
  /** Then: what follows a response taken in (render, receipts, pending marks). */
  applied(): void;
  /** The homeserver no longer takes the session (401): the loop has ended. */
  onSignedOut(): void;
}

/**
 * Polls /sync until `signal` aborts. Errors other than a 401 are retried with a growing pause:
 * the service worker may have been stopped mid-poll, or the core is moving to another tab.
 */
export async function runSyncLoop(api: MatrixApi, signal: AbortSignal, handlers: SyncLoopHandlers): Promise<void> {
  let since: string | undefined;
  let failures = 0;
  while (!signal.aborted) {
    try {
      const response = await api.sync(since, since ? SYNC_TIMEOUT_MS : 0, signal);
      if (signal.aborted) return;
      handlers.apply(response);
      since = response.next_batch;
      failures = 0;
      handlers.applied();
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof MatrixApiError && error.status === 401) return handlers.onSignedOut();
      failures++;
      await sleep(Math.min(5000, 250 * 2 ** Math.min(failures, 5)));
    }
  }
}
