// Long-polling /sync until a response shows what a test waits for. Each poll
// returns as soon as something happens on the server, so this waits on the
// event itself; the poll's own timeout only bounds a quiet round.
import { api } from '../integration/harness.ts';

export type SyncBody = { next_batch: string; rooms?: any; [field: string]: any };
/** One /sync from `since` (undefined: an initial sync), answering its body. */
export type Syncer = (since: string | undefined) => Promise<SyncBody>;

export interface SyncUntilOptions {
  /** Start from this token rather than with an initial sync. */
  since?: string;
  /** Give up after this many polls. */
  rounds?: number;
  /** Give up once this much time has passed (checked after each poll). */
  timeoutMs?: number;
  /** Who is syncing, for the failure message. */
  who?: string;
}

/** Polls until `done` holds for a response, and returns that response. With neither `rounds` nor `timeoutMs` it waits as long as the test may. */
export async function longPollUntil(sync: Syncer, done: (body: SyncBody) => boolean, options: SyncUntilOptions = {}): Promise<SyncBody> {
  const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
  let since = options.since;
  for (let round = 1; ; round++) {
    const body = await sync(since);
    if (done(body)) return body;
    if (round >= (options.rounds ?? Infinity) || Date.now() > deadline) {
      throw new Error(`${options.who ?? 'the'} /sync never showed ${done.toString().slice(0, 200)}; last: ${JSON.stringify(body).slice(0, 300)}`);
    }
    since = body.next_batch;
  }
}

/** The /sync path that long-polls for up to `pollMs`. */
export const syncPath = (since: string | undefined, pollMs: number): string =>
  `/_matrix/client/v3/sync?timeout=${pollMs}${since ? `&since=${encodeURIComponent(since)}` : ''}`;

/** /sync over HTTP against a server with a `url` (a test server, a Node host), each answer checked against the spec. */
export const httpSyncer = (server: { url: string }, token: string, pollMs = 10_000): Syncer => async (since) => {
  const { status, body } = await api(server, 'GET', syncPath(since, pollMs), { token });
  if (status !== 200) throw new Error(`/sync: ${status} ${JSON.stringify(body)}`);
  return body;
};

/** Whether a response's timeline for the room has a message with this body. */
export const timelineHas = (roomId: string, text: string) => (body: SyncBody): boolean =>
  (body.rooms?.join?.[roomId]?.timeline?.events ?? []).some((event: any) => event.content?.body === text);
