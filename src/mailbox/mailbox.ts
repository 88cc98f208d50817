import { z } from 'zod';
import type { Ed25519Backend } from '../crypto/ed25519.ts';
import { FederationRequestError, type FederationClient } from '../federation/client.ts';
import type { VerifyKeys } from '../federation/keyring.ts';
import type { Edu } from '../federation/queue.ts';
import type { Database } from '../storage/database.ts';
import type { KnownMailboxes } from './known.ts';
import { COLLECT_BATCH, type MailboxHost } from './host.ts';
import { LetterRejected, openLetter } from './letter.ts';
import type { MailNotices } from './notices.ts';
import { lettersPath } from './paths.ts';
import type { DepositOutcome, MailSender } from './sender.ts';
import type { MailboxStore } from './store.ts';

export { depositPath, lettersPath, MAILBOX_PREFIX } from './paths.ts';
export type { DepositOutcome } from './sender.ts';

/** How long we remember a letter we opened: longer than any mailbox keeps one (14 days by default). */
const OPENED_TTL_MS = 60 * 24 * 60 * 60 * 1000;

export interface MailboxOptions {
  db: Database;
  serverName: string;
  ed25519: Ed25519Backend;
  /** Other servers' verify keys (federation's key ring, made before either). */
  keyRing: Pick<VerifyKeys, 'verifyKey'>;
  /** Outbound requests (signed X-Matrix, over the host's transport). */
  client: FederationClient;
  /** The normal inbound transaction path (federation): dedupe by (origin, txn ID), every PDU verified. */
  inbound: { receiveTransaction(origin: string, txnId: string, pdus: unknown[], edus: Edu[]): Promise<unknown> };
  /** The peers known to be mailboxes, shared with the sender. */
  known: KnownMailboxes;
  /** The sender's side, made before the outgoing queues that deposit through it. */
  sender: MailSender;
  now: () => number;
  log: (message: string, error?: unknown) => void;
  /** What mailboxes say through POST /notify (the route says it; this side hears it). */
  notices: MailNotices;
  /** The mailbox side, on mailbox hosts only; absent: this server only sends and collects. */
  host?: MailboxHost;
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
 * Store-and-forward for destinations that cannot be reached. Sender side
 * (`MailSender`, sender.ts, given here): the outgoing queue hands it a transaction it
 * could not deliver; it seals it as a letter and leaves it with every known mailbox
 * that will take it. Recipient side: it collects from a mailbox when that peer connects or says there
 * is mail, opens each letter (X-Matrix as if direct) and feeds it to the normal
 * transaction path. Mailbox side (`MailboxHost`, host.ts, on mailbox hosts): it holds
 * letters, bounded, for their destination alone to collect, and tells the destination at once.
 * Learning who is a mailbox needs no configuration: the collect on connect is the probe.
 */
export class Mailbox {
  /** The letters held for others, on mailbox hosts only. */
  readonly store: MailboxStore | undefined;
  /** Peers that answered a collect with "unrecognised": not mailboxes (in memory: a restart asks again). */
  private readonly notMailboxes = new Set<string>();
  private readonly collecting = new Map<string, { again: boolean; done: Promise<void> }>();
  private readonly collectListeners = new Set<(outcome: CollectOutcome) => void>();
  private stopped = false;

  constructor(private readonly options: MailboxOptions) {
    this.store = options.host?.store;
    options.notices.hear((mailbox) => this.notified(mailbox));
  }

  async start(): Promise<void> {
    await this.options.known.load();
    await this.options.db.transaction((tx) => tx.run('DELETE FROM mailbox_opened WHERE opened_ts < ?', [this.options.now() - OPENED_TTL_MS]));
  }

  stop(): void {
    this.stopped = true;
    this.options.sender.stop();
  }

  /** Mailboxes we know of (they answered a collect). */
  knownMailboxes(): string[] {
    return this.options.known.list();
  }

  /** Which mailboxes took or refused a deposit (the sender's side). */
  onDeposit(listener: (outcome: DepositOutcome) => void): () => void {
    return this.options.sender.onDeposit(listener);
  }

  onCollected(listener: (outcome: CollectOutcome) => void): () => void {
    this.collectListeners.add(listener);
    return () => this.collectListeners.delete(listener);
  }

  /** A peer was found to be a mailbox (first time, or again after a restart). */
  onMailboxKnown(listener: (mailbox: string) => void): () => void {
    return this.options.known.onKnown(listener);
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
          await this.options.known.forget(mailbox);
          return;
        }
        // Unreachable or failing: what was not acknowledged stays there for next time.
        if (error instanceof FederationRequestError) this.options.log(`mailbox: collecting from ${mailbox} failed: ${error.message}`);
        return;
      }
      const batch = collectResponse.safeParse(raw);
      if (!batch.success) throw new Error(`mailbox ${mailbox} answered a collect with something else`);
      this.notMailboxes.delete(mailbox);
      await this.options.known.remember(mailbox);
      for (const { letter } of batch.data.letters) {
        let opened;
        try {
          opened = await openLetter(letter, serverName, (server, keyId) => this.options.keyRing.verifyKey(server, keyId), this.options.ed25519);
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
        await this.options.inbound.receiveTransaction(opened.origin, opened.txnId, opened.pdus, opened.edus);
        await this.options.db.transaction((tx) =>
          tx.run('INSERT OR IGNORE INTO mailbox_opened (origin, txn_id, opened_ts) VALUES (?, ?, ?)', [opened.origin, opened.txnId, this.options.now()]));
      }
      // The request with this position acknowledges the batch (and brings the next, if any).
      if (batch.data.letters.length === 0) break;
      ack = batch.data.position;
    }
    if (outcome.accepted + outcome.rejected > 0) for (const listener of this.collectListeners) listener(outcome);
  }
}
