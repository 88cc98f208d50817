import { startBrowserHost } from '../../worker/page-host.ts';
import { App } from './app.ts';
import './style.css';

// The host (service worker, leader election, core worker) starts first; the
// client then talks to it only through fetch, like any Matrix client would.
const host = await startBrowserHost({ serviceWorkerUrl: '/sw.js' });
// Tests and the benchmark read the host's state from here.
(globalThis as { hearthHost?: unknown }).hearthHost = host;
await new App(document.getElementById('app')!, host).run();
