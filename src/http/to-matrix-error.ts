import { CodedError } from '../util/coded-error.ts';
import { MatrixError } from './matrix-error.ts';

/**
 * Maps what a request handler threw to the Matrix error it answers: a `MatrixError` as it is, any
 * other `CodedError` (the components' own errors, which know their status and errcode) with its
 * status, errcode and extra fields, and anything else as 500 `M_UNKNOWN`.
 */
export function toMatrixError(error: unknown): MatrixError {
  if (error instanceof MatrixError) return error;
  if (error instanceof CodedError) return new MatrixError(error.status, error.errcode, error.message, error.extra);
  return new MatrixError(500, 'M_UNKNOWN', error instanceof Error ? error.message : String(error));
}
