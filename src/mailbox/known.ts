import type { Database } from '../storage/database.ts';

/**
 * The peers known to be mailboxes (they answered a collect), kept in `mailbox_known` so that a
 * restarted sender can deposit at once. Shared by the sender's side (where to deposit) and the
 * recipient's (a collect is the probe that finds them).
 */
export class KnownMailboxes {
  private readonly known = new Set<string>();
  private readonly listeners = new Set<(mailbox: string) => void>();

  constructor(
    private readonly db: Database,
    private readonly now: () => number,
  ) {}

  async load(): Promise<void> {
    const rows = await this.db.all<{ server_name: string }>('SELECT server_name FROM mailbox_known');
    for (const row of rows) this.known.add(row.server_name);
  }

  list(): string[] {
    return [...this.known];
  }

  /** A peer was found to be a mailbox (first time, or again after a restart). */
  onKnown(listener: (mailbox: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async remember(mailbox: string): Promise<void> {
    if (this.known.has(mailbox)) return;
    this.known.add(mailbox);
    await this.db.transaction((tx) => tx.run('INSERT OR IGNORE INTO mailbox_known (server_name, learned_ts) VALUES (?, ?)', [mailbox, this.now()]));
    for (const listener of this.listeners) listener(mailbox);
  }

  async forget(mailbox: string): Promise<void> {
    if (!this.known.delete(mailbox)) return;
    await this.db.transaction((tx) => tx.run('DELETE FROM mailbox_known WHERE server_name = ?', [mailbox]));
  }
}
