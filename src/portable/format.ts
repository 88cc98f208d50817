/**
 * The Hearth archive: one file holding a whole homeserver (ARCHITECTURE.md; README "Keep, move and
 * reset your homeserver"). Platform-free: WebCrypto only (globalThis.crypto.subtle, in browsers,
 * workers and Node 20).
 *
 * Layout:
 *   MAGIC (8 bytes) · header length (u32 BE) · header (JSON, plaintext) · frames…
 *   frame = ciphertext length (u32 BE) · AES-256-GCM ciphertext (16-byte tag at its end)
 *
 * The header says the format version and how the key was made (PBKDF2-SHA256, salt, iterations)
 * so that a newer format is refused before any passphrase is asked, and an old file stays readable
 * when the defaults change. Frame i is encrypted with IV = noncePrefix (8 bytes) · i (u32 BE), and
 * its additional data is MAGIC · header · i · final flag: a frame moved, dropped, or taken from
 * another file fails its check, an altered header fails every frame, and a file cut after any
 * frame but the last lacks its final frame. Frames hold chunkBytes of plaintext each (the last
 * fewer), so neither side needs the whole file in memory.
 *
 * The plaintext is a sequence of records, each `JSON length (u32 BE) · JSON · size bytes`:
 * first the manifest (kind 'manifest', its JSON as the bytes), then one record per entry the
 * manifest lists, in its order, then { kind: 'end' } with no bytes.
 */
import { CodedError } from '../util/coded-error.ts';

export const MAGIC = new TextEncoder().encode('HEARTH\x00A');
export const FORMAT_VERSION = 1;
/** OWASP's 2023 figure for PBKDF2-HMAC-SHA256. */
export const DEFAULT_ITERATIONS = 600_000;
/** A header asking for more than this is refused rather than left to spin for minutes. */
export const MAX_ITERATIONS = 10_000_000;
export const DEFAULT_CHUNK_BYTES = 1024 * 1024;
export const MAX_CHUNK_BYTES = 16 * 1024 * 1024;
export const TAG_BYTES = 16;
/** A record's JSON is small (a kind, a name, a size); the manifest is a record's bytes, not its JSON. */
export const MAX_RECORD_JSON = 64 * 1024;
export const MAX_MANIFEST_BYTES = 64 * 1024 * 1024;

export interface ArchiveHeader {
  format: number;
  kdf: { name: 'PBKDF2'; hash: 'SHA-256'; iterations: number; salt: string };
  cipher: { name: 'AES-GCM'; noncePrefix: string };
  chunkBytes: number;
}

/** What an archive holds: the homeserver's parts, each its own entry. */
export type EntryKind =
  /** The 32-byte ed25519 seed: the server's name, signing key and libp2p peer ID. */
  | 'identity'
  /** The SQLite image, consistent at one stream position (accounts, rooms, keys, the mailbox's tables). */
  | 'database'
  /** One media file's bytes; name = its key in the media store. */
  | 'media'
  /** One record of the libp2p peer store; name = its datastore key. */
  | 'peer'
  /** A host file that is part of the homeserver (a DNS-named Node host's signing-keys.json). */
  | 'file';

export interface ArchiveEntry {
  kind: EntryKind;
  name: string;
  size: number;
}

export interface ArchiveManifest {
  format: number;
  serverName: string;
  /** Milliseconds since the epoch. */
  createdAt: number;
  /** 'node' or 'browser': where it came from. */
  createdBy: string;
  entries: ArchiveEntry[];
  /** Sum of the entries' sizes. */
  totalBytes: number;
}

export type ArchiveErrorCode =
  | 'not_an_archive'
  | 'newer_format'
  | 'wrong_passphrase'
  | 'damaged'
  | 'truncated'
  | 'not_empty'
  | 'bad_entry';

/** A refusal of an archive, said in words a person can act on; nothing has been written when it is thrown by a check. */
export class ArchiveError extends CodedError {
  override name = 'ArchiveError';
  constructor(
    readonly code: ArchiveErrorCode,
    message: string,
  ) {
    super(400, 'M_INVALID_PARAM', message);
  }
}

/**
 * Refuses an archive whose identity seed is not the server its manifest names (a Hearth name is the
 * seed's public key in hex; a DNS-named host's seed is not checked here). The host derives the name:
 * this layer holds no crypto.
 */
export function checkArchiveIdentity(manifest: ArchiveManifest, seedServerName: string): void {
  if (/^[0-9a-f]{64}$/.test(manifest.serverName) && seedServerName !== manifest.serverName) {
    throw new ArchiveError('bad_entry', 'The archive\u2019s identity is not the server its manifest names. Nothing was imported.');
  }
}

export function u32(value: number): Uint8Array {
  const bytes = new Uint8Array(4);
  new DataView(bytes.buffer).setUint32(0, value);
  return bytes;
}

export function readU32(bytes: Uint8Array, offset = 0): number {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(offset);
}

export function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const part of parts) out.set(part, (at += part.byteLength) - part.byteLength);
  return out;
}

export function toBase64(bytes: Uint8Array): string {
  let text = '';
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text);
}

export function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/** The AES-GCM key from a passphrase, as the header says. */
export async function deriveKey(passphrase: string, header: ArchiveHeader): Promise<CryptoKey> {
  const material = await crypto.subtle.importKey('raw', new TextEncoder().encode(passphrase.normalize('NFC')), 'PBKDF2', false, ['deriveKey']);
  return crypto.subtle.deriveKey(
    { name: 'PBKDF2', hash: 'SHA-256', salt: fromBase64(header.kdf.salt) as Uint8Array<ArrayBuffer>, iterations: header.kdf.iterations },
    material,
    { name: 'AES-GCM', length: 256 },
    false,
    ['encrypt', 'decrypt'],
  );
}

export function frameIv(noncePrefix: Uint8Array, index: number): Uint8Array<ArrayBuffer> {
  return concat([noncePrefix, u32(index)]) as Uint8Array<ArrayBuffer>;
}

export function frameAad(headerBytes: Uint8Array, index: number, final: boolean): Uint8Array<ArrayBuffer> {
  return concat([headerBytes, u32(index), new Uint8Array([final ? 1 : 0])]) as Uint8Array<ArrayBuffer>;
}

/** How far an export or import has got, for a progress bar or a terminal line. */
export interface ArchiveProgress {
  phase: 'writing' | 'checking' | 'restoring';
  doneBytes: number;
  totalBytes: number;
}
