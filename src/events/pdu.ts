import { encodeBase64, encodeBase64Url, decodeBase64 } from '../crypto/base64.ts';
import { canonicalJson, CanonicalMembers, utf8, type JsonObject } from '../crypto/canonical-json.ts';
import type { Ed25519Backend, SigningKey } from '../crypto/ed25519.ts';
import { sha256 } from '../crypto/sha256.ts';
import { computeContentHash, signingBytes, signJson, verifyJsonSignature, verifySignedBytes, type Signatures } from '../crypto/signing.ts';
import { redactEvent } from './redaction.ts';
import { getRoomVersion, type RoomVersion } from './room-versions.ts';

/** v1–v2 reference an event as [id, {sha256}]; v3+ by its ID alone. */
export type EventReference = string | [string, { sha256?: string }];

/** A persistent data unit as it travels over federation (server-server §PDUs). */
export interface PDU {
  event_id?: string; // only in room versions 1 and 2
  /** Absent only from a v12+ create event, whose ID names the room (see roomIdOfPdu). */
  room_id?: string;
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

/** The room's create event: type m.room.create with an empty state key. */
export const isCreateEvent = (event: { type: string; state_key?: string }): boolean => event.type === 'm.room.create' && event.state_key === '';

/** v12+: the ID of the room a create event makes, its event ID with the `!` sigil (rooms/v12, rule 1.2). */
export const roomIdOfCreateEvent = (eventId: string): string => '!' + eventId.slice(1);

/** v12+: the create event a room ID names, with the `$` sigil. */
export const createEventIdOfRoom = (roomId: string): string => '$' + roomId.slice(1);

/**
 * The IDs of an event's auth events, the create event included: from v12 it is not listed
 * but implied by room_id, and every walk of the auth graph (auth chains, state resolution,
 * the auth rules) must still reach it. The list as sent is referenceIds(event.auth_events).
 */
export function authEventIds(event: Pick<PDU, 'type' | 'state_key' | 'auth_events'> & { room_id: string }, version: RoomVersion): string[] {
  const listed = referenceIds(event.auth_events);
  if (!version.roomIdFromCreateEvent || isCreateEvent(event)) return listed;
  const create = createEventIdOfRoom(event.room_id);
  return listed.includes(create) ? listed : [...listed, create];
}

/**
 * The room a received PDU belongs to: its room_id, or for a v12+ create event (which has
 * none) its own ID with the `!` sigil, the version read from its content. Undefined when
 * the PDU names no room this way.
 */
export function roomIdOfPdu(pdu: Pick<PDU, 'room_id' | 'type' | 'state_key' | 'content'>): string | undefined {
  if (typeof pdu.room_id === 'string') return pdu.room_id;
  if (!isCreateEvent(pdu)) return undefined;
  const versionId = pdu.content['room_version'];
  const version = typeof versionId === 'string' ? getRoomVersion(versionId) : undefined;
  if (!version?.roomIdFromCreateEvent) return undefined;
  const eventId = eventIdOf(pdu, version);
  return eventId === undefined ? undefined : roomIdOfCreateEvent(eventId);
}

/**
 * A received PDU as the room engine keeps it (a RoomEvent): with its event ID and, for a v12+ create
 * event, the room ID its ID gives (never sent: toPdu leaves it out again). A room_id the
 * PDU carries is kept as it is, so a v12 create event that has one fails rule 1.2.
 */
export function asRoomEvent(pdu: PDU, eventId: string, version: RoomVersion): PDU & { event_id: string; room_id: string } {
  const roomId = pdu.room_id ?? (version.roomIdFromCreateEvent && isCreateEvent(pdu) ? roomIdOfCreateEvent(eventId) : '');
  return { ...pdu, room_id: roomId, event_id: eventId };
}

/**
 * The form of a stored event that travels and is hashed: a v12+ create event without the
 * room ID derived from its ID (the ID was computed without it). Other fields unchanged.
 */
export function withoutDerivedRoomId<T extends { type: string; state_key?: string; room_id?: string; event_id?: string }>(event: T, version: RoomVersion): T {
  if (!version.roomIdFromCreateEvent || !isCreateEvent(event) || event.event_id === undefined) return event;
  if (event.room_id !== roomIdOfCreateEvent(event.event_id)) return event;
  const { room_id: _derived, ...rest } = event;
  return rest as T;
}

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

/** The event ID of a PDU, or undefined when it cannot be derived (too malformed to encode). */
export function eventIdOf(pdu: object, version: RoomVersion): string | undefined {
  try {
    return computeEventId(pdu, version);
  } catch {
    return undefined;
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
  const eventId = version.eventIdFormat === 'local' ? computeEventId(signed, version) : eventIdFromSigningBytes(bytes, version.eventIdFormat);
  return { event: signed, eventId };
}

/** The event ID that reference-hashed bytes (signingBytes of the redacted event) give, from v3 on. */
export function eventIdFromSigningBytes(bytes: Uint8Array, format: 'base64' | 'urlsafe'): string {
  const hash = sha256(bytes);
  return '$' + (format === 'base64' ? encodeBase64(hash) : encodeBase64Url(hash));
}

/**
 * What the checks on a received event need, with each of its members encoded once:
 * its size as checkEventSize measures it, whether its content hash matches, and the
 * bytes its signatures cover (which its reference hash covers too). Each of these
 * used to encode the event afresh, five canonical encodings per event of a join.
 * Throws CanonicalJsonError for values the version's canonical JSON forbids.
 */
export interface ReceivedEventForms {
  /** UTF-8 bytes of the PDU's canonical JSON (without an event_id from v3 on, which is derived). */
  byteLength: number;
  contentHashMatches: boolean;
  /** Canonical JSON of the redacted event without signatures and unsigned. */
  signingBytes: Uint8Array;
}

const NOT_HASHED = new Set(['hashes', 'signatures', 'unsigned']);

export function receivedEventForms(pdu: object, version: RoomVersion): ReceivedEventForms {
  const members = new CanonicalMembers(pdu, { strict: version.strictCanonicalJson });
  const derivedId = version.eventIdFormat !== 'local';
  const byteLength = members.byteLength((key) => !(derivedId && key === 'event_id'));
  const redacted = redactEvent(pdu, version);
  const signed = members.join((key) => key !== 'signatures' && key !== 'unsigned' && Object.hasOwn(redacted, key), { content: redacted['content'] });
  return { byteLength, contentHashMatches: claimedHashMatches(pdu, sha256(utf8(members.join((key) => !NOT_HASHED.has(key))))), signingBytes: utf8(signed) };
}

/** Checks one server's signature over an event's signing bytes (receivedEventForms'). */
export function verifyEventSignatureOver(
  bytes: Uint8Array,
  event: { signatures?: Signatures },
  serverName: string,
  keyId: string,
  publicKey: Uint8Array,
  backend: Ed25519Backend,
): Promise<boolean> {
  return verifySignedBytes(bytes, event.signatures?.[serverName]?.[keyId], publicKey, backend);
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
  return claimedHashMatches(event, computeContentHash(event));
}

function claimedHashMatches(event: object, actual: Uint8Array): boolean {
  const claimed = (event as { hashes?: { sha256?: unknown } }).hashes?.sha256;
  if (typeof claimed !== 'string') return false;
  let claimedBytes: Uint8Array;
  try {
    claimedBytes = decodeBase64(claimed);
  } catch {
    return false;
  }
  return claimedBytes.length === actual.length && claimedBytes.every((b, i) => b === actual[i]);
}
