import { CodedError } from '../util/coded-error.ts';

export type RoomErrorCode = 'not_found' | 'forbidden' | 'too_large' | 'bad_event' | 'unsupported_version' | 'missing_events' | 'duplicate_annotation' | 'room_in_use' | 'invalid_param' | 'unsupported' | 'bad_alias' | 'still_in_room';

/** The HTTP status and Matrix errcode of each code; the rest are 400 `M_BAD_JSON`. */
const MATRIX_CODES: Partial<Record<RoomErrorCode, [number, string]>> = {
  not_found: [404, 'M_NOT_FOUND'],
  forbidden: [403, 'M_FORBIDDEN'],
  too_large: [413, 'M_TOO_LARGE'],
  unsupported_version: [400, 'M_UNSUPPORTED_ROOM_VERSION'],
  duplicate_annotation: [400, 'M_DUPLICATE_ANNOTATION'],
  room_in_use: [400, 'M_ROOM_IN_USE'],
  invalid_param: [400, 'M_INVALID_PARAM'],
  unsupported: [400, 'M_UNKNOWN'],
  bad_alias: [400, 'M_BAD_ALIAS'],
  // The spec's example for /forget, and Synapse's answer.
  still_in_room: [400, 'M_UNKNOWN'],
};

/** The room engine's own errors, by `code`; each carries the Matrix status and errcode an API answers with. */
export class RoomError extends CodedError {
  override name = 'RoomError';
  constructor(
    readonly code: RoomErrorCode,
    message: string,
  ) {
    const [status, errcode] = MATRIX_CODES[code] ?? [400, 'M_BAD_JSON'];
    super(status, errcode, message);
  }
}

export const roomNotFound = (roomId: string) => new RoomError('not_found', `unknown room ${roomId}`);
