/** The room engine's own errors; the client API maps them to Matrix error codes. */
export class RoomError extends Error {
  override name = 'RoomError';
  constructor(
    readonly code: 'not_found' | 'forbidden' | 'too_large' | 'bad_event' | 'unsupported_version' | 'missing_events' | 'duplicate_annotation',
    message: string,
  ) {
    super(message);
  }
}

export const roomNotFound = (roomId: string) => new RoomError('not_found', `unknown room ${roomId}`);
