import { z } from 'zod';
import type { Ed25519Backend, SigningKey } from '../crypto/ed25519.ts';
import { publicKeyFromServerName } from '../crypto/identity.ts';
import { FederationRequestError, type FederationClient, type TransactionBody } from '../federation/client.ts';
import type { Edu, MailDrop } from '../federation/queue.ts';
import type { Database } from '../storage/database.ts';
import { LetterRejected, openLetter, sealLetter, type Letter } from './letter.ts';
import { MailboxStore, type MailboxLimits } from './store.ts';

const enc = encodeURIComponent;

export const MAILBOX_PREFIX = '/_hearth/mailbox/v1';
export const lettersPath = (destination: string) => `${MAILBOX_PREFIX}/letters/${enc(destination)}`;
export const depositPath = (destination: string, txnId: string) => `${lettersPath(destination)}/${enc(txnId)}`;
export const NOTIFY_PATH = `${MAILBOX_PREFIX}/notify`;

/** Letters per collect response. */
const COLLECT_BATCH = 50;
/** How long we remember a letter we opened: longer than any mailbox keeps one (14 days by default). */
const OPENED_TTL_MS = 60 * 24 * 60 * 60 * 1000;

export interface MailboxOptions {
  db: Database;
  serverName: string;
  keyId: string;
  signingKey: SigningKey;
  ed25519: Ed25519Backend;
  verifyKey: (server: string, keyId: string) => Promise<Uint8Array | undefined>;
  /** Outbound requests (signed X-Matrix, over the host's transport). */
  client: FederationClient;
  /** The normal inbound transaction path: dedupe by (origin, txn ID), every PDU verified. */
  receiveTransaction: (origin: string, txnId: string, pdus: unknown[], edus: Edu[]) => Promise<unknown>;
  now: () => number;
  log: (message: string, error?: unknown) => void;
  /** Hold mail for others (a mailbox host), within these limits; absent: this server only sends and collects. */
  serve?: Partial<MailboxLimits>;
}

/** How a deposit went, for each known mailbox. */
export interface DepositOutcome {
  destination: string;
  txnId: string;
  accepted: string[];
  refused: { mailbox: string; status: number; errcode: string; message: string }[];
}

/** How one collection from a mailbox went. */
export interface CollectOutcome {
  mailbox: string;
  /** Letters that verified and went through the transaction path. */
  accepted: number;
  /** Letters that did not verify (altered, misaddressed): dropped. */
  rejected: number;
}

const collectResponse = z.object({
  letters: z.array(z.object({ letter: z.unknown() }).loose()).max(COLLECT_BATCH),
  position: z.string().regex(/^\d+$/),
  more: z.boolean().optional(),
});

/**
 * Store-and-forward for destinations that cannot be reached. Sender side: the
 * outgoing queue hands it a transaction it could not deliver ({@link deposit}); it
 * seals it as a letter and leaves it with every known mailbox that will take it.
 * Recipient side: it collects from a mailbox when that peer connects or says there
 * is mail, opens each letter (X-Matrix as if direct) and feeds it to the normal
 * transaction path. Mailbox side (when `serve` is set): it holds letters, bounded,
 * for their destination alone to collect, and tells the destination at once.
 * Learning who is a mailbox needs no configuration: the collect on connect is the probe.
 */
export class Mailbox implements MailDrop {
  /** Present on mailbox hosts only. */
  readonly store: MailboxStore | undefined;
  private readonly known = new Set<string>();
  /** Peers that answered a collect with "unrecognised": not mailboxes (in memory: a restart asks again). */
  private readonly notMailboxes = new Set<string>();
  private readonly collecting = new Map<string, { again: boolean; done: Promise<void> }>();
  private readonly depositListeners = new Set<(outcome: DepositOutcome) => void>();
  private readonly collectListeners = new Set<(outcome: CollectOutcome) => void>();
  private readonly knownListeners = new Set<(mailbox: string) => void>();
  private stopped = false;

  constructor(private readonly options: MailboxOptions) {
    this.store = options.serve ? new MailboxStore(options.db, options.now, options.serve) : undefined;
  }

  async start(): Promise<void> {
    const rows = await this.options.db.all<{ server_name: string }>('SELECT server_name FROM mailbox_known');
    for (const row of rows) this.known.add(row.server_name);
    await this.options.db.transaction((tx) => tx.run('DELETE FROM mailbox_opened WHERE opened_ts < ?', [this.options.now() - OPENED_TTL_MS]));
  }

  stop(): void {
    this.stopped = true;
  }

  /** Mailboxes we know of (they answered a collect). */
  knownMailboxes(): string[] {
    return [...this.known];
  }

  onDeposit(listener: (outcome: DepositOutcome) => void): () => void {
    this.depositListeners.add(listener);
    return () => this.depositListeners.delete(listener);
  }

  onCollected(listener: (outcome: CollectOutcome) => void): () => void {
    this.collectListeners.add(listener);
    return () => this.collectListeners.delete(listener);
  }

  /** A peer was found to be a mailbox (first time, or again after a restart). */
  onMailboxKnown(listener: (mailbox: string) => void): () => void {
    this.knownListeners.add(listener);
    return () => this.knownListeners.delete(listener);
  }

  // ------------------------------------------------------------- sender side

  /**
   * Leaves a transaction the destination could not be sent with every known
   * mailbox (all of them, so one that is down or loses it does not lose the mail).
   * True once at least one has durably taken it.
   */
  async deposit(destination: string, txnId: string, body: TransactionBody): Promise<boolean> {
    // Mailboxes hold mail for Hearth peers only (a hex name, collected over libp2p); a server with a DNS name is retried.
    if (!publicKeyFromServerName(destination)) return false;
    const mailboxes = [...this.known].filter((m) => m !== destination && m !== this.options.serverName);
    if (mailboxes.length === 0 || this.stopped) return false;
    const { serverName, keyId, signingKey, client } = this.options;
    const letter = await sealLetter(serverName, destination, txnId, body, keyId, signingKey);
    const outcome: DepositOutcome = { destination, txnId, accepted: [], refused: [] };
    await Promise.all(mailboxes.map(async (mailbox) => {
      try {
        await client.request(mailbox, 'PUT', depositPath(destination, txnId), { body: letter });
        outcome.accepted.push(mailbox);
      } catch (error) {
        if (error instanceof FederationRequestError) {
          outcome.refused.push({ mailbox, status: error.status, errcode: error.errcode, message: error.message });
          if (error.status === 404 && error.errcode === 'M_UNRECOGNIZED') await this.forget(mailbox);
          else if (error.status < 500 || error.status === 507) this.options.log(`mailbox: ${mailbox} refused mail for ${destination}: ${error.message}`);
        }
        // Unreachable mailboxes stay known: they will likely be back.
      }
    }));
    for (const listener of this.depositListeners) listener(outcome);
    return outcome.accepted.length > 0;
  }

  // ------------------------------------------------------------- recipient side

  /** A peer connected: if it is (or may be) a mailbox, collect our mail from it. */
  peerConnected(serverName: string): void {
    if (serverName === this.options.serverName || this.notMailboxes.has(serverName)) return;
    void this.collectFrom(serverName);
  }

  /** A mailbox says mail for us arrived. */
  notified(mailbox: string): void {
    if (mailbox === this.options.serverName) return;
    this.notMailboxes.delete(mailbox);
    void this.collectFrom(mailbox);
  }

  /**
   * Collects everything a mailbox holds for us, batch by batch: each letter is opened
   * and processed (durably) before the next request acknowledges it. One collection
   * per mailbox at a time; a call during one makes it go round again. Never rejects.
   */
  collectFrom(mailbox: string): Promise<void> {
    const running = this.collecting.get(mailbox);
    if (running) {
      running.again = true;
      return running.done;
    }
    const state = { again: false, done: Promise.resolve() };
    state.done = (async () => {
      try {
        do {
          state.again = false;
          await this.collectOnce(mailbox);
        } while (state.again && !this.stopped);
      } catch (error) {
        this.options.log(`mailbox: collecting from ${mailbox} failed`, error);
      } finally {
        this.collecting.delete(mailbox);
      }
    })();
    this.collecting.set(mailbox, state);
    return state.done;
  }

  private async collectOnce(mailbox: string): Promise<void> {
    const { client, serverName } = this.options;
    const outcome: CollectOutcome = { mailbox, accepted: 0, rejected: 0 };
    let ack: string | undefined;
    for (;;) {
      if (this.stopped) return;
      let raw: unknown;
      try {
        raw = await client.request(mailbox, 'GET', lettersPath(serverName), { query: { ack } });
      } catch (error) {
        if (error instanceof FederationRequestError && error.status === 404 && error.errcode === 'M_UNRECOGNIZED') {
          this.notMailboxes.add(mailbox);
          await this.forget(mailbox);
          return;
        }
        // Unreachable or failing: what was not acknowledged stays there for next time.
        if (error instanceof FederationRequestError) this.options.log(`mailbox: collecting from ${mailbox} failed: ${error.message}`);
        return;
      }
      const batch = collectResponse.safeParse(raw);
      if (!batch.success) throw new Error(`mailbox ${mailbox} answered a collect with something else`);
      await this.remember(mailbox);
      for (const { letter } of batch.data.letters) {
        let opened;
        try {
          opened = await openLetter(letter, serverName, this.options.verifyKey, this.options.ed25519);
        } catch (error) {
          if (!(error instanceof LetterRejected)) throw error;
          outcome.rejected++;
          this.options.log(`mailbox: a letter from ${mailbox} was dropped: ${error.message}`);
          continue;
        }
        outcome.accepted++;
        // A copy of one we opened (another mailbox had it too): its EDUs must not be applied twice.
        const seen = await this.options.db.get('SELECT 1 AS seen FROM mailbox_opened WHERE origin = ? AND txn_id = ?', [opened.origin, opened.txnId]);
        if (seen) continue;
        // Throws on a storage failure: then nothing is acknowledged and the letter stays.
        await this.options.receiveTransaction(opened.origin, opened.txnId, opened.pdus, opened.edus);
        await this.options.db.transaction((tx) =>
          tx.run('INSERT OR IGNORE INTO mailbox_opened (origin, txn_id, opened_ts) VALUES (?, ?, ?)', [opened.origin, opened.txnId, this.options.now()]));
      }
      // The request with this position acknowledges the batch (and brings the next, if any).
      if (batch.data.letters.length === 0) break;
      ack = batch.data.position;
    }
    if (outcome.accepted + outcome.rejected > 0) for (const listener of this.collectListeners) listener(outcome);
  }

  private async remember(mailbox: string): Promise<void> {
    this.notMailboxes.delete(mailbox);
    if (this.known.has(mailbox)) return;
    this.known.add(mailbox);
    await this.options.db.transaction((tx) => tx.run('INSERT OR IGNORE INTO mailbox_known (server_name, learned_ts) VALUES (?, ?)', [mailbox, this.options.now()]));
    for (const listener of this.knownListeners) listener(mailbox);
  }

  private async forget(mailbox: string): Promise<void> {
    if (!this.known.delete(mailbox)) return;
    await this.options.db.transaction((tx) => tx.run('DELETE FROM mailbox_known WHERE server_name = ?', [mailbox]));
  }

  // ------------------------------------------------------------- mailbox side

  /**
   * Takes a letter from `origin` for `destination` (mailbox hosts only). The letter
   * must be the depositor's own, addressed to that destination, under that txn ID,
   * and verify; it is durable when this resolves, and the destination is told.
   */
  async accept(origin: string, destination: string, txnId: string, letter: Letter): Promise<void> {
    const store = this.store;
    if (!store) throw new Error('this server is not a mailbox');
    const opened = await openLetter(letter, destination, this.options.verifyKey, this.options.ed25519);
    if (opened.origin !== origin) throw new LetterRejected(`the letter is from ${opened.origin}, not from ${origin} who deposits it`);
    if (opened.txnId !== txnId) throw new LetterRejected(`the letter is transaction ${opened.txnId}, not ${txnId}`);
    await store.deposit(destination, origin, txnId, JSON.stringify(letter));
    // Best effort: if the destination is online it collects now; if not, it collects when it connects.
    this.options.client.request(destination, 'POST', NOTIFY_PATH, { body: {} }).catch(() => undefined);
  }

  /** A collect by `destination` (already authenticated as the caller): acknowledge up to `ack`, return the next batch. */
  async collect(destination: string, ack: number): Promise<{ letters: { letter: unknown }[]; position: string; more: boolean }> {
    const store = this.store;
    if (!store) throw new Error('this server is not a mailbox');
    const batch = await store.collect(destination, ack, COLLECT_BATCH);
    return { letters: batch.letters.map((l) => ({ letter: JSON.parse(l.letter) as unknown })), position: String(batch.position), more: batch.more };
  }
}

