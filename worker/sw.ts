/// <reference lib="webworker" />
/**
 * The service worker: a thin router. It answers same-origin `/_matrix/*` and
 * `/.well-known/matrix/client` by forwarding each request to the homeserver core
 * (a Web Worker owned by the leader tab) over a MessagePort, and leaves every
 * other request to the network, through its page cache (below). It holds nothing that matters: the browser may
 * stop it whenever it idles, and the next fetch starts it with no port, so it
 * asks the window clients for one and queues requests until it arrives.
 *
 * /sync long-polls: Chromium stops a service worker whose event has not settled
 * after 5 minutes, so the core caps long-poll timeouts well below that (see
 * SYNC_TIMEOUT_CAP_MS in homeserver.worker.ts); then every long-poll settles on
 * its own before the browser would cut it off.
 *
 * Offline-first: the page itself (every file of the build, listed into this
 * script at build time by vite.config.ts) is precached at install, so the
 * homeserver opens with no network and no file server. Hashed `assets/*` are
 * served from the cache; everything else (the page, hearth-config.json) goes to
 * the network first and falls back to the last copy, so the page updates as soon
 * as its server answers again.
 *
 * The site may live under any path prefix (`https://example.org/hearth/`): the
 * page's files and its config are named relative to this script, which sits
 * beside index.html, and its scope is that folder. The homeserver's own paths
 * (`/_matrix/*`) stay at the origin's root, as clients expect; a service worker
 * sees every fetch of the pages it controls, whatever its scope.
 */
import { CoreRouter } from './core-router.ts';
import { isHomeserverPath, type PageToServiceWorker, type ServiceWorkerToPage } from './protocol.ts';

declare const self: ServiceWorkerGlobalScope;

/** Replaced after the build with `{ version, files }` (vite.config.ts); left as is in development, where nothing is precached. */
const PRECACHE_MANIFEST: string = '__HEARTH_PRECACHE_MANIFEST__';
const manifest: { version: string; files: string[] } = PRECACHE_MANIFEST.startsWith('{') ? JSON.parse(PRECACHE_MANIFEST) : { version: 'dev', files: [] };
/** The site's folder: where sw.js, index.html, assets/ and hearth-config.json are. */
const SITE = new URL('./', self.location.href).href;
const CONFIG_URL = new URL('hearth-config.json', SITE).href;
const ASSETS = new URL('assets/', SITE).href;
const CACHE_PREFIX = 'hearth-page-';
const CACHE = `${CACHE_PREFIX}${manifest.version}`;

/** Fills this version's cache with the whole build; a file that cannot be fetched fails the install, and the old version stays. */
async function precache(): Promise<void> {
  const cache = await caches.open(CACHE);
  // `reload` skips the HTTP cache: the copy kept must be the one this version was built with.
  await cache.addAll(manifest.files.map((file) => new Request(file, { cache: 'reload' })));
  // The bootstrap list is the origin's, not the build's: keep the last one known, so it works offline after an update.
  const config = (await caches.match(CONFIG_URL)) ?? (await fetch(CONFIG_URL).catch(() => undefined));
  if (config?.ok) await cache.put(CONFIG_URL, config);
}

async function dropOldCaches(): Promise<void> {
  for (const name of await caches.keys()) if (name.startsWith(CACHE_PREFIX) && name !== CACHE) await caches.delete(name);
}

async function putIfOk(request: Request, response: Response): Promise<void> {
  if (!response.ok || response.type !== 'basic') return;
  const cache = await caches.open(CACHE);
  await cache.put(request, response);
}

/** Hashed build output never changes: the cache first, the network only for what it lacks. */
async function cacheFirst(event: FetchEvent): Promise<Response> {
  const cached = await caches.match(event.request, { cacheName: CACHE });
  if (cached) return cached;
  const response = await fetch(event.request);
  event.waitUntil(putIfOk(event.request, response.clone()));
  return response;
}

/** The page and its config: fresh when the server answers, the last copy when it does not. */
async function networkFirst(event: FetchEvent): Promise<Response> {
  try {
    const response = await fetch(event.request);
    event.waitUntil(putIfOk(event.request, response.clone()));
    return response;
  } catch (error) {
    const cached = await caches.match(event.request, { cacheName: CACHE, ignoreSearch: event.request.mode === 'navigate' });
    if (cached) return cached;
    throw error;
  }
}

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
  event.waitUntil(precache().then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil(dropOldCaches().then(() => self.clients.claim()));
});

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (url.origin !== self.location.origin) return;
  if (isHomeserverPath(url.pathname)) return event.respondWith(router.forward(event.request));
  // The page's own files (never the API: that is the core's, and never cached).
  if (event.request.method !== 'GET' || url.pathname === self.location.pathname) return;
  event.respondWith(url.href.startsWith(ASSETS) ? cacheFirst(event) : networkFirst(event));
});

self.addEventListener('message', (event) => {
  const message = event.data as PageToServiceWorker | null | undefined;
  if (message?.type === 'hearth-core-port') {
    // A port replaces the core only when the message is whole: anything else (another page's
    // mistake) is ignored, or a core ID that is no string would retire the core that runs.
    if (typeof message.coreId === 'string' && message.port instanceof MessagePort) router.connect(message.port, message.coreId);
  } else if (message?.type === 'hearth-claim') {
    // A page loaded with a hard reload is not controlled; it asks to be.
    event.waitUntil(self.clients.claim());
  }
});
