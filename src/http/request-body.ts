import { BodyTooLargeError, readRequestBounded } from './bounded-body.ts';
import { tooLarge } from './matrix-error.ts';

/** Reads a request's body whole within `limit` bytes (none is empty): 413 `M_TOO_LARGE` beyond it, by its declared length or as it streams in. */
export async function readRequestBody(request: Request, limit: number): Promise<Uint8Array<ArrayBuffer>> {
  try {
    return (await readRequestBounded(request, limit)) ?? new Uint8Array(0);
  } catch (error) {
    if (error instanceof BodyTooLargeError) throw tooLarge(`request body exceeds ${limit} bytes`);
    throw error;
  }
}
