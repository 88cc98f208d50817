import type { Hono } from 'hono';
import { MatrixError, forbidden } from '../http/matrix-error.ts';
import { validate } from '../http/validate.ts';
import { publicKeyFromServerName } from '../crypto/identity.ts';
import type { FederationEnv } from '../federation/context.ts';
import { LetterRejected, letterSchema, type Letter } from './letter.ts';
import type { MailboxHost } from './host.ts';
import type { MailNotices } from './notices.ts';
import { MAILBOX_PREFIX } from './paths.ts';
import { MailboxFull } from './store.ts';
import { z } from 'zod';

const notifySchema = z.object({}).loose();
const position = /^\d{1,15}$/;

/**
 * The mailbox's routes on the federation app, so every one is X-Matrix
 * authenticated and its origin bound to the libp2p peer before it gets here.
 * Notify is served by every server; deposit and collect only by mailbox hosts
 * (elsewhere they fall through to 404 M_UNRECOGNIZED, which is how a peer learns
 * that this one is not a mailbox).
 */
export function mailboxRoutes(app: Hono<FederationEnv>, mailbox: { host?: MailboxHost; notices: MailNotices }): void {
  const { host, notices } = mailbox;
  app.post(`${MAILBOX_PREFIX}/notify`, (c) => {
    validate(notifySchema, c.get('body') ?? {});
    notices.say(c.get('origin'));
    return c.json({});
  });
  if (!host) return;

  // Deposit: the sender leaves its own sealed /send request for the destination.
  app.put(`${MAILBOX_PREFIX}/letters/:destination/:txnId`, async (c) => {
    const origin = c.get('origin');
    const destination = c.req.param('destination');
    const txnId = c.req.param('txnId');
    const letter = validate(letterSchema, c.get('body')) as unknown as Letter;
    if (destination === c.get('services').serverName) throw new MatrixError(400, 'M_INVALID_PARAM', 'this server is the destination: send the transaction directly');
    // Only Hearth servers (a name is a key) can collect: mail for any other name would wait for no one.
    if (!publicKeyFromServerName(destination)) throw new MatrixError(400, 'M_INVALID_PARAM', `${destination} is not a Hearth server name`);
    try {
      await host.accept(origin, destination, txnId, letter);
    } catch (error) {
      if (error instanceof MailboxFull) throw new MatrixError(507, 'M_RESOURCE_LIMIT_EXCEEDED', error.message);
      if (error instanceof LetterRejected) throw forbidden(error.message);
      throw error;
    }
    return c.json({});
  });

  // Collect: only the destination itself, and `ack` acknowledges (deletes) what it was given up to there.
  app.get(`${MAILBOX_PREFIX}/letters/:destination`, async (c) => {
    const destination = c.req.param('destination');
    if (destination !== c.get('origin')) throw forbidden('only the destination may collect its mail');
    const ack = c.req.query('ack');
    if (ack !== undefined && !position.test(ack)) throw new MatrixError(400, 'M_INVALID_PARAM', 'ack must be a position a collect returned');
    return c.json(await host.collect(destination, ack === undefined ? 0 : Number(ack)));
  });
}
