import { CodedError } from '../util/coded-error.ts';

/** A Matrix API error: `{"errcode":"M_…","error":"…"}` with its HTTP status (client-server §API standards). */
export class MatrixError extends CodedError {
  override name = 'MatrixError';

  toJSON(): Record<string, unknown> {
    return { errcode: this.errcode, error: this.message, ...this.extra };
  }
}

export const badJson = (message: string) => new MatrixError(400, 'M_BAD_JSON', message);
export const notJson = (message = 'Request body is not valid JSON') => new MatrixError(400, 'M_NOT_JSON', message);
export const missingParam = (message: string) => new MatrixError(400, 'M_MISSING_PARAM', message);
export const invalidParam = (message: string) => new MatrixError(400, 'M_INVALID_PARAM', message);
export const forbidden = (message: string) => new MatrixError(403, 'M_FORBIDDEN', message);
export const notFound = (message: string) => new MatrixError(404, 'M_NOT_FOUND', message);
export const unrecognized = (message = 'Unrecognized request') => new MatrixError(404, 'M_UNRECOGNIZED', message);
export const missingToken = () => new MatrixError(401, 'M_MISSING_TOKEN', 'Missing access token');
export const unknownToken = (softLogout = false) =>
  new MatrixError(401, 'M_UNKNOWN_TOKEN', 'Unknown or expired access token', { soft_logout: softLogout });
export const tooLarge = (message: string) => new MatrixError(413, 'M_TOO_LARGE', message);
export const limitExceeded = (retryAfterMs: number) =>
  new MatrixError(429, 'M_LIMIT_EXCEEDED', 'Too many requests', { retry_after_ms: retryAfterMs });
export const unknown = (message: string) => new MatrixError(500, 'M_UNKNOWN', message);

/** A Matrix error as a JSON response. */
export function matrixErrorResponse(error: MatrixError): Response {
  return new Response(JSON.stringify(error.toJSON()), { status: error.status, headers: { 'content-type': 'application/json' } });
}
