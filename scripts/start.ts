// `npm start [-- --port P]`: builds the page, serves it on 127.0.0.1 with a static
// server, and runs a Node peer beside it (the homeserver itself runs in the browser
// that opens the page). The page learns the peer's WebSocket address from
// /hearth-config.json and dials it: that is its bootstrap peer, and its relay (pages take
// reservations on it and signal WebRTC through it, then talk browser to browser directly).
// The peer is a mailbox too: mail for a page that is closed waits there until the page collects it.
//   --no-peer          serve the files only (the page then has no bootstrap peer)
//   --peer-data DIR    the peer's data folder (default ./hearth-data/peer)
//   --peer-listen MA   where the peer listens (default /ip4/127.0.0.1/tcp/0/ws, repeatable)
//   --bootstrap MA     more bootstrap peers for the page and the peer (repeatable)
//   --no-build         serve the last build in dist/ (or in --dist DIR)
// On a public host (README, "Host it"): the page must come over HTTPS and the peer over secure WebSockets:
//   --host ADDR        where the page is served (default 127.0.0.1)
//   --tls-cert FILE --tls-key FILE   the certificate (PEM chain, key) for both: the page over HTTPS, and a /wss --peer-listen address
//   --announce MA      the peer's address as pages should dial it (repeatable), e.g. /dns4/example.org/tcp/4443/wss
//   --config FILE      a hearth-config.json to serve (its iceServers, more bootstrap peers); the peer's addresses go first
import '../src/node/polyfills.ts';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { PROJECT_ROOT } from './build.ts';
import { serveStatic } from './static-server.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '5173' },
    host: { type: 'string', default: '127.0.0.1' },
    'tls-cert': { type: 'string' },
    'tls-key': { type: 'string' },
    announce: { type: 'string', multiple: true, default: [] },
    config: { type: 'string' },
    'no-build': { type: 'boolean', default: false },
    dist: { type: 'string' },
    'no-peer': { type: 'boolean', default: false },
    'peer-data': { type: 'string', default: './hearth-data/peer' },
    'peer-listen': { type: 'string', multiple: true, default: ['/ip4/127.0.0.1/tcp/0/ws'] },
    bootstrap: { type: 'string', multiple: true, default: [] },
  },
});
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`--port must be a port number, not ${values.port}`);
  process.exit(2);
}
if (Boolean(values['tls-cert']) !== Boolean(values['tls-key'])) {
  console.error('--tls-cert and --tls-key go together');
  process.exit(2);
}
const tls = values['tls-cert'] && values['tls-key'] ? { cert: readFileSync(values['tls-cert'], 'utf8'), key: readFileSync(values['tls-key'], 'utf8') } : undefined;
if (values['peer-listen'].some((address) => /\/wss(\/|$)/.test(address)) && !tls) {
  console.error('a /wss --peer-listen address needs --tls-cert FILE and --tls-key FILE');
  process.exit(2);
}
// Browsers give service workers (and so the homeserver) only to secure origins: HTTPS, or loopback.
const loopback = /^(127\.|::1$|localhost$)/.test(values.host);
if (!loopback && !tls) console.error(`warning: the page is served over plain HTTP on ${values.host}: browsers elsewhere will not run it (give --tls-cert and --tls-key)`);
const extraConfig = values.config ? (JSON.parse(readFileSync(values.config, 'utf8')) as { bootstrap?: string[] } & Record<string, unknown>) : undefined;
const outDir = values.dist ?? join(PROJECT_ROOT, 'dist');
// Built by vite in a process of its own (as buildPage would in this one), so the Node peer that
// stays running does not keep what the build used: 680 vs 140 MiB resident once up.
if (!values['no-build']) execFileSync(process.execPath, [join(PROJECT_ROOT, 'node_modules/vite/bin/vite.js'), 'build', '--outDir', outDir, '--emptyOutDir'], { cwd: PROJECT_ROOT, stdio: 'inherit' });

const closers: (() => Promise<void>)[] = [];
const bootstrap = [...values.bootstrap];
if (!values['no-peer']) {
  // Loaded only here: libp2p and sql.js are not needed to serve files.
  const { startNodeHost } = await import('../src/node/node-host.ts');
  const peer = await startNodeHost({
    dataDir: values['peer-data'],
    port: 0,
    listen: values['peer-listen'],
    announce: values.announce,
    tls,
    bootstrap: values.bootstrap,
    relay: true,
    mailbox: true,
    // The pages' witness: two browsers running copies of one homeserver both hear of it (src/p2p/twin.ts).
    detectTwins: true,
    log: (message, error) => console.error(`peer: ${message}`, error ?? ''),
  });
  closers.push(() => peer.close());
  // "peer joined: 6f1c2a9b…e01d via direct", "peer left: …": once per peer, not per connection.
  const { printPeerEvents } = await import('../src/node/peer-events.ts');
  printPeerEvents(peer.p2p, (line) => console.log(line));
  // The page dials WebSocket and WebRTC-Direct addresses (not plain TCP).
  const wsAddresses = peer.p2p.multiaddrs().filter((address) => /\/(wss?|webrtc-direct)\//.test(address));
  bootstrap.unshift(...wsAddresses);
  console.log(`Node peer ${peer.homeserver.serverName} (data in ${values['peer-data']}, client API on ${peer.url})`);
  for (const address of wsAddresses) console.log(`  libp2p on ${address}`);
}

// Served on 127.0.0.1, everything is local, so the page may dial loopback and plain ws://; on a public host it
// dials what a browser anywhere may: secure WebSockets, by name.
// With --no-peer, no --bootstrap and no --config, only files are served (a hearth-config.json in the build, if any).
const config = bootstrap.length > 0 || !values['no-peer'] || extraConfig
  ? { iceServers: [], allowPrivateAddresses: loopback, ...extraConfig, bootstrap: [...new Set([...bootstrap, ...(extraConfig?.bootstrap ?? [])])] }
  : undefined;
const server = await serveStatic(outDir, port, values.host, { config, tls });
closers.unshift(() => server.close());
console.log(`\nHearth is served at ${server.url}/ — open it in a browser: the homeserver runs in the page.`);
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    void (async () => {
      for (const close of closers) await close().catch((error) => console.error(error));
      process.exit(0);
    })();
  });
}
