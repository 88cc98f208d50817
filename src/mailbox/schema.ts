import type { ComponentSchema } from '../storage/database.ts';

export const mailboxSchema: ComponentSchema = {
  component: 'mailbox',
  migrations: [
    {
      version: 1,
      description: 'letters held for destinations (mailbox side), mailboxes we know of (sender side)',
      up: (tx) => {
        // Sealed letters waiting for their destination, in the order they came. seq never repeats
        // (AUTOINCREMENT), so a collector's position stays meaningful while new letters arrive.
        tx.run(`CREATE TABLE mailbox_letters (
          seq INTEGER PRIMARY KEY AUTOINCREMENT,
          destination TEXT NOT NULL,
          origin TEXT NOT NULL,
          txn_id TEXT NOT NULL,
          letter TEXT NOT NULL,
          bytes INTEGER NOT NULL,
          received_ts INTEGER NOT NULL,
          UNIQUE (destination, origin, txn_id)
        )`);
        tx.run('CREATE INDEX mailbox_letters_by_destination ON mailbox_letters (destination, seq)');
        tx.run('CREATE INDEX mailbox_letters_by_age ON mailbox_letters (received_ts)');
        // Peers that answered a collect as mailboxes: a restarted sender can deposit at once.
        tx.run(`CREATE TABLE mailbox_known (
          server_name TEXT PRIMARY KEY,
          learned_ts INTEGER NOT NULL
        )`);
      },
    },
    {
      version: 2,
      description: 'letters opened (recipient side), so a copy from a second mailbox days later is not applied twice',
      up: (tx) => {
        // The transaction dedupe forgets after a day; a copy may wait in another mailbox for weeks, and
        // its EDUs (to-device messages) must not be applied again.
        tx.run(`CREATE TABLE mailbox_opened (
          origin TEXT NOT NULL,
          txn_id TEXT NOT NULL,
          opened_ts INTEGER NOT NULL,
          PRIMARY KEY (origin, txn_id)
        )`);
        tx.run('CREATE INDEX mailbox_opened_by_age ON mailbox_opened (opened_ts)');
      },
    },
  ],
};
