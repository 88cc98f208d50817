import { CodedError } from '../util/coded-error.ts';

/**
 * Why a storage operation failed, in terms the API layer can map to a Matrix
 * error: 'quota_exceeded' → M_RESOURCE_LIMIT_EXCEEDED, the rest → M_UNKNOWN (500).
 */
export type StorageErrorCode =
  | 'quota_exceeded' // the browser's quota or the disk is full
  | 'io_error' // the write could not be made durable
  | 'locked' // another tab, worker or process has this database open
  | 'corrupt' // what is stored cannot be read back consistently
  | 'closed'; // the database was closed

export class StorageError extends CodedError {
  override readonly name = 'StorageError';
  constructor(
    readonly code: StorageErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    // Nothing of the request was kept (the write rolled back); 507 says why.
    super(code === 'quota_exceeded' ? 507 : 500, code === 'quota_exceeded' ? 'M_RESOURCE_LIMIT_EXCEEDED' : 'M_UNKNOWN', message);
    if (options && 'cause' in options) this.cause = options.cause;
  }
}

const QUOTA_NAMES = new Set(['QuotaExceededError']);
const QUOTA_CODES = new Set(['ENOSPC', 'EDQUOT']);

/**
 * Classifies an error thrown by a persistence backend (a DOMException from
 * IndexedDB, a Node system error from the file system) without depending on
 * either platform: both are recognised by their `name` or `code` field.
 */
export function toStorageError(error: unknown, doing: string): StorageError {
  if (error instanceof StorageError) return error;
  const { name, code, message } = (error ?? {}) as { name?: unknown; code?: unknown; message?: unknown };
  const detail = typeof message === 'string' && message ? `: ${message}` : '';
  if ((typeof name === 'string' && QUOTA_NAMES.has(name)) || (typeof code === 'string' && QUOTA_CODES.has(code))) {
    return new StorageError('quota_exceeded', `The homeserver's storage is full: nothing of this request was kept. Free some space and try again (storage is full while ${doing}${detail}).`, { cause: error });
  }
  return new StorageError('io_error', `storage failed while ${doing}${detail}`, { cause: error });
}
