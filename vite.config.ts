import { defineConfig, type Plugin } from 'vite';

/**
 * The service worker must sit at the site root (/sw.js) to control `/`, and
 * keep a fixed name so the browser finds updates. In development the same URL
 * serves the TypeScript source, which Vite transforms on the fly.
 */
function serviceWorkerAtRoot(): Plugin {
  return {
    name: 'hearth-service-worker-at-root',
    configureServer(server) {
      server.middlewares.use((request, _response, next) => {
        if (request.url === '/sw.js') request.url = '/worker/sw.ts';
        next();
      });
    },
  };
}

// The browser host (worker/, src/ui) is built from here; see ARCHITECTURE.md.
export default defineConfig({
  // No fallback to index.html: a /_matrix/* request that reaches the web server
  // (rather than the service worker) must get a 404, never the page.
  appType: 'mpa',
  server: { host: '127.0.0.1' },
  preview: { host: '127.0.0.1' },
  plugins: [serviceWorkerAtRoot()],
  worker: { format: 'es' },
  build: {
    target: 'es2022',
    // The libp2p node (worker/page-p2p.ts, ~600 kB) is its own chunk, loaded only by the leader tab once its core is up.
    chunkSizeWarningLimit: 700,
    rolldownOptions: {
      input: { index: 'index.html', sw: 'worker/sw.ts' },
      output: {
        entryFileNames: (chunk) => (chunk.name === 'sw' ? 'sw.js' : 'assets/[name]-[hash].js'),
      },
    },
  },
});
