import { CodedError } from '../util/coded-error.ts';
import { FederationRequestError } from './client.ts';
import { RoomError } from '../rooms/errors.ts';

/** Failure of a federated membership change, with what the remote server said. */
export class FederationJoinError extends CodedError {
  override name = 'FederationJoinError';
}

export function unique<T>(items: T[]): T[] {
  return [...new Set(items)];
}

/** The template of a make_join/make_leave/make_knock, checked to be what we asked for. */
export function checkTemplate(template: unknown, roomId: string, userId: string, membership: string): Record<string, unknown> {
  if (typeof template !== 'object' || template === null) throw new FederationJoinError(502, 'M_BAD_JSON', 'the make_ response has no event');
  const event = template as Record<string, unknown>;
  const content = event['content'] as Record<string, unknown> | undefined;
  if (event['type'] !== 'm.room.member' || event['room_id'] !== roomId || event['sender'] !== userId || event['state_key'] !== userId || content?.['membership'] !== membership) {
    throw new FederationJoinError(502, 'M_BAD_JSON', `the make_${membership} template is not a ${membership} of ${userId} in ${roomId}`);
  }
  if (!Array.isArray(event['prev_events']) || !Array.isArray(event['auth_events']) || typeof event['depth'] !== 'number') {
    throw new FederationJoinError(502, 'M_BAD_JSON', `the make_${membership} template lacks prev_events, auth_events or depth`);
  }
  return event;
}

export function asJoinError(error: unknown): Error {
  if (error instanceof FederationJoinError) return error;
  if (error instanceof FederationRequestError) {
    const status = error.status >= 400 && error.status < 500 ? error.status : 502;
    // The room version the server needs, for a client to say so (or to upgrade).
    const roomVersion = error.errcode === 'M_INCOMPATIBLE_ROOM_VERSION' ? error.details?.['room_version'] : undefined;
    return new FederationJoinError(status, error.errcode, error.message, typeof roomVersion === 'string' ? { room_version: roomVersion } : {});
  }
  if (error instanceof RoomError) return error;
  return new FederationJoinError(502, 'M_UNKNOWN', error instanceof Error ? error.message : String(error));
}
