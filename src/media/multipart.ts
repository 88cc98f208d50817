import { getMultipartBoundary, parseMultipart } from '@remix-run/multipart-parser';
import { mediaAnswerBytes } from '../http/bounded-body.ts';

/**
 * The multipart/mixed body of server-server media downloads (server-server §Content
 * repository, spec v1.11): exactly two parts, JSON metadata (`{}` today) and then the
 * bytes with their own Content-Type and Content-Disposition (or a Location redirect,
 * which a peer with no open web cannot follow).
 */
export interface MediaPart {
  metadata: Record<string, unknown>;
  bytes: Uint8Array;
  contentType: string;
  contentDisposition?: string;
  /** Set when the origin redirected instead of sending the bytes. */
  location?: string;
}

const encoder = new TextEncoder();

/** Builds the multipart/mixed answer: its body and Content-Type (with a boundary that cannot occur in the bytes). */
export function encodeMediaMultipart(part: { bytes: Uint8Array; contentType: string; contentDisposition: string }, boundary: string): { body: Uint8Array<ArrayBuffer>; contentType: string } {
  const head = encoder.encode(
    `--${boundary}\r\ncontent-type: application/json\r\n\r\n{}\r\n--${boundary}\r\ncontent-type: ${part.contentType}\r\ncontent-disposition: ${part.contentDisposition}\r\n\r\n`,
  );
  const tail = encoder.encode(`\r\n--${boundary}--\r\n`);
  const body = new Uint8Array(head.byteLength + part.bytes.byteLength + tail.byteLength);
  body.set(head, 0);
  body.set(part.bytes, head.byteLength);
  body.set(tail, head.byteLength + part.bytes.byteLength);
  return { body, contentType: `multipart/mixed; boundary=${boundary}` };
}

/**
 * The body from its first boundary on. RFC 2046 lets a preamble ending in CRLF come before it
 * (Synapse sends a bare CRLF there), and the parser we use wants the boundary first.
 */
function withoutPreamble(body: Uint8Array, boundary: string): Uint8Array {
  const opening = encoder.encode(`--${boundary}`);
  if (startsWith(body, opening, 0)) return body;
  const delimiter = encoder.encode(`\r\n--${boundary}`);
  for (let i = 0; i + delimiter.length <= body.length; i++) {
    if (startsWith(body, delimiter, i)) return body.subarray(i + 2);
  }
  return body; // no boundary at all: the parser says so
}

function startsWith(bytes: Uint8Array, prefix: Uint8Array, at: number): boolean {
  if (at + prefix.length > bytes.length) return false;
  for (let j = 0; j < prefix.length; j++) if (bytes[at + j] !== prefix[j]) return false;
  return true;
}

/** Reads a multipart/mixed media answer; throws when it is not one. */
export function decodeMediaMultipart(contentType: string | null, body: Uint8Array, maxBytes: number): MediaPart {
  const boundary = contentType && /^multipart\/mixed\b/i.test(contentType) ? getMultipartBoundary(contentType) : null;
  if (!boundary) throw new Error(`expected multipart/mixed with a boundary, got ${contentType ?? 'no Content-Type'}`);
  const parts = [...parseMultipart(withoutPreamble(body, boundary), { boundary, maxParts: 2, maxFileSize: maxBytes, maxTotalSize: mediaAnswerBytes(maxBytes) })];
  if (parts.length !== 2) throw new Error(`expected two parts, got ${parts.length}`);
  const [meta, media] = parts as [(typeof parts)[0], (typeof parts)[0]];
  let metadata: unknown;
  try {
    metadata = JSON.parse(new TextDecoder().decode(meta.bytes));
  } catch {
    throw new Error('the first part is not JSON');
  }
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) throw new Error('the first part is not a JSON object');
  return {
    metadata: metadata as Record<string, unknown>,
    bytes: media.bytes,
    contentType: media.headers['content-type'] ?? 'application/octet-stream',
    ...(media.headers['content-disposition'] ? { contentDisposition: media.headers['content-disposition'] } : {}),
    ...(media.headers['location'] ? { location: media.headers['location'] } : {}),
  };
}
