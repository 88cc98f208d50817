import { isCreateEvent, roomIdOfCreateEvent, type PDU } from '../events/pdu.ts';
import type { Database, WriteTransaction } from '../storage/database.ts';
import { backoffDelay, isRefusal, type BackoffPolicy } from '../util/backoff.ts';
import { FederationRequestError, type FederationClient, type TransactionBody } from './client.ts';
import type { OutboxHook } from '../rooms/rooms.ts';
import { toPdu } from './pdus.ts';
import { FederationUnreachable } from './transport.ts';

/** The spec's bounds on one transaction. */
export const MAX_PDUS_PER_TXN = 50;
export const MAX_EDUS_PER_TXN = 100;

export interface Edu {
  edu_type: string;
  content: Record<string, unknown>;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 1_000, maxMs: 10 * 60_000, refusedMs: 60_000 };

interface DestinationState {
  running: boolean;
  /** Kicked while a send was in flight: go round again. */
  again: boolean;
  /** Woken (the peer connected) since the send in flight began: if that send fails, retry at once, not after a backoff. */
  woken: boolean;
  failures: number;
  retryAt: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

type OutboxRow = { seq: number; kind: string; json: string };

/** Where a transaction goes when its destination cannot be reached: the mailbox component (src/mailbox). */
export interface MailDrop {
  /** Resolves true once at least one mailbox durably holds the transaction for the destination. */
  deposit(destination: string, txnId: string, body: TransactionBody): Promise<boolean>;
}

export interface QueueItems {
  pdus?: PDU[];
  /** The ID of each of `pdus`, in the same order. */
  eventIds?: readonly string[];
  edus?: Edu[];
}

/** An event of ours still owed to other servers. */
export interface PendingEvent {
  roomId: string;
  destinations: string[];
}

/**
 * One durable queue per destination (server-server §Transactions). PDUs and EDUs
 * are written to the outbox in the same database transaction as whatever caused
 * them, so nothing committed is lost to a crash; a transaction carries the oldest
 * waiting items, and its ID names exactly those rows, so a retry after a crash
 * sends the same ID for the same contents and the receiver dedupes it. Failures
 * back off exponentially (capped); a peer that connects is retried at once.
 *
 * EDUs that a newer one soon supersedes (typing, receipts, presence) take an
 * in-memory lane instead (see {@link sendEphemeral}).
 */
export class OutgoingQueues {
  private readonly destinations = new Map<string, DestinationState>();
  /** Ephemeral EDUs waiting per destination, by the key a newer one replaces them under, oldest first. */
  private readonly ephemeral = new Map<string, Map<string, Edu>>();
  /** IDs of transactions with ephemeral EDUs only: the start time keeps them unique across restarts. */
  private readonly ephemeralTxnPrefix: string;
  private ephemeralTxns = 0;
  private stopped = false;
  /** Transactions sent successfully (or left with a mailbox: `via`), for tests and benchmarks to wait on. */
  private readonly sentListeners = new Set<(destination: string, pdus: number, edus: number, via?: 'mailbox') => void>();

  constructor(
    private readonly db: Database,
    private readonly client: FederationClient,
    private readonly origin: string,
    private readonly now: () => number,
    private readonly log: (message: string, error?: unknown) => void,
    private readonly backoff: BackoffPolicy = DEFAULT_BACKOFF,
    /** Mailboxes to leave transactions with when a destination is unreachable (the mailbox component's sender); none: the queue only retries. */
    private readonly mailDrop?: MailDrop,
  ) {
    this.ephemeralTxnPrefix = `e${now()}`;
  }

  /**
   * Adds PDUs and EDUs for destinations inside the caller's write transaction.
   * `eventIds[i]` names `pdus[i]` (room v3+ PDUs carry no event_id), for {@link pendingEvents}.
   */
  enqueue(tx: WriteTransaction, destinations: Iterable<string>, items: QueueItems): void {
    for (const destination of destinations) {
      if (destination === this.origin) continue;
      (items.pdus ?? []).forEach((pdu, i) => {
        const eventId = items.eventIds?.[i] ?? pdu.event_id ?? null;
        tx.run("INSERT INTO federation_outbox (destination, kind, json, event_id, sender, room_id) VALUES (?, 'pdu', ?, ?, ?, ?)", [
          destination, JSON.stringify(pdu), eventId, eventId === null ? null : pdu.sender, eventId === null ? null : (pdu.room_id ?? (isCreateEvent(pdu) ? roomIdOfCreateEvent(eventId) : null)),
        ]);
      });
      for (const edu of items.edus ?? []) tx.run("INSERT INTO federation_outbox (destination, kind, json) VALUES (?, 'edu', ?)", [destination, JSON.stringify(edu)]);
    }
  }

  /** Enqueues in a transaction of its own, then sends. */
  async send(destinations: Iterable<string>, items: QueueItems): Promise<void> {
    const list = [...destinations].filter((d) => d !== this.origin);
    if (list.length === 0) return;
    await this.db.transaction((tx) => this.enqueue(tx, list, items));
    for (const destination of list) this.kick(destination);
  }

  /**
   * Sends an EDU that only matters until a newer one replaces it: it waits in memory
   * (lost on restart, by design) and a later EDU with the same `key` for the same
   * destination takes its place, so an unreachable server is owed only the latest
   * state, and a keystroke costs no write.
   */
  sendEphemeral(destinations: Iterable<string>, key: string, edu: Edu): void {
    for (const destination of destinations) {
      if (destination === this.origin) continue;
      const waiting = this.ephemeral.get(destination) ?? new Map<string, Edu>();
      waiting.delete(key);
      waiting.set(key, edu);
      this.ephemeral.set(destination, waiting);
      this.kick(destination);
    }
  }

  /** Starts every queue that has something waiting (at start-up). */
  async resume(): Promise<void> {
    const rows = await this.db.all<{ destination: string }>('SELECT DISTINCT destination FROM federation_outbox');
    for (const row of rows) this.kick(row.destination);
  }

  /** The destination is reachable again (a peer connected): clear its backoff and send now. */
  wake(destination: string): void {
    const state = this.state(destination);
    state.woken = true;
    state.failures = 0;
    state.retryAt = 0;
    if (state.timer) clearTimeout(state.timer);
    state.timer = undefined;
    this.kick(destination);
  }

  /** Sends what waits for a destination unless it is backing off. */
  kick(destination: string): void {
    if (this.stopped || destination === this.origin) return;
    const state = this.state(destination);
    if (state.running) {
      state.again = true;
      return;
    }
    if (state.retryAt > this.now()) return;
    state.running = true;
    void this.drain(destination, state).catch((error: unknown) => this.log(`federation: the queue for ${destination} failed`, error));
  }

  onSent(listener: (destination: string, pdus: number, edus: number, via?: 'mailbox') => void): () => void {
    this.sentListeners.add(listener);
    return () => this.sentListeners.delete(listener);
  }

  async pending(destination?: string): Promise<number> {
    const row = destination === undefined
      ? await this.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM federation_outbox')
      : await this.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM federation_outbox WHERE destination = ?', [destination]);
    return row?.n ?? 0;
  }

  stop(): void {
    this.stopped = true;
    for (const state of this.destinations.values()) if (state.timer) clearTimeout(state.timer);
  }

  private state(destination: string): DestinationState {
    let state = this.destinations.get(destination);
    if (!state) {
      state = { running: false, again: false, woken: false, failures: 0, retryAt: 0, timer: undefined };
      this.destinations.set(destination, state);
    }
    return state;
  }

  private async drain(destination: string, state: DestinationState): Promise<void> {
    try {
      await this.drainLoop(destination, state);
    } catch (error) {
      state.running = false;
      throw error;
    }
  }

  /**
   * Sends until nothing waits. `running` is cleared in the same turn as the last look
   * for work, so a kick that comes after it starts a new drain and is never lost.
   */
  private async drainLoop(destination: string, state: DestinationState): Promise<void> {
    for (;;) {
      state.again = false;
      if (this.stopped) return void (state.running = false);
      const rows = await this.db.all<OutboxRow>(
        'SELECT seq, kind, json FROM federation_outbox WHERE destination = ? ORDER BY seq LIMIT ?',
        [destination, MAX_PDUS_PER_TXN + MAX_EDUS_PER_TXN],
      );
      const batch: OutboxRow[] = [];
      let pdus = 0;
      let edus = 0;
      for (const row of rows) {
        // Keep order: stop at the first item that does not fit.
        if (row.kind === 'pdu' ? pdus === MAX_PDUS_PER_TXN : edus === MAX_EDUS_PER_TXN) break;
        if (row.kind === 'pdu') pdus++;
        else edus++;
        batch.push(row);
      }
      // Ephemeral EDUs ride in the room the durable ones leave.
      const ephemeral = this.takeEphemeral(destination, MAX_EDUS_PER_TXN - edus);
      if (batch.length === 0 && ephemeral.length === 0) {
        if (state.again) continue;
        state.running = false;
        return;
      }
      // A retry of a durable batch repeats its ID; should the first try have gone through
      // after all, the receiver's dedupe drops the ephemeral EDUs of the retry: the next
      // change carries their state again.
      const txnId = batch.length > 0 ? `${batch[0]!.seq}-${batch.at(-1)!.seq}` : `${this.ephemeralTxnPrefix}-${++this.ephemeralTxns}`;
      state.woken = false;
      const durable: TransactionBody = {
        origin: this.origin,
        origin_server_ts: this.now(),
        pdus: batch.filter((r) => r.kind === 'pdu').map((r) => JSON.parse(r.json) as PDU),
        edus: batch.filter((r) => r.kind === 'edu').map((r) => JSON.parse(r.json) as Edu),
      };
      let via: 'mailbox' | undefined;
      try {
        await this.client.sendTransaction(destination, txnId, { ...durable, edus: [...durable.edus!, ...ephemeral.map(([, edu]) => edu)] });
      } catch (error) {
        this.restoreEphemeral(destination, ephemeral);
        // The peer connected while this attempt was failing (its dial began before the connection was up): try again now.
        if (state.woken && !this.stopped) continue;
        // No answer from the destination (unreachable, or the exchange died: a peer that vanished without
        // closing its connection times out): the durable part goes to the mailboxes (ephemeral EDUs are not
        // worth it). Should the attempt have arrived after all, the receiver's dedupe drops the letter.
        // Once a mailbox holds it, it is as good as sent; if none does, back off as usual. A destination
        // that answered with an error is reachable: it gets the retry.
        const noAnswer = !(error instanceof FederationRequestError);
        if (!noAnswer || batch.length === 0 || !(await this.leaveWithMailboxes(destination, txnId, durable))) {
          state.running = false;
          this.scheduleRetry(destination, state, error);
          return;
        }
        via = 'mailbox';
      }
      if (!via) state.failures = 0;
      if (batch.length > 0) {
        const last = batch.at(-1)!.seq;
        await this.db.transaction((tx) => tx.run('DELETE FROM federation_outbox WHERE destination = ? AND seq <= ?', [destination, last]));
      }
      for (const listener of this.sentListeners) {
        if (via) listener(destination, pdus, edus, via);
        else listener(destination, pdus, edus + ephemeral.length);
      }
    }
  }

  private async leaveWithMailboxes(destination: string, txnId: string, body: TransactionBody): Promise<boolean> {
    if (!this.mailDrop || this.stopped) return false;
    try {
      return await this.mailDrop.deposit(destination, txnId, body);
    } catch (error) {
      this.log(`federation: leaving mail for ${destination} failed`, error);
      return false;
    }
  }

  private takeEphemeral(destination: string, room: number): [string, Edu][] {
    const waiting = this.ephemeral.get(destination);
    if (!waiting || room <= 0) return [];
    const taken = [...waiting].slice(0, room);
    for (const [key] of taken) waiting.delete(key);
    if (waiting.size === 0) this.ephemeral.delete(destination);
    return taken;
  }

  /** A failed transaction's ephemeral EDUs wait again, unless newer ones took their place meanwhile. */
  private restoreEphemeral(destination: string, taken: [string, Edu][]): void {
    if (taken.length === 0) return;
    const newer = this.ephemeral.get(destination) ?? new Map<string, Edu>();
    const waiting = new Map(taken.filter(([key]) => !newer.has(key)));
    for (const [key, edu] of newer) waiting.set(key, edu);
    this.ephemeral.set(destination, waiting);
  }

  private scheduleRetry(destination: string, state: DestinationState, error: unknown): void {
    state.failures++;
    const answered = error instanceof FederationRequestError ? error : undefined;
    const wait = backoffDelay(this.backoff, state.failures, isRefusal(answered?.status), answered?.retryAfterMs);
    state.retryAt = this.now() + wait;
    if (!(error instanceof FederationUnreachable)) this.log(`federation: sending to ${destination} failed; retrying in ${wait} ms`, error);
    if (state.timer) clearTimeout(state.timer);
    state.timer = setTimeout(() => {
      state.timer = undefined;
      state.retryAt = 0;
      this.kick(destination);
    }, wait);
  }

  /**
   * Events by `sender` (a user ID) still waiting in the outbox, with the servers they still wait for.
   * An event leaves once every destination accepted it (or took it for later delivery and its row went).
   */
  async pendingEvents(sender: string): Promise<Map<string, PendingEvent>> {
    const rows = await this.db.all<{ event_id: string; destination: string; room_id: string }>(
      'SELECT event_id, destination, room_id FROM federation_outbox WHERE sender = ? AND event_id IS NOT NULL ORDER BY seq',
      [sender],
    );
    const pending = new Map<string, PendingEvent>();
    for (const row of rows) {
      const entry = pending.get(row.event_id) ?? { roomId: row.room_id, destinations: [] };
      if (!entry.destinations.includes(row.destination)) entry.destinations.push(row.destination);
      pending.set(row.event_id, entry);
    }
    return pending;
  }
}

/**
 * The room engine's outbox (given to `Rooms` at construction): local events are queued for every
 * other server in the room in the write that made them, so they are durable together; once that
 * write is durable, each destination's queue is kicked.
 */
export function roomOutbox(queues: Pick<OutgoingQueues, 'enqueue' | 'kick'>): OutboxHook {
  return (tx, write) => {
    if (write.servers.length === 0) return;
    queues.enqueue(tx, write.servers, { pdus: write.events.map((e) => toPdu(e, write.version)), eventIds: write.events.map((e) => e.event_id) });
    return () => {
      for (const server of write.servers) queues.kick(server);
    };
  };
}
