import { encodeBase64 } from '../crypto/base64.ts';
import type { SigningKey } from '../crypto/ed25519.ts';
import { HEARTH_KEY_ID, publicKeyFromServerName } from '../crypto/identity.ts';
import { signJson } from '../crypto/signing.ts';

/** How long the key document we serve says it stays valid. */
const KEY_VALIDITY_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * What federation needs of a key ring: the verify key of a server's key ID (`at`: when the
 * signature was made, an event's origin_server_ts; none for a request, which needs a current
 * key), our own key document, and, for a server that is a notary (`ServerKeys`, a host with a
 * DNS name), the answers of `/_matrix/key/v2/query`.
 */
export interface VerifyKeys {
  verifyKey(serverName: string, keyId: string, at?: number): Promise<Uint8Array | undefined>;
  serverKeys(): Promise<Record<string, unknown>>;
  notaryQuery?(serverName: string, minimumValidUntilTs?: number, keyIds?: string[]): Promise<{ server_keys: Record<string, unknown>[] }>;
  notaryBatch?(body: unknown): Promise<{ server_keys: Record<string, unknown>[] }>;
}

/**
 * Server name → verify key, for room events and for requests alike. A Hearth server
 * name is the hex of its ed25519 public key under the fixed key ID, so the key of
 * any Hearth peer follows from its name: no key fetch, no notary, no trust on first
 * use. Names that are not Hearth names have no key here (Hearth federates only with
 * Hearth peers, which have no DNS names to fetch keys from).
 */
export class KeyRing implements VerifyKeys {
  constructor(
    private readonly serverName: string,
    private readonly signingKey: SigningKey,
    private readonly now: () => number,
  ) {}

  async verifyKey(serverName: string, keyId: string): Promise<Uint8Array | undefined> {
    return keyId === HEARTH_KEY_ID ? publicKeyFromServerName(serverName) : undefined;
  }

  /** Our self-signed key document (GET /_matrix/key/v2/server). */
  async serverKeys(): Promise<Record<string, unknown>> {
    return signJson(
      {
        server_name: this.serverName,
        valid_until_ts: this.now() + KEY_VALIDITY_MS,
        verify_keys: { [HEARTH_KEY_ID]: { key: encodeBase64(this.signingKey.publicKey) } },
        old_verify_keys: {},
      },
      this.serverName,
      HEARTH_KEY_ID,
      this.signingKey,
    );
  }
}
