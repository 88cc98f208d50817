/**
 * A real Synapse as a federation peer: the pinned release `scripts/install-synapse.sh` puts in
 * .synapse/venv, run as a child process with a config of the test's own in a fresh data folder.
 * It federates over HTTPS with a certificate from the test's CA, trusts that CA for its own
 * requests, may reach loopback addresses, trusts no notary, lets anyone register, and has its
 * rate limits lifted as Synapse's own Complement set-up lifts them.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dump } from 'js-yaml';
import { freePort } from './node-peer.ts';
import { runRemoteServer, stopAllRemoteServers, type RemoteServer } from './remote-server.ts';
import type { TestTls } from './https-hosts.ts';

/** The version scripts/install-synapse.sh installs. */
export const SYNAPSE_VERSION = '1.163.2';
const PYTHON = fileURLToPath(new URL('../../.synapse/venv/bin/python', import.meta.url));

export type SynapseServer = RemoteServer;

/** Not a limit a test would meet: Complement's own numbers for "no rate limit". */
const unlimited = { per_second: 9999, burst_count: 9999 };

function synapseConfig(options: { name: string; port: number; dataDir: string; tls: TestTls }): Record<string, unknown> {
  const { name, port, dataDir, tls } = options;
  return {
    server_name: name,
    public_baseurl: `https://localhost:${port}/`,
    pid_file: join(dataDir, 'homeserver.pid'),
    report_stats: false,
    listeners: [{ port, bind_addresses: ['127.0.0.1'], type: 'http', tls: true, x_forwarded: false, resources: [{ names: ['client', 'federation'], compress: false }] }],
    tls_certificate_path: tls.certFile,
    tls_private_key_path: tls.keyFile,
    database: { name: 'sqlite3', args: { database: join(dataDir, 'homeserver.db') } },
    media_store_path: join(dataDir, 'media_store'),
    // Made by Synapse as it starts (its default, --generate-missing-and-run), like a fresh install's.
    signing_key_path: join(dataDir, 'signing.key'),
    macaroon_secret_key: randomBytes(32).toString('hex'),
    trusted_key_servers: [],
    suppress_key_server_warning: true,
    federation_verify_certificates: true,
    federation_custom_ca_list: [tls.ca.certFile],
    // Synapse refuses to federate with private addresses unless allowed; every server here is on loopback.
    ip_range_whitelist: ['127.0.0.1/8', '::1/128'],
    enable_registration: true,
    enable_registration_without_verification: true,
    bcrypt_rounds: 4,
    rc_message: unlimited,
    rc_registration: unlimited,
    rc_login: { address: unlimited, account: unlimited, failed_attempts: unlimited },
    rc_admin_redaction: unlimited,
    rc_joins: { local: unlimited, remote: unlimited },
    rc_joins_per_room: unlimited,
    rc_invites: { per_room: unlimited, per_user: unlimited, per_issuer: unlimited },
    rc_3pid_validation: unlimited,
    rc_third_party_invite: unlimited,
    rc_presence: { per_user: unlimited },
    rc_key_requests: unlimited,
    rc_delayed_event_mgmt: unlimited,
    rc_room_creation: unlimited,
    rc_user_directory: unlimited,
    rc_profile: unlimited,
    rc_reports: unlimited,
    rc_media_create: unlimited,
    rc_federation: { window_size: 1000, sleep_limit: 10, sleep_delay: 500, reject_limit: 99999, concurrent: 3 },
    federation_rr_transactions_per_room_per_second: 9999,
  };
}

/**
 * Starts Synapse on 127.0.0.1 at `port` (OS-chosen unless given; a test that stops and restarts it
 * wants ports.ts's `restartablePort()`), named `localhost:PORT` (or `127.0.0.1:PORT` with `host`,
 * for a test that needs the two servers' hosts to differ, as server ACLs ignore ports), serving
 * the test's leaf certificate, and answers once `/_matrix/client/versions` does. `config` adds to or overrides
 * what synapseConfig sets.
 */
export async function startSynapse(options: { tls: TestTls; port?: number; host?: 'localhost' | '127.0.0.1'; config?: Record<string, unknown> }): Promise<SynapseServer> {
  if (!existsSync(PYTHON)) throw new Error(`Synapse is not installed in .synapse/venv: run \`npm run synapse:install\` (scripts/install-synapse.sh) first.`);
  const port = options.port ?? (await freePort());
  const name = `${options.host ?? 'localhost'}:${port}`;
  const dataDir = await mkdtemp(join(tmpdir(), 'hearth-synapse-'));
  const configPath = join(dataDir, 'homeserver.yaml');
  await writeFile(configPath, dump({ ...synapseConfig({ name, port, dataDir, tls: options.tls }), ...options.config }));
  return runRemoteServer({
    label: `Synapse ${SYNAPSE_VERSION}`, name, port, url: `https://localhost:${port}`, fetch: options.tls.fetch, dataDir,
    command: PYTHON,
    args: ['-m', 'synapse.app.homeserver', '--config-path', configPath],
    env: { PYTHONUNBUFFERED: '1' },
  });
}

/** Stops every Synapse (and any other remote server) still running, one whose start failed a test's hook time-out too (for afterAll). */
export const stopAllSynapses = stopAllRemoteServers;
