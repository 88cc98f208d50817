import { createHash } from 'node:crypto';
import { WebSocket } from 'ws';
import { useSha256 } from '../crypto/sha256.ts';

// Node 20 lacks Promise.withResolvers (added in Node 22), which libp2p 3 calls.
// Without it a dial fails with a misleading ECONNRESET. Every Node entry point
// and the test setup import this module first.
if (typeof (Promise as { withResolvers?: unknown }).withResolvers !== 'function') {
  Object.defineProperty(Promise, 'withResolvers', {
    configurable: true,
    writable: true,
    value: function withResolvers<T>() {
      let resolve!: (value: T | PromiseLike<T>) => void;
      let reject!: (reason?: unknown) => void;
      const promise = new Promise<T>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      return { promise, resolve, reject };
    },
  });
}

// Node 20 has no global WebSocket (Node 22 has), and @libp2p/websockets dials with it.
if (typeof globalThis.WebSocket === 'undefined') {
  Object.defineProperty(globalThis, 'WebSocket', { configurable: true, writable: true, value: WebSocket });
}

// Every event received is hashed twice (its content hash and its reference hash, the event ID):
// node:crypto's SHA-256 is ~4× faster than @noble/hashes' on an event; the platform-free core takes it here.
useSha256((data) => new Uint8Array(createHash('sha256').update(data).digest()));
export {};
