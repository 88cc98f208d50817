import { encodeBase64 } from '../crypto/base64.ts';
import type { SigningKey } from '../crypto/ed25519.ts';
import { signingBytes } from '../crypto/signing.ts';
import type { RoomEvent } from '../events/event.ts';
import { roomIdOfPdu, verifyEventSignature, withoutDerivedRoomId, type PDU } from '../events/pdu.ts';
import { redactEvent } from '../events/redaction.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import { RoomError } from '../rooms/errors.ts';
import type { Ed25519Backend } from '../crypto/ed25519.ts';
import type { VerifyKeys } from './keyring.ts';

/**
 * An event as it travels: no event_id from v3 on (receivers derive it), no room_id on a v12+
 * create event (its ID is the room's), no local unsigned data.
 */
export function toPdu(event: RoomEvent, version: RoomVersion): PDU {
  const { event_id: eventId, unsigned: _unsigned, ...rest } = withoutDerivedRoomId(event, version);
  return (version.eventIdFormat === 'local' ? { ...rest, event_id: eventId } : rest) as PDU;
}

/** Adds our signature to another server's event (an invite we countersign). */
export async function countersignEvent<T extends PDU>(event: T, version: RoomVersion, serverName: string, keyId: string, key: SigningKey): Promise<T> {
  const signature = encodeBase64(await key.sign(signingBytes(redactEvent(event, version))));
  const signatures = { ...event.signatures, [serverName]: { ...(event.signatures?.[serverName] ?? {}), [keyId]: signature } };
  return { ...event, signatures };
}

/** An event reference: an ID (v3+) or an [ID, hashes] pair (v1–v2). */
const isReference = (ref: unknown): boolean => typeof ref === 'string' || (Array.isArray(ref) && typeof ref[0] === 'string');
const isOptionalString = (value: unknown): boolean => value === undefined || typeof value === 'string';

/**
 * The shape every PDU must have before anything else looks at it. Only a create event may
 * lack room_id (v12+, where its ID names the room: roomIdOfPdu).
 */
export function isPduShaped(value: unknown): value is PDU {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const pdu = value as Record<string, unknown>;
  return (
    (typeof pdu['room_id'] === 'string' || (pdu['room_id'] === undefined && pdu['type'] === 'm.room.create' && pdu['state_key'] === '')) &&
    typeof pdu['sender'] === 'string' &&
    typeof pdu['type'] === 'string' &&
    typeof pdu['origin_server_ts'] === 'number' &&
    typeof pdu['depth'] === 'number' &&
    typeof pdu['content'] === 'object' && pdu['content'] !== null && !Array.isArray(pdu['content']) &&
    Array.isArray(pdu['prev_events']) && pdu['prev_events'].every(isReference) &&
    Array.isArray(pdu['auth_events']) && pdu['auth_events'].every(isReference) &&
    typeof pdu['hashes'] === 'object' && pdu['hashes'] !== null &&
    typeof pdu['signatures'] === 'object' && pdu['signatures'] !== null &&
    isOptionalString(pdu['state_key']) &&
    isOptionalString(pdu['redacts']) &&
    isOptionalString(pdu['origin'])
  );
}

/** The room a PDU of a transaction or an answer is in (a v12+ create event's is its own ID); one that names none is refused. */
export function roomOf(pdu: PDU): string {
  const roomId = roomIdOfPdu(pdu);
  if (roomId === undefined) throw new RoomError('bad_event', 'the event names no room');
  return roomId;
}

/** Whether a server's signature on an event verifies, under any of its key IDs, with the keys `keyRing` holds or fetches. */
export type SignatureCheck = (pdu: PDU, version: RoomVersion, server: string) => Promise<boolean>;

export function signatureCheck(keyRing: Pick<VerifyKeys, 'verifyKey'>, ed25519: Ed25519Backend): SignatureCheck {
  return async (pdu, version, server) => {
    for (const keyId of Object.keys(pdu.signatures?.[server] ?? {})) {
      const key = await keyRing.verifyKey(server, keyId, pdu.origin_server_ts);
      if (key && (await verifyEventSignature(pdu, version, server, keyId, key, ed25519))) return true;
    }
    return false;
  };
}
