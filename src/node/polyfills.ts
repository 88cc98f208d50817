import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
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

// Node 20 has no global WebSocket (Node 22 has), and @libp2p/websockets dials with it. ws is loaded
// when the global is first read (a libp2p WebSockets dial), not at start: a host that never dials one
// does not pay for it (~1 MiB of heap and the code it pulls in).
if (typeof globalThis.WebSocket === 'undefined') {
  const require = createRequire(import.meta.url);
  Object.defineProperty(globalThis, 'WebSocket', {
    configurable: true,
    get: () => {
      const { WebSocket } = require('ws') as typeof import('ws');
      Object.defineProperty(globalThis, 'WebSocket', { configurable: true, writable: true, value: WebSocket });
      return WebSocket;
    },
    set: (value: unknown) => Object.defineProperty(globalThis, 'WebSocket', { configurable: true, writable: true, value }),
  });
}

// Every event received is hashed twice (its content hash and its reference hash, the event ID):
// node:crypto's SHA-256 is ~4× faster than @noble/hashes' on an event; the platform-free core takes it here.
useSha256((data) => new Uint8Array(createHash('sha256').update(data).digest()));
export {};
