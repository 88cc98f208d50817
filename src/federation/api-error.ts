import { MatrixError } from '../http/matrix-error.ts';
import { toMatrixError } from '../http/to-matrix-error.ts';
import { FederationRequestError } from './client.ts';
import { FederationUnreachable } from './transport.ts';

/**
 * What an API answers when a request it made of another server on its caller's behalf failed:
 * that server's "not found" and "forbidden" are the answer; anything else, and no answer at all,
 * is a bad gateway. Undefined for any other error.
 */
export function remoteFailure(error: unknown): MatrixError | undefined {
  if (error instanceof FederationRequestError) {
    return error.status === 403 || error.status === 404 ? new MatrixError(error.status, error.errcode, error.message) : new MatrixError(502, 'M_UNKNOWN', error.message);
  }
  if (error instanceof FederationUnreachable) return new MatrixError(502, 'M_UNKNOWN', error.message);
  return undefined;
}

/** The Matrix error the client and the federation API answer for what a route threw: `remoteFailure`, else the shared mapper (`src/http`). */
export function apiMatrixError(error: unknown): MatrixError {
  return remoteFailure(error) ?? toMatrixError(error);
}
