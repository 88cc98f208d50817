/**
 * A real Dendrite as a federation peer: the pinned release `scripts/install-dendrite.sh` builds into
 * .dendrite/bin, run as a child process on SQLite in a fresh data folder, with the config its own
 * generate-config writes, edited: the test's name and signing key, HTTPS with a certificate from the
 * test's CA, that CA the only one it trusts for its own requests (Go reads SSL_CERT_FILE), no notary,
 * open registration, no rate limits and presence on. Dendrite has no address blocklist for
 * federation, so loopback needs nothing.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { dump, load } from 'js-yaml';
import type { TestTls } from './https-hosts.ts';
import { freePort } from './node-peer.ts';
import { runRemoteServer, type RemoteServer } from './remote-server.ts';

/** The version scripts/install-dendrite.sh builds. */
export const DENDRITE_VERSION = '0.13.8';
const BIN = fileURLToPath(new URL('../../.dendrite/bin/', import.meta.url));
const run = promisify(execFile);

export type DendriteServer = RemoteServer;

/** generate-config's config for a server named `name` keeping its data in `dataDir`, with what the tests need changed. */
async function dendriteConfig(options: { name: string; dataDir: string; privateKey: string }): Promise<Record<string, any>> {
  const { name, dataDir, privateKey } = options;
  const { stdout } = await run(join(BIN, 'generate-config'), ['-dir', dataDir, '-server', name]);
  const config = load(stdout) as Record<string, any>;
  Object.assign(config['global'], {
    private_key: privateKey,
    trusted_third_party_id_servers: [],
    presence: { enable_inbound: true, enable_outbound: true },
    server_notices: { ...config['global'].server_notices, enabled: false },
  });
  Object.assign(config['client_api'], {
    registration_disabled: false,
    rate_limiting: { ...config['client_api'].rate_limiting, enabled: false },
  });
  Object.assign(config['federation_api'], { key_perspectives: [], disable_tls_validation: false });
  config['user_api'].bcrypt_cost = 4;
  // Its log to stderr, which the test keeps, rather than to files.
  config['logging'] = [{ type: 'std', level: 'info' }];
  return config;
}

/**
 * Starts Dendrite on 127.0.0.1, named `localhost:PORT` with PORT its HTTPS port (OS-chosen), serving
 * the test's leaf certificate, and answers once `/_matrix/client/versions` does. Dendrite also
 * always listens for plain HTTP; that goes to another free port of 127.0.0.1, which nothing uses.
 */
export async function startDendrite(options: { tls: TestTls }): Promise<DendriteServer> {
  if (!existsSync(join(BIN, 'dendrite'))) throw new Error('Dendrite is not built in .dendrite/bin: run `npm run dendrite:install` (scripts/install-dendrite.sh) first.');
  const [port, httpPort] = [await freePort(), await freePort()];
  const name = `localhost:${port}`;
  const dataDir = await mkdtemp(join(tmpdir(), 'hearth-dendrite-'));
  const privateKey = join(dataDir, 'matrix_key.pem');
  await run(join(BIN, 'generate-keys'), ['-private-key', privateKey]);
  const configPath = join(dataDir, 'dendrite.yaml');
  await writeFile(configPath, dump(await dendriteConfig({ name, dataDir, privateKey })));
  return runRemoteServer({
    label: `Dendrite ${DENDRITE_VERSION}`, name, port, url: `https://localhost:${port}`, fetch: options.tls.fetch, dataDir,
    command: join(BIN, 'dendrite'),
    args: [
      '-config', configPath,
      '-http-bind-address', `127.0.0.1:${httpPort}`,
      '-https-bind-address', `127.0.0.1:${port}`,
      '-tls-cert', options.tls.certFile,
      '-tls-key', options.tls.keyFile,
      '-really-enable-open-registration',
    ],
    env: { SSL_CERT_FILE: options.tls.ca.certFile },
  });
}
