import type { Hono } from 'hono';
import { z } from 'zod';
import { MatrixError } from '../../http/matrix-error.ts';
import { validate } from '../../http/validate.ts';
import type { FederationEnv } from '../context.ts';
import { MAX_EDUS_PER_TXN, MAX_PDUS_PER_TXN, type Edu } from '../queue.ts';

/** A /send body; also how the mailbox checks a sealed letter's content. */
export const transactionSchema = z
  .object({
    origin: z.string(),
    origin_server_ts: z.number().int(),
    pdus: z.array(z.unknown()).max(MAX_PDUS_PER_TXN, `at most ${MAX_PDUS_PER_TXN} PDUs per transaction`),
    edus: z.array(z.object({ edu_type: z.string(), content: z.record(z.string(), z.unknown()) }).loose()).max(MAX_EDUS_PER_TXN, `at most ${MAX_EDUS_PER_TXN} EDUs per transaction`).optional(),
  })
  .loose();

/** PUT /send/{txnId} (server-server §Transactions). */
export function transactionRoutes(app: Hono<FederationEnv>): void {
  app.put('/_matrix/federation/v1/send/:txnId', async (c) => {
    const services = c.get('services');
    const origin = c.get('origin');
    const txnId = c.req.param('txnId');
    const body = validate(transactionSchema, c.get('body'));
    if (body.origin !== origin) throw new MatrixError(400, 'M_INVALID_PARAM', `the transaction's origin ${body.origin} is not the request's origin ${origin}`);
    const response = await services.federation.receiveTransaction(origin, txnId, body.pdus, (body.edus ?? []) as Edu[]);
    return c.json(response);
  });
}
