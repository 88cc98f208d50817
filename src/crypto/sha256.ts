import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';

// Synchronous SHA-256 from @noble/hashes: it runs in every host (page, Worker,
// service worker, Node), whereas crypto.subtle.digest is async and costs ~60 µs a
// call, too slow and too awkward for hashing every event. A host with a native
// synchronous one (Node's node:crypto, ~4× faster on an event) installs it.
let implementation: (data: Uint8Array) => Uint8Array = nobleSha256;

export function sha256(data: Uint8Array): Uint8Array {
  return implementation(data);
}

/** Installs a host's native SHA-256 (it must give the same digests); without one, @noble/hashes. */
export function useSha256(native: (data: Uint8Array) => Uint8Array): void {
  implementation = native;
}
