/**
 * DNS-named Hearth hosts over HTTPS, as the tests that federate over real HTTPS start them: one test
 * CA and one leaf certificate (for `localhost` and 127.0.0.1) that every server of the test serves,
 * and `npm run serve -- --server-name localhost:P --tls-cert … --tls-key …` in a process of its own
 * that trusts the CA (NODE_EXTRA_CA_CERTS).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnHearth, type HearthProcess } from './hearth-process.ts';
import { httpsFetch, type HttpsFetch } from './https-fetch.ts';
import { freePort } from './node-peer.ts';
import { createTestCa, type TestCa } from './test-ca.ts';

export interface TestTls {
  ca: TestCa;
  /** The leaf every server of the test serves, and the files it is written to. */
  leaf: { cert: string; key: string };
  certFile: string;
  keyFile: string;
  /** A folder of the test's own that dispose() removes (the leaf's files are in it; a test may put more there). */
  dir: string;
  /** A fetch for clients in the test process that trusts the CA. */
  fetch: HttpsFetch;
  dispose(): Promise<void>;
}

export async function createTestTls(): Promise<TestTls> {
  const ca = createTestCa();
  const leaf = ca.issue(['localhost', '127.0.0.1']);
  const dir = await mkdtemp(join(tmpdir(), 'hearth-https-tls-'));
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  await writeFile(certFile, leaf.cert);
  await writeFile(keyFile, leaf.key, { mode: 0o600 });
  const fetch = httpsFetch(ca.cert);
  return {
    ca,
    leaf,
    certFile,
    keyFile,
    dir,
    fetch,
    dispose: async () => {
      fetch.close();
      await rm(dir, { recursive: true, force: true });
      ca.dispose();
    },
  };
}

export interface HttpsHearth {
  name: string;
  port: number;
  dataDir: string;
  url: string;
  fetch: typeof fetch;
  process: HearthProcess;
  /** Stops it; with a data folder it made itself (no `dataDir` given), removes that too. */
  close(): Promise<void>;
}

/**
 * A Hearth host named `name` (`localhost:PORT` unless given) on `https://localhost:PORT`, PORT
 * OS-chosen unless given. Without `dataDir` it keeps its data in a new temporary folder. Outside
 * vitest (a bench), `entry` names the compiled host to run and `nodeFlags` node's flags for it.
 */
export async function spawnHttpsHearth(tls: TestTls, options: { port?: number; dataDir?: string; name?: string; args?: string[]; env?: Record<string, string>; entry?: string; nodeFlags?: readonly string[] } = {}): Promise<HttpsHearth> {
  const port = options.port ?? (await freePort());
  const name = options.name ?? `localhost:${port}`;
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'hearth-https-')));
  const removeData = options.dataDir ? async () => {} : () => rm(dataDir, { recursive: true, force: true, maxRetries: 5 });
  try {
    const child = await spawnHearth({
      dataDir,
      port,
      listen: [],
      args: ['--server-name', name, '--tls-cert', tls.certFile, '--tls-key', tls.keyFile, ...(options.args ?? [])],
      env: { NODE_EXTRA_CA_CERTS: tls.ca.certFile, ...options.env },
      ...(options.entry ? { entry: options.entry } : {}),
      ...(options.nodeFlags ? { nodeFlags: options.nodeFlags } : {}),
    });
    if (child.serverName !== name) {
      await child.stop();
      throw new Error(`the host calls itself ${child.serverName}, not ${name}`);
    }
    return {
      name,
      port,
      dataDir,
      url: `https://localhost:${port}`,
      fetch: tls.fetch,
      process: child,
      close: async () => {
        await child.stop();
        await removeData();
      },
    };
  } catch (error) {
    await removeData();
    throw error;
  }
}
