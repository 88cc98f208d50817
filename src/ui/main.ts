import { startBrowserHost } from '../../worker/page-host.ts';
import { App } from './app.ts';
import './style.css';

// The host (service worker, leader election, core worker) starts first; the
// client then talks to it only through fetch, like any Matrix client would.
const host = await startBrowserHost({
  serviceWorkerUrl: '/sw.js',
  // VITE_HEARTH_RATE_LIMITS=off at build time: for the benchmark, which stores 10,000 events through the API.
  coreConfig: import.meta.env.VITE_HEARTH_RATE_LIMITS === 'off' ? { rateLimits: false } : {},
});
// Tests and the benchmark read the host's state from here.
(globalThis as { hearthHost?: unknown }).hearthHost = host;
await new App(document.getElementById('app')!, host).run();
