// A server that is only a key: it signs server-server requests as any other server would and
// hands them straight to a homeserver's inbound federation entry, as a transport would, so a
// test can speak what Hearth itself never sends (the v1 endpoints older servers call, forged
// headers, wrong destinations) and see the raw answer, whatever its shape.
import { tweetnaclBackend, type SigningKey } from '../../src/crypto/ed25519.ts';
import { HEARTH_KEY_ID, serverNameFromPublicKey } from '../../src/crypto/identity.ts';
import { authorizationHeader } from '../../src/federation/x-matrix.ts';
import type { Homeserver } from '../../src/homeserver.ts';

export interface SignedCall {
  /** The Authorization header to send instead of the signed one (a forgery, or none). */
  authorization?: string | null;
  /** Who the transport says sent it: the peer itself unless given; undefined as over HTTPS. */
  remoteServerName?: string | undefined;
  /** The destination the request is signed for (default: the homeserver's name). */
  destination?: string;
  /** A raw body, sent as it is and not signed (for bodies too large or not JSON). */
  rawBody?: string;
}

export interface SigningPeer {
  name: string;
  key: SigningKey;
  /** One request to `target`; the status and the parsed JSON answer. */
  call(target: Homeserver, method: 'GET' | 'PUT' | 'POST', uri: string, body?: unknown, options?: SignedCall): Promise<{ status: number; body: any }>;
}

export async function signingPeer(): Promise<SigningPeer> {
  const key = await tweetnaclBackend.keyFromSeed(crypto.getRandomValues(new Uint8Array(32)));
  const name = serverNameFromPublicKey(key.publicKey);
  return {
    name,
    key,
    call: async (target, method, uri, body, options = {}) => {
      const destination = options.destination ?? target.serverName;
      const authorization = options.authorization !== undefined ? options.authorization : await authorizationHeader(method, uri, name, destination, body, HEARTH_KEY_ID, key);
      const headers: Record<string, string> = {};
      if (authorization !== null) headers['authorization'] = authorization;
      const text = options.rawBody ?? (body === undefined ? undefined : JSON.stringify(body));
      if (text !== undefined) headers['content-type'] = 'application/json';
      const remote = 'remoteServerName' in options ? options.remoteServerName : name;
      const response = await target.federation.fetch(new Request(`http://${target.serverName}${uri}`, { method, headers, body: text }), remote);
      const answer = await response.text();
      return { status: response.status, body: answer === '' ? undefined : JSON.parse(answer) };
    },
  };
}
