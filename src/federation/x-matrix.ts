import { decodeBase64, encodeBase64 } from '../crypto/base64.ts';
import type { JsonObject } from '../crypto/canonical-json.ts';
import type { Ed25519Backend, SigningKey } from '../crypto/ed25519.ts';
import { signingBytes, verifyJsonSignature } from '../crypto/signing.ts';

/**
 * Request authentication (server-server §Request Authentication): the origin signs
 * {method, uri, origin, destination, content} and sends the signature in
 * `Authorization: X-Matrix origin=…,destination=…,key=…,sig=…`.
 */
export interface XMatrixCredentials {
  origin: string;
  destination: string | undefined;
  key: string;
  sig: string;
}

/** The signed description of a request. `uri` is the path with its query string, as sent. */
export function requestJson(method: string, uri: string, origin: string, destination: string, content: unknown): JsonObject {
  const json: JsonObject = { method, uri, origin, destination };
  if (content !== undefined) json['content'] = content as JsonObject;
  return json;
}

export async function authorizationHeader(
  method: string,
  uri: string,
  origin: string,
  destination: string,
  content: unknown,
  keyId: string,
  key: SigningKey,
): Promise<string> {
  const signature = encodeBase64(await key.sign(signingBytes(requestJson(method, uri, origin, destination, content))));
  return `X-Matrix origin="${origin}",destination="${destination}",key="${keyId}",sig="${signature}"`;
}

/** An Authorization header that says X-Matrix but does not hold its origin, key and signature. */
export const MALFORMED = 'malformed';

/**
 * Parses an X-Matrix Authorization header: undefined when there is none (or another scheme),
 * MALFORMED when it is X-Matrix but lacks what it must carry.
 */
export function parseAuthorization(header: string | undefined | null): XMatrixCredentials | typeof MALFORMED | undefined {
  if (!header) return undefined;
  const match = /^X-Matrix(?:\s+(.*))?$/i.exec(header.trim());
  if (!match) return undefined;
  const params = new Map<string, string>();
  // param = name "=" ( token / quoted-string ), separated by commas (RFC 9110 auth-param).
  const pattern = /\s*([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s"]*))\s*(?:,|$)/gy;
  const rest = match[1] ?? '';
  let m: RegExpExecArray | null;
  while (pattern.lastIndex < rest.length && (m = pattern.exec(rest))) {
    const value = m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3]!;
    params.set(m[1]!.toLowerCase(), value);
  }
  if (pattern.lastIndex < rest.length && rest.slice(pattern.lastIndex).trim() !== '') return MALFORMED;
  const origin = params.get('origin');
  const key = params.get('key');
  const sig = params.get('sig');
  if (!origin || !key || !sig) return MALFORMED;
  return { origin, destination: params.get('destination'), key, sig };
}

/** Checks the signature of a request against the origin's verify key. */
export async function verifyRequest(
  credentials: XMatrixCredentials,
  method: string,
  uri: string,
  destination: string,
  content: unknown,
  publicKey: Uint8Array,
  ed25519: Ed25519Backend,
): Promise<boolean> {
  if (credentials.destination !== undefined && credentials.destination !== destination) return false;
  try {
    decodeBase64(credentials.sig);
  } catch {
    return false;
  }
  const signed = {
    ...requestJson(method, uri, credentials.origin, destination, content),
    signatures: { [credentials.origin]: { [credentials.key]: credentials.sig } },
  };
  return verifyJsonSignature(signed, credentials.origin, credentials.key, publicKey, ed25519);
}
