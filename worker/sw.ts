/// <reference lib="webworker" />
/**
 * The service worker: a thin router. It answers same-origin `/_matrix/*` and
 * `/.well-known/matrix/client` by forwarding each request to the homeserver core
 * (a Web Worker owned by the leader tab) over a MessagePort, and leaves every
 * other request to the network. It holds nothing that matters: the browser may
 * stop it whenever it idles, and the next fetch starts it with no port, so it
 * asks the window clients for one and queues requests until it arrives.
 *
 * /sync long-polls: Chromium stops a service worker whose event has not settled
 * after 5 minutes, so the core caps long-poll timeouts well below that (see
 * SYNC_TIMEOUT_CAP_MS in homeserver.worker.ts); then every long-poll settles on
 * its own before the browser would cut it off.
 */
import { CoreRouter } from './core-router.ts';
import { isHomeserverPath, type PageToServiceWorker, type ServiceWorkerToPage } from './protocol.ts';

declare const self: ServiceWorkerGlobalScope;

const router = new CoreRouter({
  requestPort: () => {
    void self.clients.matchAll({ type: 'window', includeUncontrolled: true }).then((windows) => {
      const ask: ServiceWorkerToPage = { type: 'hearth-need-port' };
      // Only the leader tab answers; the others ignore it.
      for (const client of windows) client.postMessage(ask);
    });
  },
});

self.addEventListener('install', (event) => {
  // A new version takes over at once: the router is stateless, and an old one
  // would keep its port to a core that the new pages cannot reach.
  event.waitUntil(self.skipWaiting());
});

self.addEventListener('activate', (event) => {
  event.waitUntil(self.clients.claim());
});

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (url.origin !== self.location.origin || !isHomeserverPath(url.pathname)) return;
  event.respondWith(router.forward(event.request));
});

self.addEventListener('message', (event) => {
  const message = event.data as PageToServiceWorker;
  if (message?.type === 'hearth-core-port') {
    router.connect(message.port, message.coreId);
  } else if (message?.type === 'hearth-claim') {
    // A page loaded with a hard reload is not controlled; it asks to be.
    event.waitUntil(self.clients.claim());
  }
});
