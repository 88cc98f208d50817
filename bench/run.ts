// `npm run bench [name…]`: runs every bench/*.bench.ts (or the named ones) and prints figures.
import '../src/node/polyfills.ts';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dir = fileURLToPath(new URL('.', import.meta.url));
const wanted = process.argv.slice(2);
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.bench.ts'))
  .filter((f) => wanted.length === 0 || wanted.some((w) => f.startsWith(w)))
  .sort();

console.log(`# Hearth benchmarks — node ${process.version}, ${new Date().toISOString()}`);
for (const file of files) {
  const mod = (await import(new URL(file, import.meta.url).href)) as { run: () => Promise<void> };
  await mod.run();
}
