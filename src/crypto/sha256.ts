import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';

// Synchronous SHA-256 from @noble/hashes: it runs in every host (page, Worker,
// service worker, Node), whereas crypto.subtle.digest is async and costs ~60 µs a
// call, too slow and too awkward for hashing every event.
export function sha256(data: Uint8Array): Uint8Array {
  return nobleSha256(data);
}
