import { encodeBase64, encodeBase64Url, decodeBase64 } from '../crypto/base64.ts';
import { canonicalJson, utf8, type JsonObject } from '../crypto/canonical-json.ts';
import type { Ed25519Backend, SigningKey } from '../crypto/ed25519.ts';
import { sha256 } from '../crypto/sha256.ts';
import { computeContentHash, signingBytes, signJson, verifyJsonSignature, type Signatures } from '../crypto/signing.ts';
import { redactEvent } from './redaction.ts';
import type { RoomVersion } from './room-versions.ts';

/** v1–v2 reference an event as [id, {sha256}]; v3+ by its ID alone. */
export type EventReference = string | [string, { sha256?: string }];

/** A persistent data unit as it travels over federation (server-server §PDUs). */
export interface PDU {
  event_id?: string; // only in room versions 1 and 2
  room_id: string;
  sender: string;
  origin?: string;
  origin_server_ts: number;
  type: string;
  state_key?: string;
  content: JsonObject;
  prev_events: EventReference[];
  auth_events: EventReference[];
  depth: number;
  hashes: { sha256: string };
  signatures: Signatures;
  unsigned?: JsonObject;
  redacts?: string;
}

export function referenceId(ref: EventReference): string {
  return typeof ref === 'string' ? ref : ref[0];
}

export const referenceIds = (refs: readonly EventReference[]): string[] => refs.map(referenceId);

/** Reference hash (server-server §Calculating the reference hash for an event). */
export function computeReferenceHash(event: object, version: RoomVersion): Uint8Array {
  const { signatures: _s, unsigned: _u, ...redacted } = redactEvent(event, version);
  return sha256(utf8(canonicalJson(redacted)));
}

/** The event ID: assigned by the origin in v1–v2, derived from the reference hash from v3 on. */
export function computeEventId(event: object, version: RoomVersion): string {
  switch (version.eventIdFormat) {
    case 'local': {
      const id = (event as { event_id?: unknown }).event_id;
      if (typeof id !== 'string') throw new Error(`room version ${version.id} events carry their own event_id`);
      return id;
    }
    case 'base64':
      return '$' + encodeBase64(computeReferenceHash(event, version));
    case 'urlsafe':
      return '$' + encodeBase64Url(computeReferenceHash(event, version));
  }
}

/** Adds the content hash and the origin's signature over the redacted event (server-server §Signing events). */
export async function hashAndSignEvent<T extends object>(
  event: T,
  version: RoomVersion,
  serverName: string,
  keyId: string,
  key: SigningKey,
): Promise<T & { hashes: { sha256: string }; signatures: Signatures }> {
  const hashed = { ...event, hashes: { sha256: encodeBase64(computeContentHash(event)) } };
  const signedRedacted = await signJson(redactEvent(hashed, version), serverName, keyId, key);
  return { ...hashed, signatures: signedRedacted.signatures };
}

/**
 * Hashes and signs a new event and derives its ID in one pass: from v3 on, the
 * reference hash covers exactly the bytes the signature covers (the redacted event
 * without signatures), so they are canonicalised once.
 */
export async function signNewEvent<T extends object>(
  event: T,
  version: RoomVersion,
  serverName: string,
  keyId: string,
  key: SigningKey,
): Promise<{ event: T & { hashes: { sha256: string }; signatures: Signatures }; eventId: string }> {
  const hashed = { ...event, hashes: { sha256: encodeBase64(computeContentHash(event)) } };
  const bytes = signingBytes(redactEvent(hashed, version));
  const signature = encodeBase64(await key.sign(bytes));
  const signed = { ...hashed, signatures: { [serverName]: { [keyId]: signature } } };
  let eventId: string;
  if (version.eventIdFormat === 'local') eventId = computeEventId(signed, version);
  else {
    const hash = sha256(bytes);
    eventId = '$' + (version.eventIdFormat === 'base64' ? encodeBase64(hash) : encodeBase64Url(hash));
  }
  return { event: signed, eventId };
}

/** Checks one server's signature on an event: the signature covers the redacted form. */
export function verifyEventSignature(
  event: object,
  version: RoomVersion,
  serverName: string,
  keyId: string,
  publicKey: Uint8Array,
  backend: Ed25519Backend,
): Promise<boolean> {
  return verifyJsonSignature(redactEvent(event, version), serverName, keyId, publicKey, backend);
}

/** True when hashes.sha256 matches the content; when it does not, receivers must use the redacted event. */
export function contentHashMatches(event: object): boolean {
  const claimed = (event as { hashes?: { sha256?: unknown } }).hashes?.sha256;
  if (typeof claimed !== 'string') return false;
  let claimedBytes: Uint8Array;
  try {
    claimedBytes = decodeBase64(claimed);
  } catch {
    return false;
  }
  const actual = computeContentHash(event);
  return claimedBytes.length === actual.length && claimedBytes.every((b, i) => b === actual[i]);
}
