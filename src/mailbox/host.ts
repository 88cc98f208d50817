import type { Ed25519Backend } from '../crypto/ed25519.ts';
import type { FederationClient } from '../federation/client.ts';
import type { VerifyKeys } from '../federation/keyring.ts';
import type { Database } from '../storage/database.ts';
import { LetterRejected, openLetter, type Letter } from './letter.ts';
import { NOTIFY_PATH } from './paths.ts';
import { MailboxStore, type MailboxLimits } from './store.ts';

/** Letters per collect response. */
export const COLLECT_BATCH = 50;

export interface MailboxHostOptions {
  db: Database;
  now: () => number;
  limits: Partial<MailboxLimits>;
  ed25519: Ed25519Backend;
  /** Other servers' verify keys (federation's key ring). */
  keyRing: Pick<VerifyKeys, 'verifyKey'>;
  /** To tell a destination that mail arrived. */
  client: FederationClient;
}

/** The mailbox side (mailbox hosts only): it holds letters, bounded, for their destination alone to collect, and tells the destination at once. */
export class MailboxHost {
  readonly store: MailboxStore;

  constructor(private readonly options: MailboxHostOptions) {
    this.store = new MailboxStore(options.db, options.now, options.limits);
  }

  /**
   * Takes a letter from `origin` for `destination`. The letter must be the depositor's own,
   * addressed to that destination, under that txn ID, and verify; it is durable when this
   * resolves, and the destination is told.
   */
  async accept(origin: string, destination: string, txnId: string, letter: Letter): Promise<void> {
    const opened = await openLetter(letter, destination, (server, keyId) => this.options.keyRing.verifyKey(server, keyId), this.options.ed25519);
    if (opened.origin !== origin) throw new LetterRejected(`the letter is from ${opened.origin}, not from ${origin} who deposits it`);
    if (opened.txnId !== txnId) throw new LetterRejected(`the letter is transaction ${opened.txnId}, not ${txnId}`);
    await this.store.deposit(destination, origin, txnId, JSON.stringify(letter));
    // Best effort: if the destination is online it collects now; if not, it collects when it connects.
    this.options.client.request(destination, 'POST', NOTIFY_PATH, { body: {} }).catch(() => undefined);
  }

  /** A collect by `destination` (already authenticated as the caller): acknowledge up to `ack`, return the next batch. */
  async collect(destination: string, ack: number): Promise<{ letters: { letter: unknown }[]; position: string; more: boolean }> {
    const batch = await this.store.collect(destination, ack, COLLECT_BATCH);
    return { letters: batch.letters.map((l) => ({ letter: JSON.parse(l.letter) as unknown })), position: String(batch.position), more: batch.more };
  }
}
