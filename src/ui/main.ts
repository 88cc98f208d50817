import { BrowserHost } from '../../worker/page-host.ts';
import { App } from './app.ts';
import './style.css';

// The host (service worker, leader election, core worker) starts first; the
// client then talks to it only through fetch, like any Matrix client would.
const host = new BrowserHost({
  serviceWorkerUrl: '/sw.js',
  // VITE_HEARTH_RATE_LIMITS=off at build time: for the benchmark, which stores 10,000 events through the API.
  coreConfig: import.meta.env.VITE_HEARTH_RATE_LIMITS === 'off' ? { rateLimits: false } : {},
  // The leader tab runs the libp2p node that carries federation (loaded only there).
  // If it cannot start, the homeserver still serves this browser's rooms, offline.
  onLeader: async (core) => {
    document.body.dataset.p2p = 'starting';
    try {
      const { startPageP2P } = await import('../../worker/page-p2p.ts');
      const p2p = await startPageP2P(core);
      host.attachP2P(p2p);
      // Tests read the node from here (its peers, its addresses).
      (globalThis as { hearthP2P?: unknown }).hearthP2P = p2p;
      document.body.dataset.p2p = 'running';
    } catch (error) {
      console.error('hearth: the libp2p node did not start; federation is off in this tab', error);
      document.body.dataset.p2p = 'failed';
    }
  },
});
await host.start();
// Tests and the benchmark read the host's state from here.
(globalThis as { hearthHost?: unknown }).hearthHost = host;
await new App(document.getElementById('app')!, host).run();
