/**
 * Verify keys of servers with DNS names (server-server §Retrieving server keys): fetched from
 * the server itself (`GET /_matrix/key/v2/server`), checked against its own signature, kept
 * durably for as long as they say (never more than 7 days ahead), fetched again for an unknown
 * key ID or an expired key, and asked of trusted notaries when the server cannot be reached.
 * We are a notary too: `notaryQuery` and `notaryBatch` answer `/_matrix/key/v2/query`,
 * countersigned. A hex name's key still follows from the name (`ed25519:hearth`), no fetch.
 */
import { decodeBase64 } from '../crypto/base64.ts';
import type { JsonObject } from '../crypto/canonical-json.ts';
import type { Ed25519Backend } from '../crypto/ed25519.ts';
import { HEARTH_KEY_ID, publicKeyFromServerName } from '../crypto/identity.ts';
import { signJson, verifyJsonSignature } from '../crypto/signing.ts';
import { isValidServerName } from '../events/identifiers.ts';
import { CodedError } from '../util/coded-error.ts';
import type { ServerSigningKeys } from './signing-keys.ts';
import type { ServerKeyStore, StoredServerKey } from './server-key-store.ts';
import type { FederationTransport } from './transport.ts';

/** The most a key document is trusted ahead, whatever its valid_until_ts says. */
export const MAX_KEY_VALIDITY_MS = 7 * 24 * 60 * 60 * 1000;
/** After a fetch that did not give the key asked for, the same server is not asked again for this long. */
export const FRUITLESS_REFETCH_MS = 30_000;
/** The most servers one POST /_matrix/key/v2/query may ask about. */
export const MAX_NOTARY_BATCH = 100;

/** How keys are fetched: the key server of `serverName`, and a notary's query endpoint. Both reject when unreachable. */
export interface KeyFetcher {
  serverKeys(serverName: string): Promise<unknown>;
  notaryQuery(notary: string, body: { server_keys: Record<string, Record<string, { minimum_valid_until_ts?: number }>> }): Promise<unknown>;
}

export interface ServerKeysOptions {
  serverName: string;
  signingKeys: ServerSigningKeys;
  ed25519: Ed25519Backend;
  store: ServerKeyStore;
  fetcher: KeyFetcher;
  /** Notaries asked, in order, when a server cannot be reached (`--trusted-key-server`); none by default. */
  trustedNotaries?: string[];
  now: () => number;
  log?: (message: string, error?: unknown) => void;
}

export class KeyDocumentError extends Error {
  override name = 'KeyDocumentError';
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Checks a key document claimed to be `serverName`'s: its shape, and that every signature it
 * carries by one of its own verify keys verifies (at least one must). Returns its keys to keep.
 */
export async function verifyKeyDocument(document: unknown, serverName: string, ed25519: Ed25519Backend, fetchedTs: number): Promise<StoredServerKey[]> {
  if (!isObject(document)) throw new KeyDocumentError('the key document is not an object');
  if (document['server_name'] !== serverName) throw new KeyDocumentError(`the key document is for ${String(document['server_name'])}, not ${serverName}`);
  const validUntil = document['valid_until_ts'];
  if (typeof validUntil !== 'number' || !Number.isSafeInteger(validUntil)) throw new KeyDocumentError('the key document has no valid_until_ts');
  const verifyKeys = document['verify_keys'];
  const oldKeys = document['old_verify_keys'] ?? {};
  if (!isObject(verifyKeys) || !isObject(oldKeys)) throw new KeyDocumentError('verify_keys and old_verify_keys must be objects');
  const keys: StoredServerKey[] = [];
  const current = new Map<string, Uint8Array>();
  for (const [keyId, entry] of Object.entries(verifyKeys)) {
    const key = ed25519Key(keyId, entry);
    if (!key) continue;
    current.set(keyId, key.bytes);
    keys.push({ serverName, keyId, key: key.text, validUntilTs: Math.min(validUntil, fetchedTs + MAX_KEY_VALIDITY_MS), expiredTs: null, fetchedTs });
  }
  for (const [keyId, entry] of Object.entries(oldKeys)) {
    const key = ed25519Key(keyId, entry);
    const expired = isObject(entry) ? entry['expired_ts'] : undefined;
    if (!key || current.has(keyId) || typeof expired !== 'number') continue;
    keys.push({ serverName, keyId, key: key.text, validUntilTs: expired, expiredTs: expired, fetchedTs });
  }
  const signatures = isObject(document['signatures']) ? document['signatures'][serverName] : undefined;
  const signedWith = isObject(signatures) ? Object.keys(signatures).filter((keyId) => current.has(keyId)) : [];
  if (signedWith.length === 0) throw new KeyDocumentError(`the key document is not signed by any of ${serverName}'s verify keys`);
  for (const keyId of signedWith) {
    if (!(await verifyJsonSignature(document, serverName, keyId, current.get(keyId)!, ed25519))) throw new KeyDocumentError(`${serverName}'s signature with ${keyId} does not verify`);
  }
  return keys;
}

function ed25519Key(keyId: string, entry: unknown): { text: string; bytes: Uint8Array } | undefined {
  if (!/^ed25519:[a-zA-Z0-9_]+$/.test(keyId) || !isObject(entry) || typeof entry['key'] !== 'string') return undefined;
  try {
    const bytes = decodeBase64(entry['key']);
    return bytes.length === 32 ? { text: entry['key'], bytes } : undefined;
  } catch {
    return undefined;
  }
}

/** When a key may be used: `at` is when the signature was made (an event's origin_server_ts); now for a request. */
function usable(key: StoredServerKey, at: number | undefined, now: number): boolean {
  if (key.expiredTs !== null) return at !== undefined && at < key.expiredTs;
  return key.validUntilTs >= (at ?? now);
}

/**
 * The key ring of a server with a DNS name. Its `verifyKey` and `serverKeys` stand where
 * `KeyRing`'s do; `at` says when the signature was made, so that an old key verifies what it
 * signed before it expired (requests give none: only a current key will do).
 */
export class ServerKeys {
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly direct = new Map<string, Promise<'done' | 'unreachable'>>();
  private readonly fruitless = new Map<string, number>();

  constructor(private readonly options: ServerKeysOptions) {}

  async verifyKey(serverName: string, keyId: string, at?: number): Promise<Uint8Array | undefined> {
    const { now } = this.options;
    if (publicKeyFromServerName(serverName)) return keyId === HEARTH_KEY_ID ? publicKeyFromServerName(serverName) : undefined;
    // No key server to ask for a name that is none (it would go into the request's URL).
    if (!isValidServerName(serverName)) return undefined;
    if (serverName === this.options.serverName) {
      const own = this.options.signingKeys.publicKey(keyId);
      if (!own) return undefined;
      return own.expiredTs === undefined || (at !== undefined && at < own.expiredTs) ? own.key : undefined;
    }
    const find = async () => (await this.options.store.keysOf(serverName)).find((k) => k.keyId === keyId);
    let key = await find();
    if (key && usable(key, at, now())) return decodeBase64(key.key);
    // An old key's expiry is final; anything else may be fixed by asking again (a new key, a longer validity).
    if (key?.expiredTs != null) return undefined;
    const lastFruitless = this.fruitless.get(serverName);
    if (lastFruitless !== undefined && now() - lastFruitless < FRUITLESS_REFETCH_MS) return undefined;
    await this.refresh(serverName);
    key = await find();
    if (key && usable(key, at, now())) {
      this.fruitless.delete(serverName);
      return decodeBase64(key.key);
    }
    this.fruitless.set(serverName, now());
    return undefined;
  }

  /** Our self-signed key document (GET /_matrix/key/v2/server). */
  serverKeys(): Promise<Record<string, unknown>> {
    return this.options.signingKeys.document(this.options.serverName);
  }

  /** Fetches a server's keys afresh (directly, else through the trusted notaries); one fetch per server at a time. Never rejects. */
  refresh(serverName: string): Promise<void> {
    return this.once(this.inFlight, serverName, async () => {
      if ((await this.fetchDirectly(serverName)) === 'unreachable') await this.fromNotaries(serverName);
    });
  }

  private once<T>(map: Map<string, Promise<T>>, key: string, task: () => Promise<T>): Promise<T> {
    let pending = map.get(key);
    if (!pending) {
      pending = task().finally(() => map.delete(key));
      map.set(key, pending);
    }
    return pending;
  }

  /** Asks the server itself; keeps its document when it verifies. Notaries serve from this alone, so two never wait on each other. */
  private fetchDirectly(serverName: string): Promise<'done' | 'unreachable'> {
    return this.once(this.direct, serverName, async () => {
      const { fetcher, ed25519, store, now, log } = this.options;
      let document: unknown;
      try {
        document = await fetcher.serverKeys(serverName);
      } catch (error) {
        log?.(`the key server of ${serverName} cannot be reached`, error);
        return 'unreachable';
      }
      try {
        await store.save(serverName, await verifyKeyDocument(document, serverName, ed25519, now()), document as JsonObject);
      } catch (error) {
        log?.(`${serverName} served a key document we do not accept`, error);
      }
      return 'done';
    });
  }

  /** Asks each trusted notary in turn; keeps what the first one gives that both the server and the notary signed. */
  private async fromNotaries(serverName: string): Promise<void> {
    const { fetcher, ed25519, store, now, log } = this.options;
    for (const notary of this.options.trustedNotaries ?? []) {
      if (notary === serverName || notary === this.options.serverName) continue;
      try {
        const answer = await fetcher.notaryQuery(notary, { server_keys: { [serverName]: {} } });
        const documents = isObject(answer) && Array.isArray(answer['server_keys']) ? answer['server_keys'] : [];
        let kept = false;
        for (const document of documents) {
          if (!isObject(document) || document['server_name'] !== serverName) continue;
          if (!(await this.signedByNotary(document, notary))) continue;
          const keys = await verifyKeyDocument(document, serverName, ed25519, now()).catch(() => undefined);
          if (!keys) continue;
          await store.save(serverName, keys, document as JsonObject);
          kept = true;
        }
        if (kept) return;
      } catch (error) {
        log?.(`notary ${notary} did not answer for ${serverName}`, error);
      }
    }
  }

  /** Whether the notary's countersignature verifies, with the notary's key fetched from the notary itself. */
  private async signedByNotary(document: Record<string, unknown>, notary: string): Promise<boolean> {
    const signatures = isObject(document['signatures']) ? document['signatures'][notary] : undefined;
    for (const keyId of isObject(signatures) ? Object.keys(signatures) : []) {
      const key = await this.verifyKey(notary, keyId);
      if (key && (await verifyJsonSignature(document, notary, keyId, key, this.options.ed25519))) return true;
    }
    return false;
  }

  // ------------------------------------------------------------------ notary

  /**
   * GET /_matrix/key/v2/query/{serverName} (and the older `/{serverName}/{keyId}`): the server's key
   * documents, countersigned by us; [] when none can be had.
   */
  async notaryQuery(serverName: string, minimumValidUntilTs?: number, keyIds?: string[]): Promise<{ server_keys: Record<string, unknown>[] }> {
    return { server_keys: await this.notarised(serverName, minimumValidUntilTs ?? this.options.now(), keyIds) };
  }

  /**
   * POST /_matrix/key/v2/query: the same for several servers, each for the key IDs it names (all of
   * its keys when it names none); servers with nothing to give are left out.
   */
  async notaryBatch(body: unknown): Promise<{ server_keys: Record<string, unknown>[] }> {
    const query = isObject(body) ? body['server_keys'] : undefined;
    if (!isObject(query)) throw new CodedError(400, 'M_BAD_JSON', 'server_keys must be an object');
    const servers = Object.entries(query);
    if (servers.length > MAX_NOTARY_BATCH) throw new CodedError(400, 'M_LIMIT_EXCEEDED', `at most ${MAX_NOTARY_BATCH} servers per query`);
    const out: Record<string, unknown>[] = [];
    for (const [serverName, criteria] of servers) {
      if (!isValidServerName(serverName) || !isObject(criteria)) throw new CodedError(400, 'M_BAD_JSON', `bad query for ${JSON.stringify(serverName)}`);
      // The requester says how long the keys must be valid to be of use; the spec's default is now.
      let minimum: number | undefined;
      for (const criterion of Object.values(criteria)) {
        const ts = isObject(criterion) ? criterion['minimum_valid_until_ts'] : undefined;
        if (typeof ts === 'number') minimum = Math.max(minimum ?? ts, ts);
      }
      const keyIds = Object.keys(criteria);
      out.push(...(await this.notarised(serverName, minimum ?? this.options.now(), keyIds.length > 0 ? keyIds : undefined)));
    }
    return { server_keys: out };
  }

  /**
   * The documents to give for a server, those holding one of `keyIds` when it names some: fetched again
   * unless one kept is valid long enough. A fetch adds to what is kept and never takes a key away, so a
   * key the origin no longer lists (or an answer that fails) leaves the document that had it served.
   */
  private async notarised(serverName: string, minimumValidUntilTs: number, keyIds?: string[]): Promise<Record<string, unknown>[]> {
    const { serverName: us, signingKeys, store } = this.options;
    if (!isValidServerName(serverName)) throw new CodedError(400, 'M_INVALID_PARAM', `${JSON.stringify(serverName)} is not a server name`);
    if (serverName === us) return [await this.serverKeys()];
    const holdsAsked = (document: JsonObject) => keyIds === undefined || keyIds.some((keyId) => holdsKey(document, keyId));
    let documents = (await store.documentsOf(serverName)).filter(holdsAsked);
    if (!documents.some((d) => typeof d['valid_until_ts'] === 'number' && d['valid_until_ts'] >= minimumValidUntilTs)) {
      await this.fetchDirectly(serverName);
      documents = (await store.documentsOf(serverName)).filter(holdsAsked);
    }
    return Promise.all(documents.map((d) => signJson(d, us, signingKeys.keyId, signingKeys.signingKey)));
  }
}

/** Whether a key document lists a key ID, current or old. */
function holdsKey(document: JsonObject, keyId: string): boolean {
  return [document['verify_keys'], document['old_verify_keys']].some((keys) => isObject(keys) && Object.hasOwn(keys, keyId));
}

/** A KeyFetcher over a federation transport: both endpoints are plain JSON, no X-Matrix. */
export function transportKeyFetcher(transport: FederationTransport, maxBytes = 256 * 1024): KeyFetcher {
  const exchange = async (destination: string, request: Request): Promise<unknown> => {
    const response = await transport.send(destination, request);
    const text = await response.text();
    if (text.length > maxBytes) throw new KeyDocumentError(`the answer of ${destination} is over ${maxBytes} bytes`);
    if (!response.ok) throw new KeyDocumentError(`${destination} answered ${response.status}`);
    return JSON.parse(text) as unknown;
  };
  return {
    serverKeys: (serverName) => exchange(serverName, new Request(`http://${serverName}/_matrix/key/v2/server`)),
    notaryQuery: (notary, body) =>
      exchange(notary, new Request(`http://${notary}/_matrix/key/v2/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })),
  };
}
