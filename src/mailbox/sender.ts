import type { SigningKey } from '../crypto/ed25519.ts';
import { publicKeyFromServerName } from '../crypto/identity.ts';
import { FederationRequestError, type FederationClient, type TransactionBody } from '../federation/client.ts';
import type { MailDrop } from '../federation/queue.ts';
import type { KnownMailboxes } from './known.ts';
import { sealLetter } from './letter.ts';
import { depositPath } from './paths.ts';

/** How a deposit went, for each known mailbox. */
export interface DepositOutcome {
  destination: string;
  txnId: string;
  accepted: string[];
  refused: { mailbox: string; status: number; errcode: string; message: string }[];
}

export interface MailSenderOptions {
  serverName: string;
  keyId: string;
  signingKey: SigningKey;
  /** Outbound requests (signed X-Matrix, over the host's transport). */
  client: FederationClient;
  known: KnownMailboxes;
  log: (message: string, error?: unknown) => void;
}

/**
 * The sender's side of the mailbox: what the outgoing queues hand a transaction their destination
 * did not answer. It needs only the client and the known mailboxes, so the composition root makes
 * it before the queues and gives it to them at construction; collecting and serving (`Mailbox`),
 * which feed federation's inbound path, come after federation.
 */
export class MailSender implements MailDrop {
  private readonly listeners = new Set<(outcome: DepositOutcome) => void>();
  private stopped = false;

  constructor(private readonly options: MailSenderOptions) {}

  stop(): void {
    this.stopped = true;
  }

  onDeposit(listener: (outcome: DepositOutcome) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Leaves a transaction the destination could not be sent with every known
   * mailbox (all of them, so one that is down or loses it does not lose the mail).
   * True once at least one has durably taken it.
   */
  async deposit(destination: string, txnId: string, body: TransactionBody): Promise<boolean> {
    // Mailboxes hold mail for Hearth peers only (a hex name, collected over libp2p); a server with a DNS name is retried.
    if (!publicKeyFromServerName(destination)) return false;
    const { serverName, keyId, signingKey, client, known, log } = this.options;
    const mailboxes = known.list().filter((m) => m !== destination && m !== serverName);
    if (mailboxes.length === 0 || this.stopped) return false;
    const letter = await sealLetter(serverName, destination, txnId, body, keyId, signingKey);
    const outcome: DepositOutcome = { destination, txnId, accepted: [], refused: [] };
    await Promise.all(mailboxes.map(async (mailbox) => {
      try {
        await client.request(mailbox, 'PUT', depositPath(destination, txnId), { body: letter });
        outcome.accepted.push(mailbox);
      } catch (error) {
        if (error instanceof FederationRequestError) {
          outcome.refused.push({ mailbox, status: error.status, errcode: error.errcode, message: error.message });
          if (error.status === 404 && error.errcode === 'M_UNRECOGNIZED') await known.forget(mailbox);
          else if (error.status < 500 || error.status === 507) log(`mailbox: ${mailbox} refused mail for ${destination}: ${error.message}`);
        }
        // Unreachable mailboxes stay known: they will likely be back.
      }
    }));
    for (const listener of this.listeners) listener(outcome);
    return outcome.accepted.length > 0;
  }
}
