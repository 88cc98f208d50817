import { defineConfig } from 'vite';

// The browser host (worker/, src/ui) is built from here; see ARCHITECTURE.md.
export default defineConfig({
  server: { host: '127.0.0.1' },
  preview: { host: '127.0.0.1' },
  worker: { format: 'es' },
});
