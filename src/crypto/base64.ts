// Unpadded base64 (Matrix appendices §Unpadded Base64), standard and URL-safe, by multiformats'
// RFC 4648 codecs (a dependency already, for libp2p). What is ours is the leniency the spec asks of a
// decoder, which multiformats does not give: padding is accepted (but at most two `=`, and only to
// a multiple of four), and the unused bits of the last character need not be zero, as Synapse's
// decoder (Python's base64) takes them.
import { base64, base64url } from 'multiformats/bases/base64';

const STANDARD = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const URL_SAFE = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

export class Base64Error extends Error {
  override name = 'Base64Error';
}

function decode(text: string, codec: { baseDecode(text: string): Uint8Array }, alphabet: string): Uint8Array {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 61 /* = */ && text.length - end < 2) end--;
  if (end % 4 === 1) throw new Base64Error('invalid base64 length');
  if (end !== text.length && text.length % 4 !== 0) throw new Base64Error('invalid base64 padding');
  let unpadded = text.slice(0, end);
  // The last character's unused bits (4 after two characters of a group, 2 after three) cleared.
  const unused = end % 4 === 2 ? 4 : end % 4 === 3 ? 2 : 0;
  const last = unused ? alphabet.indexOf(unpadded[end - 1]!) : -1;
  if (last >= 0) unpadded = unpadded.slice(0, -1) + alphabet[last & ~((1 << unused) - 1)]!;
  try {
    return codec.baseDecode(unpadded);
  } catch (error) {
    throw new Base64Error(`invalid base64: ${error instanceof Error ? error.message : String(error)}`);
  }
}

export const encodeBase64 = (bytes: Uint8Array): string => base64.baseEncode(bytes);
export const encodeBase64Url = (bytes: Uint8Array): string => base64url.baseEncode(bytes);
export const decodeBase64 = (text: string): Uint8Array => decode(text, base64, STANDARD);
export const decodeBase64Url = (text: string): Uint8Array => decode(text, base64url, URL_SAFE);
