// `npm run serve -- --port 8008 --data ./hearth-data`: the homeserver on 127.0.0.1 for any Matrix client.
// Federation: `--listen /ip4/0.0.0.0/tcp/4001` (or `…/tcp/4002/ws`) and `--bootstrap /ip4/…/p2p/12D3…`,
// each repeatable. With no --listen the peer only dials out (bootstrap peers, peers it discovers, and
// the peers it knew before, from <data>/peers); others reach it over the connections it opens.
// `--relay` makes it a circuit relay v2 for browsers (they take reservations on it and signal WebRTC
// through it), with libp2p's relay limits lifted; give it a `/ws` --listen address, browsers dial only WebSockets.
// Pages served over HTTPS dial only secure WebSockets: `--listen /ip4/0.0.0.0/tcp/443/wss --tls-cert FILE
// --tls-key FILE` (no --server-name needed), or behind a reverse proxy that ends TLS, a plain `/ws` listen
// address and `--announce /dns4/peer.example.org/tcp/443/wss` (repeatable): the address peers are told to dial.
// `--mailbox` makes it a mailbox: it holds signed mail for peers that cannot be reached until they collect it.
// `--server-name NAME --tls-cert FILE --tls-key FILE` makes it an ordinary Matrix homeserver named NAME
// (a DNS name or IP literal, optionally with a port) over HTTPS: --port serves the client and the
// server-server API; `--federation-port Q` serves the latter on a second port too. `--trusted-key-server
// NAME` (repeatable) is a notary asked for keys of servers that cannot be reached; `--rotate-key` makes a
// new signing key before start, the old one still served under old_verify_keys.
// `--storage sqljs` keeps the database as the browser does (sql.js, redo log and snapshots in files)
// instead of the native SQLite file; a sql.js folder is migrated to native SQLite at the first native start.
// A start-up failure (database in use, port taken, data folder not writable) prints one line and exits 1;
// HEARTH_DEBUG=1 prints the error in full as well. HEARTH_TRACE_FEDERATION=FILE appends every inbound
// server-server exchange to FILE as a JSON line (src/node/federation-trace.ts). For tests only:
// HEARTH_DNS_SERVERS=127.0.0.1:PORT[,…] points SRV look-ups at a DNS server of the test's own, and
// HEARTH_WELL_KNOWN_PORT=P asks `.well-known/matrix/server` on port P rather than 443.
import './polyfills.ts';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { isValidServerName } from '../events/identifiers.ts';
import { StorageError } from '../storage/errors.ts';
import { startNodeHost, type NodeHost } from './node-host.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8008' },
    data: { type: 'string', default: './hearth-data' },
    host: { type: 'string', default: '127.0.0.1' },
    'no-registration': { type: 'boolean', default: false },
    'allow-guests': { type: 'boolean', default: false },
    'no-rate-limits': { type: 'boolean', default: false },
    listen: { type: 'string', multiple: true, default: [] },
    announce: { type: 'string', multiple: true, default: [] },
    bootstrap: { type: 'string', multiple: true, default: [] },
    relay: { type: 'boolean', default: false },
    mailbox: { type: 'boolean', default: false },
    'server-name': { type: 'string' },
    'tls-cert': { type: 'string' },
    'tls-key': { type: 'string' },
    'federation-port': { type: 'string' },
    'trusted-key-server': { type: 'string', multiple: true, default: [] },
    'rotate-key': { type: 'boolean', default: false },
    storage: { type: 'string', default: 'native' },
  },
});

const usage = (message: string): never => {
  console.error(message);
  process.exit(2);
};

const portNumber = (flag: string, value: string): number => {
  const n = Number(value);
  return Number.isInteger(n) && n >= 0 && n <= 65535 ? n : usage(`--${flag} must be a port number, not ${value}`);
};
const port = portNumber('port', values.port!);
const serverName = values['server-name'];
if (serverName !== undefined && !isValidServerName(serverName)) usage(`--server-name must be a DNS name or IP literal with an optional port, not ${serverName}`);
if (serverName !== undefined && (!values['tls-cert'] || !values['tls-key'])) usage('--server-name needs --tls-cert FILE and --tls-key FILE');
// Secure WebSockets: a /wss listen address needs the certificate, and a certificate alone is for /wss.
const secureWebSockets = values.listen.some((address) => /\/wss(\/|$)/.test(address));
if (secureWebSockets && (!values['tls-cert'] || !values['tls-key'])) usage('a /wss --listen address needs --tls-cert FILE and --tls-key FILE');
if (serverName === undefined && !secureWebSockets && (values['tls-cert'] || values['tls-key'])) usage('--tls-cert and --tls-key need --server-name or a /wss --listen address');
if (serverName === undefined && (values['federation-port'] || values['trusted-key-server'].length > 0 || values['rotate-key'])) {
  usage('--federation-port, --trusted-key-server and --rotate-key need --server-name');
}
for (const address of values.announce) if (!/\/(ip4|ip6|dns|dns4|dns6)\/[^/]+\/tcp\/\d+(\/|$)/.test(address)) usage(`--announce must be a multiaddr such as /dns4/peer.example.org/tcp/443/wss, not ${address}`);
for (const notary of values['trusted-key-server']) if (!isValidServerName(notary)) usage(`--trusted-key-server must be a server name, not ${notary}`);
const storage = values.storage === 'native' || values.storage === 'sqljs' ? values.storage : usage(`--storage must be native or sqljs, not ${values.storage}`);
const federationPort = values['federation-port'] === undefined ? undefined : portNumber('federation-port', values['federation-port']);
const readPem = (flag: string, path: string): string => {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    return usage(`hearth: cannot start: --${flag} ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
};
const tls = values['tls-cert'] && values['tls-key'] ? { cert: readPem('tls-cert', values['tls-cert']), key: readPem('tls-key', values['tls-key']) } : undefined;

/** Server discovery pointed at a test's own DNS server and well-known port (HEARTH_DNS_SERVERS, HEARTH_WELL_KNOWN_PORT). */
function httpsForTests(): { dnsServers?: string[]; wellKnownPort?: number } {
  const dns = process.env['HEARTH_DNS_SERVERS'];
  const wellKnown = process.env['HEARTH_WELL_KNOWN_PORT'];
  return {
    ...(dns ? { dnsServers: dns.split(',') } : {}),
    ...(wellKnown ? { wellKnownPort: /^\d{1,5}$/.test(wellKnown) ? Number(wellKnown) : usage(`HEARTH_WELL_KNOWN_PORT must be a port number, not ${wellKnown}`) } : {}),
  };
}

/** HEARTH_FEDERATION_TIMEOUT_MS: the deadline of one federation exchange (30 s unless given; the load bench sets it lower). */
function federationTimeoutMs(): number | undefined {
  const text = process.env['HEARTH_FEDERATION_TIMEOUT_MS'];
  if (!text) return undefined;
  return /^\d{1,9}$/.test(text) && Number(text) > 0 ? Number(text) : usage(`HEARTH_FEDERATION_TIMEOUT_MS must be a positive number of milliseconds, not ${text}`);
}

/** The errno-style code of an error or of one it wraps (a StorageError keeps the fs error as its cause). */
function systemCode(error: unknown): string | undefined {
  for (let at = error, depth = 0; at && depth < 5; at = (at as { cause?: unknown }).cause, depth++) {
    const code = (at as { code?: unknown }).code;
    if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return code;
  }
  return undefined;
}

/** One line a person can act on, for the failures people meet; anything else by its message. */
function startupFailure(error: unknown, options: { dataDir: string; port: number; host: string }): string {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof StorageError && error.code === 'locked') return `hearth: cannot start: ${message}`;
  const code = systemCode(error);
  if (code === 'EADDRINUSE') {
    // The HTTP port is bound first; Node's message names it as host:port. Otherwise it was a libp2p --listen address.
    return message.includes(`${options.host}:${options.port}`)
      ? `hearth: cannot start: port ${options.port} on ${options.host} is already in use`
      : `hearth: cannot start: a --listen address is already in use (${message.split('\n')[0]})`;
  }
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') return `hearth: cannot start: the data folder ${options.dataDir} is not writable (${code})`;
  if (code === 'ENOTDIR' || code === 'EEXIST') return `hearth: cannot start: the data folder ${options.dataDir} cannot be created (${code}: something that is not a folder is in the way)`;
  return `hearth: cannot start: ${message.split('\n')[0]}`;
}

let host: NodeHost;
try {
  host = await startNodeHost({
    dataDir: values.data!,
    storage,
    port,
    host: values.host!,
    registrationEnabled: !values['no-registration'],
    allowGuests: values['allow-guests'],
    rateLimits: values['no-rate-limits'] ? false : undefined,
    log: (message, error) => console.error(message, error ?? ''),
    // Two running copies of this identity (a copy where a move was meant): say so and stop federating.
    detectTwins: true,
    listen: values.listen,
    announce: values.announce,
    bootstrap: values.bootstrap,
    relay: values.relay,
    mailbox: values.mailbox,
    serverName,
    tls,
    federationPort,
    trustedKeyServers: values['trusted-key-server'],
    rotateKey: values['rotate-key'],
    traceFederation: process.env['HEARTH_TRACE_FEDERATION'] || undefined,
    https: httpsForTests(),
    federationTimeoutMs: federationTimeoutMs(),
  });
} catch (error) {
  console.error(startupFailure(error, { dataDir: values.data!, port, host: values.host! }));
  if (process.env['HEARTH_DEBUG']) console.error(error);
  process.exit(1);
}
console.log(`Hearth homeserver listening on ${host.url}`);
if (host.federationUrl) console.log(`server-server API also on ${host.federationUrl}`);
console.log(`server name: ${host.homeserver.serverName}`);
if (serverName !== undefined) console.log(`signing key: ${host.homeserver.keyId}`);
console.log(`peer ID: ${host.p2p.peerId}`);
if (values.relay) console.log('circuit relay: on (browsers can reserve and meet here)');
if (values.mailbox) console.log('mailbox: on (holds mail for peers that cannot be reached)');
for (const address of host.p2p.multiaddrs()) console.log(`libp2p listening on ${address}`);
console.log(`data: ${values.data}`);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await host.close();
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
