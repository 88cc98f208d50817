import type { Database } from '../storage/database.ts';

/** What a mailbox holds at most. Over a bound, a deposit is refused and the sender keeps the mail queued. */
export interface MailboxLimits {
  /** Letters waiting for one destination. */
  maxLettersPerDestination: number;
  /** Bytes (of letter JSON) waiting for one destination. */
  maxBytesPerDestination: number;
  /** Bytes waiting for all destinations together. */
  maxTotalBytes: number;
  /** One letter; also bounds a collect batch, which must fit one federation response (4 MiB). */
  maxLetterBytes: number;
  /** Letters uncollected this long are dropped (their senders gave them up to us long ago). */
  maxAgeMs: number;
}

export const DEFAULT_MAILBOX_LIMITS: MailboxLimits = {
  maxLettersPerDestination: 1_000,
  maxBytesPerDestination: 16 * 1024 * 1024,
  maxTotalBytes: 256 * 1024 * 1024,
  maxLetterBytes: 3.5 * 1024 * 1024,
  maxAgeMs: 14 * 24 * 60 * 60 * 1000,
};

/** A deposit over a bound; nothing was stored. */
export class MailboxFull extends Error {
  override name = 'MailboxFull';
  constructor(readonly scope: 'letter' | 'destination' | 'total', message: string) {
    super(message);
  }
}

export interface StoredLetter {
  seq: number;
  origin: string;
  txnId: string;
  /** The letter as deposited (JSON text). */
  letter: string;
}

export interface CollectedBatch {
  letters: StoredLetter[];
  /** Pass it to the next collect to acknowledge (and delete) everything up to here. */
  position: number;
  /** More letters wait beyond this batch. */
  more: boolean;
}

const utf8 = new TextEncoder();

/**
 * The letters a mailbox holds, per destination, in arrival order. Deposits are
 * bounded per destination and in total; collection is two-step: a batch is read
 * with a position, and only the next collect that names that position deletes it,
 * so letters survive a collector that dies before it stored them.
 */
export class MailboxStore {
  readonly limits: MailboxLimits;

  constructor(
    private readonly db: Database,
    private readonly now: () => number,
    limits: Partial<MailboxLimits> = {},
  ) {
    this.limits = { ...DEFAULT_MAILBOX_LIMITS, ...limits };
  }

  /**
   * Stores a letter; durable when it resolves. A repeat of a letter already held
   * (same destination, origin and txn ID) is accepted without storing it twice.
   */
  async deposit(destination: string, origin: string, txnId: string, letter: string): Promise<{ seq: number; duplicate: boolean }> {
    const bytes = utf8.encode(letter).length;
    const { limits } = this;
    if (bytes > limits.maxLetterBytes) throw new MailboxFull('letter', `a letter may hold at most ${limits.maxLetterBytes} bytes`);
    const now = this.now();
    return this.db.transaction((tx) => {
      tx.run('DELETE FROM mailbox_letters WHERE received_ts < ?', [now - limits.maxAgeMs]);
      const held = tx.get<{ seq: number }>('SELECT seq FROM mailbox_letters WHERE destination = ? AND origin = ? AND txn_id = ?', [destination, origin, txnId]);
      if (held) return { seq: held.seq, duplicate: true };
      const mine = tx.get<{ n: number; bytes: number | null }>('SELECT COUNT(*) AS n, SUM(bytes) AS bytes FROM mailbox_letters WHERE destination = ?', [destination])!;
      if (mine.n + 1 > limits.maxLettersPerDestination) throw new MailboxFull('destination', `the mailbox holds its limit of ${limits.maxLettersPerDestination} letters for ${destination}`);
      if ((mine.bytes ?? 0) + bytes > limits.maxBytesPerDestination) throw new MailboxFull('destination', `the mailbox holds its limit of ${limits.maxBytesPerDestination} bytes for ${destination}`);
      const all = tx.get<{ bytes: number | null }>('SELECT SUM(bytes) AS bytes FROM mailbox_letters')!;
      if ((all.bytes ?? 0) + bytes > limits.maxTotalBytes) throw new MailboxFull('total', `the mailbox is full (${limits.maxTotalBytes} bytes)`);
      const { lastInsertRowid } = tx.run('INSERT INTO mailbox_letters (destination, origin, txn_id, letter, bytes, received_ts) VALUES (?, ?, ?, ?, ?, ?)', [
        destination, origin, txnId, letter, bytes, now,
      ]);
      return { seq: lastInsertRowid, duplicate: false };
    });
  }

  /**
   * Acknowledges (deletes, durably) the destination's letters up to `acknowledged`,
   * then returns the next ones in order: at most `maxLetters`, and no more bytes than
   * a letter may have (always at least one letter, when one waits).
   */
  async collect(destination: string, acknowledged: number, maxLetters = 50): Promise<CollectedBatch> {
    if (acknowledged > 0) {
      await this.db.transaction((tx) => tx.run('DELETE FROM mailbox_letters WHERE destination = ? AND seq <= ?', [destination, acknowledged]));
    }
    const rows = await this.db.all<{ seq: number; origin: string; txn_id: string; letter: string; bytes: number }>(
      'SELECT seq, origin, txn_id, letter, bytes FROM mailbox_letters WHERE destination = ? AND seq > ? ORDER BY seq LIMIT ?',
      [destination, acknowledged, maxLetters + 1],
    );
    const letters: StoredLetter[] = [];
    let bytes = 0;
    for (const row of rows.slice(0, maxLetters)) {
      if (letters.length > 0 && bytes + row.bytes > this.limits.maxLetterBytes) break;
      bytes += row.bytes;
      letters.push({ seq: row.seq, origin: row.origin, txnId: row.txn_id, letter: row.letter });
    }
    return { letters, position: letters.at(-1)?.seq ?? acknowledged, more: rows.length > letters.length };
  }

  /** Letters and bytes held, for one destination or for all. */
  async usage(destination?: string): Promise<{ letters: number; bytes: number }> {
    const row = destination === undefined
      ? await this.db.get<{ n: number; bytes: number | null }>('SELECT COUNT(*) AS n, SUM(bytes) AS bytes FROM mailbox_letters')
      : await this.db.get<{ n: number; bytes: number | null }>('SELECT COUNT(*) AS n, SUM(bytes) AS bytes FROM mailbox_letters WHERE destination = ?', [destination]);
    return { letters: row?.n ?? 0, bytes: row?.bytes ?? 0 };
  }
}
