import { z } from 'zod';
import type { Ed25519Backend, SigningKey } from '../crypto/ed25519.ts';
import type { TransactionBody } from '../federation/client.ts';
import type { Edu } from '../federation/queue.ts';
import { transactionSchema } from '../federation/routes/transactions.ts';
import { authorizationHeader, MALFORMED, parseAuthorization, verifyRequest } from '../federation/x-matrix.ts';

/**
 * A sealed letter: the complete signed request the sender would have sent the
 * destination directly, `PUT /_matrix/federation/v1/send/{txnId}` with its X-Matrix
 * Authorization header (destination = the recipient) and its JSON body. The mailbox
 * can hold it and hand it over, but not alter it: the recipient checks the signature
 * as if the request had come straight from the origin.
 */
export interface Letter {
  method: 'PUT';
  uri: string;
  authorization: string;
  content: TransactionBody;
}

export const letterSchema = z.strictObject({
  method: z.literal('PUT'),
  uri: z.string().max(1024),
  authorization: z.string().max(2048),
  content: z.record(z.string(), z.unknown()),
});

const SEND_PATH = /^\/_matrix\/federation\/v1\/send\/([^/?#]+)$/;

/** A letter that does not verify: a mailbox refuses it, a recipient drops it. */
export class LetterRejected extends Error {
  override name = 'LetterRejected';
}

export function sendUri(txnId: string): string {
  return `/_matrix/federation/v1/send/${encodeURIComponent(txnId)}`;
}

/** Seals a transaction for `destination`, signed by `origin`, exactly as it would have gone directly. */
export async function sealLetter(origin: string, destination: string, txnId: string, content: TransactionBody, keyId: string, key: SigningKey): Promise<Letter> {
  const uri = sendUri(txnId);
  return { method: 'PUT', uri, authorization: await authorizationHeader('PUT', uri, origin, destination, content, keyId, key), content };
}

export interface OpenedLetter {
  origin: string;
  txnId: string;
  pdus: unknown[];
  edus: Edu[];
}

/**
 * Checks a letter addressed to `destination` as the inbound federation app checks a
 * direct request (X-Matrix origin, destination, method, URI and content), except that
 * the origin is not the peer that handed it over. Only /send letters are accepted.
 */
export async function openLetter(
  letter: unknown,
  destination: string,
  verifyKey: (server: string, keyId: string) => Promise<Uint8Array | undefined>,
  ed25519: Ed25519Backend,
): Promise<OpenedLetter> {
  const parsed = letterSchema.safeParse(letter);
  if (!parsed.success) throw new LetterRejected(`not a letter: ${parsed.error.issues[0]?.message ?? 'malformed'}`);
  const { uri, authorization, content } = parsed.data;
  const match = SEND_PATH.exec(uri);
  if (!match) throw new LetterRejected(`only /send letters are carried, not ${uri.slice(0, 100)}`);
  let txnId: string;
  try {
    txnId = decodeURIComponent(match[1]!);
  } catch {
    throw new LetterRejected('the letter\'s transaction ID is not valid percent-encoding');
  }
  const credentials = parseAuthorization(authorization);
  if (!credentials || credentials === MALFORMED) throw new LetterRejected('the letter has no well-formed X-Matrix authorization');
  // Required here (optional on a direct request, where the connection says who it is for).
  if (credentials.destination !== destination) throw new LetterRejected(`the letter is addressed to ${credentials.destination ?? 'nobody'}, not ${destination}`);
  if (credentials.origin === destination) throw new LetterRejected('a letter may not claim to come from its destination');
  const key = await verifyKey(credentials.origin, credentials.key);
  if (!key) throw new LetterRejected(`no verify key ${credentials.key} for ${credentials.origin}`);
  if (!(await verifyRequest(credentials, 'PUT', uri, destination, content, key, ed25519))) throw new LetterRejected('the letter\'s X-Matrix signature does not verify');
  const body = transactionSchema.safeParse(content);
  if (!body.success) throw new LetterRejected(`the letter's transaction is malformed: ${body.error.issues[0]?.message ?? ''}`);
  if (body.data.origin !== credentials.origin) throw new LetterRejected(`the transaction's origin ${body.data.origin} is not the letter's origin ${credentials.origin}`);
  return { origin: credentials.origin, txnId, pdus: body.data.pdus, edus: (body.data.edus ?? []) as Edu[] };
}
