/**
 * Hearth's pending marks: which of this user's events some server of their room has not
 * received yet (`GET /_matrix/client/unstable/org.hearth/pending`, Hearth's own route, so the
 * SDK has no call for it: asked through its authenticated HTTP layer).
 */
import { Method, type MatrixClient } from 'matrix-js-sdk';

/** How often the pending marks are refreshed while something waits. */
const PENDING_POLL_MS = 2_000;
const PREFIX = '/_matrix/client/unstable/org.hearth';

export class PendingMarks {
  /** Own events not yet delivered to every server of their room: event ID → the servers still owed it. */
  private events = new Map<string, string[]>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;

  constructor(
    private readonly client: MatrixClient,
    private readonly changed: () => void,
  ) {}

  waitingFor(eventId: string): readonly string[] | undefined {
    return this.events.get(eventId);
  }

  /** Asks the homeserver which of our events still wait for other servers; polls while any do. */
  async refresh(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.stopped) return;
    let next: Map<string, string[]>;
    try {
      const result = await this.client.http.authedRequest<{ pending?: Record<string, { destinations: string[] }> }>(Method.Get, '/pending', undefined, undefined, { prefix: PREFIX });
      next = new Map(Object.entries(result.pending ?? {}).map(([eventId, entry]) => [eventId, entry.destinations]));
    } catch {
      next = this.events;
    }
    if (this.stopped) return;
    const changed = JSON.stringify([...next]) !== JSON.stringify([...this.events]);
    this.events = next;
    if (changed) this.changed();
    // Calls overlap (sync, send, peers): keep one timer.
    clearTimeout(this.timer);
    if (next.size > 0) this.timer = setTimeout(() => void this.refresh(), PENDING_POLL_MS);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.events = new Map();
  }
}
