/** Room for a media body's framing (multipart boundaries, the JSON part, headers) beside its bytes. */
const MEDIA_FRAMING_BYTES = 64 * 1024;

/** The largest request or answer that carries media of up to `maxMediaBytes`. */
export const mediaAnswerBytes = (maxMediaBytes: number) => maxMediaBytes + MEDIA_FRAMING_BYTES;

/** Thrown when a body is over its bound. */
export class BodyTooLargeError extends Error {
  override name = 'BodyTooLargeError';
  constructor(readonly limit: number) {
    super(`body exceeds ${limit} bytes`);
  }
}

/**
 * Reads a body stream whole, giving up as soon as it passes `limit` bytes: first by its
 * declared length when there is one, then as it streams in, so an oversized body is never
 * buffered past the bound. The stream is cancelled without waiting (a peer's stream may
 * never answer a cancel).
 */
export async function readBounded(body: ReadableStream<Uint8Array> | null, limit: number, declaredLength?: string | null): Promise<Uint8Array<ArrayBuffer> | null> {
  if (body === null) return null;
  if (declaredLength != null && Number(declaredLength) > limit) {
    void body.cancel().catch(() => {});
    throw new BodyTooLargeError(limit);
  }
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      void reader.cancel().catch(() => {});
      throw new BodyTooLargeError(limit);
    }
    chunks.push(value);
  }
  const joined = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    joined.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return joined;
}
