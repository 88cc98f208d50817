/**
 * matrix-js-sdk's objects in the seam's vocabulary (../chat.ts): its errors as `MatrixApiError`
 * (or a `TypeError` when the homeserver could not be reached, as fetch says it), its events as
 * plain `MatrixEvent`s with what the views need to know of their encryption.
 */
import { ConnectionError, MatrixError, type MatrixEvent as SdkEvent } from 'matrix-js-sdk';
import { DecryptionFailureCode } from 'matrix-js-sdk/lib/crypto-api/index.js';
import { MatrixApiError, type DecryptionProblem, type MatrixEvent } from '../chat.ts';

export function toChatError(error: unknown): unknown {
  if (error instanceof MatrixError) return new MatrixApiError(error.httpStatus ?? 0, error.errcode ?? 'M_UNKNOWN', error.data?.error ?? error.message);
  if (error instanceof ConnectionError) return new TypeError(error.message);
  return error;
}

/** Runs an SDK call, its failure in the seam's terms. */
export async function chatCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw toChatError(error);
  }
}

const PROBLEMS: Partial<Record<DecryptionFailureCode, DecryptionProblem>> = {
  [DecryptionFailureCode.MEGOLM_UNKNOWN_INBOUND_SESSION_ID]: 'no-keys',
  [DecryptionFailureCode.MEGOLM_KEY_WITHHELD]: 'withheld',
  [DecryptionFailureCode.MEGOLM_KEY_WITHHELD_FOR_UNVERIFIED_DEVICE]: 'withheld-unverified',
  [DecryptionFailureCode.OLM_UNKNOWN_MESSAGE_INDEX]: 'later-index',
  [DecryptionFailureCode.HISTORICAL_MESSAGE_NO_KEY_BACKUP]: 'backup-missing',
  [DecryptionFailureCode.HISTORICAL_MESSAGE_BACKUP_UNCONFIGURED]: 'backup-unset',
  [DecryptionFailureCode.HISTORICAL_MESSAGE_WORKING_BACKUP]: 'backup-working',
  [DecryptionFailureCode.HISTORICAL_MESSAGE_USER_NOT_JOINED]: 'before-join',
  [DecryptionFailureCode.SENDER_IDENTITY_PREVIOUSLY_VERIFIED]: 'identity-changed',
  [DecryptionFailureCode.UNSIGNED_SENDER_DEVICE]: 'unsigned-device',
  [DecryptionFailureCode.UNKNOWN_SENDER_DEVICE]: 'unknown-device',
};

export function toChatEvent(event: SdkEvent): MatrixEvent {
  const failure = event.decryptionFailureReason;
  return {
    event_id: event.getId(),
    type: event.getType(),
    sender: event.getSender() ?? '',
    state_key: event.getStateKey(),
    origin_server_ts: event.getTs(),
    content: event.getContent(),
    unsigned: event.getUnsigned(),
    encrypted: event.isEncrypted() || undefined,
    decrypting: (event.isEncrypted() && event.getType() === 'm.room.encrypted') || undefined,
    undecryptable: failure ? (PROBLEMS[failure] ?? 'other') : undefined,
  };
}
