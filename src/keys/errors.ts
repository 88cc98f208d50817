import { CodedError } from '../util/coded-error.ts';

/** A request the keys component refuses, with the Matrix error code and HTTP status it maps to. */
export class KeysError extends CodedError {
  override name = 'KeysError';
}

export const keysBadJson = (message: string) => new KeysError(400, 'M_BAD_JSON', message);
export const keysInvalidParam = (message: string) => new KeysError(400, 'M_INVALID_PARAM', message);
export const keysInvalidSignature = (message: string) => new KeysError(400, 'M_INVALID_SIGNATURE', message);
export const keysNotFound = (message: string) => new KeysError(404, 'M_NOT_FOUND', message);
