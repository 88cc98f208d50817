import { createHash } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join, relative, sep } from 'node:path';
import { defineConfig, type Plugin } from 'vite';

/**
 * The service worker must sit beside index.html (sw.js in the build's root) to
 * control the page, and keep a fixed name so the browser finds updates. In development the same URL
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

/**
 * index.html's Content-Security-Policy allows no inline style; the dev server (`npm run dev`) injects each CSS
 * module as a <style> element, so there, and only there, inline style is allowed. The build links its CSS.
 */
function devServerInlineStyle(): Plugin {
  return {
    name: 'hearth-dev-server-inline-style',
    apply: 'serve',
    transformIndexHtml: (html) => html.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'"),
  };
}

/**
 * Offline-first (issue 13): after the build is written, lists every file in it
 * (the page, its chunks, the core's worker, sql.js's wasm) and writes that list,
 * with a hash of their contents, into sw.js in place of its placeholder. The
 * service worker precaches the list at install; any change to the build changes
 * sw.js, so the browser installs the new version and drops the old cache.
 */
function precacheManifest(): Plugin {
  const PLACEHOLDER = /(["'`])__HEARTH_PRECACHE_MANIFEST__\1/;
  return {
    name: 'hearth-precache-manifest',
    apply: 'build',
    writeBundle: {
      order: 'post',
      async handler(options) {
        const outDir = options.dir;
        if (!outDir) return;
        const files = (await readdir(outDir, { recursive: true, withFileTypes: true }))
          .filter((entry) => entry.isFile())
          .map((entry) => relative(outDir, join(entry.parentPath, entry.name)).split(sep).join('/'))
          .filter((file) => file !== 'sw.js' && !file.endsWith('.map') && !file.split('/').some((part) => part.startsWith('.')))
          .sort();
        const hash = createHash('sha256');
        for (const file of files) hash.update(file).update(await readFile(join(outDir, file)));
        // Relative to sw.js, which sits beside index.html: the site works under any path prefix.
        const manifest = { version: hash.digest('hex').slice(0, 16), files: files.map((file) => (file === 'index.html' ? './' : file)) };
        const swPath = join(outDir, 'sw.js');
        const sw = await readFile(swPath, 'utf8');
        if (!PLACEHOLDER.test(sw)) throw new Error('hearth: sw.js has no precache placeholder');
        await writeFile(swPath, sw.replace(PLACEHOLDER, JSON.stringify(JSON.stringify(manifest))));
      },
    },
  };
}

/**
 * The installable app's PNG icons (manifest.webmanifest names them; browsers want 192 and 512 px),
 * drawn from public/icon.svg with sharp at build time, so only the SVG is kept in the repository.
 */
function appIcons(): Plugin {
  return {
    name: 'hearth-app-icons',
    apply: 'build',
    async generateBundle() {
      const { default: sharp } = await import('sharp');
      const svg = await readFile(new URL('./public/icon.svg', import.meta.url));
      for (const size of [192, 512]) {
        this.emitFile({ type: 'asset', fileName: `icon-${size}.png`, source: await sharp(svg, { density: 72 * (size / 512) * 4 }).resize(size, size).png().toBuffer() });
      }
    },
  };
}

/**
 * The emoji font's licences go with the font, as both ask of whoever redistributes it: twemoji-colr-font's LICENSE
 * holds the SIL OFL 1.1 (the font) and the CC BY 4.0 notice (Twitter's Twemoji art). The sidebar's credit links to it.
 */
function fontLicence(): Plugin {
  return {
    name: 'hearth-font-licence',
    apply: 'build',
    async generateBundle() {
      const licence = createRequire(import.meta.url).resolve('twemoji-colr-font/LICENSE');
      this.emitFile({ type: 'asset', fileName: 'licenses/twemoji-colr-font.txt', source: await readFile(licence) });
    },
  };
}

// The browser host (worker/, src/ui) is built from here; see ARCHITECTURE.md.
export default defineConfig({
  // Every URL the page builds is relative to the page: the built site can be copied to any HTTPS static
  // host under any path prefix (README, "Host it"). The service worker's scope is then the folder it sits in.
  base: './',
  // No fallback to index.html: a /_matrix/* request that reaches the web server
  // (rather than the service worker) must get a 404, never the page.
  appType: 'mpa',
  server: { host: '127.0.0.1' },
  preview: { host: '127.0.0.1' },
  plugins: [serviceWorkerAtRoot(), devServerInlineStyle(), appIcons(), fontLicence(), precacheManifest()],
  worker: { format: 'es' },
  build: {
    target: 'es2022',
    // The libp2p node (worker/page-p2p.ts, ~660 kB) is its own chunk, loaded only by the leader tab once its core is up;
    // matrix-js-sdk's Rust crypto glue (~870 kB, and its 5.4 MB wasm) is another, loaded when the chat client starts.
    chunkSizeWarningLimit: 900,
    rolldownOptions: {
      input: { index: 'index.html', sw: 'worker/sw.ts' },
      output: {
        entryFileNames: (chunk) => (chunk.name === 'sw' ? 'sw.js' : 'assets/[name]-[hash].js'),
      },
    },
  },
});
