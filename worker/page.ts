/**
 * The page's entry point (index.html loads it): starts the browser host (service worker,
 * leader election, core worker) and, in the leader tab, the libp2p node; then hands the
 * built-in client its host interface (`PageHost`, src/ui/host.ts). The client talks to the
 * homeserver only through fetch, like any Matrix client would.
 */
import { startPage } from '../src/ui/main.ts';
import { BrowserHost } from './page-host.ts';
import { BrowserPageHost } from './page-ui-host.ts';

const host = new BrowserHost({
  // Beside this page, wherever the site is served from (any path prefix): its scope is the page's folder.
  serviceWorkerUrl: new URL('sw.js', document.baseURI).href,
  // VITE_HEARTH_RATE_LIMITS=off at build time: for the benchmark, which stores 10,000 events through the API.
  coreConfig: import.meta.env.VITE_HEARTH_RATE_LIMITS === 'off' ? { rateLimits: false } : {},
  // The leader tab runs the libp2p node that carries federation (loaded only there).
  // If it cannot start, the homeserver still serves this browser's rooms, offline.
  onLeader: async (core) => {
    pageHost.setNodeState('starting');
    try {
      const { startPageP2P } = await import('./page-p2p.ts');
      const p2p = await startPageP2P(core);
      host.attachP2P(p2p);
      // Tests read the node from here (its peers, its addresses).
      (globalThis as { hearthP2P?: unknown }).hearthP2P = p2p;
      pageHost.setNodeState('running');
    } catch (error) {
      console.error('hearth: the libp2p node did not start; federation is off in this tab', error);
      pageHost.setNodeState('failed');
    }
  },
});
const pageHost = new BrowserPageHost(host);
await host.start();
// Tests and the benchmark read the host's state from here (and tests call the page's host interface).
(globalThis as { hearthHost?: unknown }).hearthHost = host;
(globalThis as { hearthPageHost?: unknown }).hearthPageHost = pageHost;
await startPage(document.getElementById('app')!, pageHost);
