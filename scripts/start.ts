// `npm start [-- --port P]`: builds the page, then serves it on 127.0.0.1 with a
// static server. The homeserver itself runs in the browser that opens it.
import { parseArgs } from 'node:util';
import { join } from 'node:path';
import { buildPage, PROJECT_ROOT } from './build.ts';
import { serveStatic } from './static-server.ts';

const { values } = parseArgs({ options: { port: { type: 'string', default: '5173' }, 'no-build': { type: 'boolean', default: false } } });
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`--port must be a port number, not ${values.port}`);
  process.exit(2);
}
const outDir = join(PROJECT_ROOT, 'dist');
if (!values['no-build']) await buildPage(outDir);
const server = await serveStatic(outDir, port);
console.log(`\nHearth is served at ${server.url}/ — open it in a browser: the homeserver runs in the page.`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => void server.close().then(() => process.exit(0)));
}
