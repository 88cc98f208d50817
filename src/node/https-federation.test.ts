import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TLSSocket } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestCa, type TestCa } from '../../test/support/test-ca.ts';
import { loopbackLookup, startDnsServer, type TestDnsServer } from '../../test/support/dns-server.ts';
import { FederationUnreachable } from '../federation/transport.ts';
import { BodyTooLargeError } from '../http/bounded-body.ts';
import { createHttpsFederationTransport, type HttpsFederationTransport, type HttpsFederationOptions } from './https-federation.ts';


interface Seen {
  method: string;
  url: string;
  host: string | undefined;
  sni: string | false | null;
  body: string;
}

let ca: TestCa;
let good: { key: string; cert: string };
const servers: Server[] = [];
const transports: HttpsFederationTransport[] = [];

/** An HTTPS server on 127.0.0.1 that records what it was asked and answers `answer`. */
async function serve(certificate: { key: string; cert: string }, answer: (seen: Seen) => { status?: number; body: string; headers?: Record<string, string> } = () => ({ body: '{"ok":true}' })) {
  const seen: Seen[] = [];
  let connections = 0;
  const server = createServer({ ...certificate }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const entry = { method: req.method!, url: req.url!, host: req.headers.host, sni: (req.socket as TLSSocket).servername, body: Buffer.concat(chunks).toString() };
      seen.push(entry);
      const { status = 200, body, headers = {} } = answer(entry);
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(body);
    });
  });
  server.on('secureConnection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return { port: (server.address() as AddressInfo).port, seen, connections: () => connections };
}

function transport(options: HttpsFederationOptions = {}): HttpsFederationTransport {
  const t = createHttpsFederationTransport({ extraCa: [ca.cert], lookup: loopbackLookup, ...options });
  transports.push(t);
  return t;
}

const put = (body: unknown) => new Request('http://ignored/_matrix/federation/v1/send/1?x=y', { method: 'PUT', headers: { authorization: 'X-Matrix origin="a"', 'content-type': 'application/json' }, body: JSON.stringify(body) });
const get = (path = '/_matrix/federation/v1/version') => new Request(`http://ignored${path}`);

let dns: TestDnsServer | undefined;
beforeAll(() => {
  ca = createTestCa();
  good = ca.issue(['localhost', 'hs.test', 'delegated.test', '127.0.0.1']);
});
afterEach(async () => {
  for (const t of transports.splice(0)) t.close();
  for (const s of servers.splice(0)) await new Promise((resolve) => s.close(resolve).closeAllConnections());
  await dns?.close();
  dns = undefined;
});
afterAll(() => ca.dispose());

describe('the HTTPS federation transport', () => {
  it('sends to an explicit port with SNI and Host as the server name, and keeps the connection alive', async () => {
    const server = await serve(good, (seen) => ({ body: JSON.stringify({ got: seen.body === "" ? null : JSON.parse(seen.body) }) }));
    const t = transport();
    const response = await t.send(`localhost:${server.port}`, put({ n: 1 }));
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ got: { n: 1 } });
    await t.send(`localhost:${server.port}`, get());
    expect(server.seen.map(({ method, url, host, sni }) => ({ method, url, host, sni }))).toEqual([
      { method: 'PUT', url: '/_matrix/federation/v1/send/1?x=y', host: `localhost:${server.port}`, sni: 'localhost' },
      { method: 'GET', url: '/_matrix/federation/v1/version', host: `localhost:${server.port}`, sni: 'localhost' },
    ]);
    expect(server.connections()).toBe(1);
  });

  it('sends to an IP literal with no SNI, the certificate checked for the address', async () => {
    const server = await serve(good);
    const response = await transport().send(`127.0.0.1:${server.port}`, get());
    expect(response.status).toBe(200);
    expect(server.seen[0]).toMatchObject({ host: `127.0.0.1:${server.port}`, sni: false });
  });

  it('follows SRV records from its DNS server: connects to the target, checks the certificate for the server name', async () => {
    const server = await serve(good);
    dns = await startDnsServer({ '_matrix-fed._tcp.hs.test': [{ target: 'localhost', port: server.port }] });
    // Nothing answers well-known for hs.test (the port is closed), so SRV decides.
    const closed = await serve(good);
    const closedPort = closed.port;
    await new Promise((resolve) => servers.pop()!.close(resolve));
    const t = transport({ dnsServers: [dns.address], wellKnownPort: closedPort });
    const response = await t.send('hs.test', get());
    expect(response.status).toBe(200);
    expect(server.seen[0]).toMatchObject({ host: 'hs.test', sni: 'hs.test' });
    expect(dns.asked).toContain('SRV _matrix-fed._tcp.hs.test');
  });

  it('follows a well-known delegation (through a redirect) to the delegated name and port', async () => {
    const target = await serve(good);
    let wellKnownPort = 0;
    const wellKnown = await serve(good, (seen): { status?: number; body: string; headers: Record<string, string> } =>
      seen.url === '/.well-known/matrix/server'
        ? { status: 302, body: '', headers: { location: `https://localhost:${wellKnownPort}/moved` } }
        : { body: JSON.stringify({ 'm.server': `delegated.test:${target.port}` }), headers: { 'cache-control': 'max-age=3600' } },
    );
    wellKnownPort = wellKnown.port;
    const t = transport({ wellKnownPort });
    expect((await t.send('localhost', get())).status).toBe(200);
    expect(wellKnown.seen.map((s) => s.url)).toEqual(['/.well-known/matrix/server', '/moved']);
    expect(wellKnown.seen[0]).toMatchObject({ host: `localhost:${wellKnownPort}`, sni: 'localhost' });
    expect(target.seen[0]).toMatchObject({ host: `delegated.test:${target.port}`, sni: 'delegated.test' });
  });

  it('refuses a certificate for another name, and one from a CA it does not trust', async () => {
    const wrong = await serve(ca.issue(['wrong.example']));
    const error = await transport().send(`localhost:${wrong.port}`, get()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FederationUnreachable);
    expect(String((error as Error).message)).toMatch(/altnames|ERR_TLS_CERT_ALTNAME_INVALID|does not match/i);
    expect(wrong.seen).toEqual([]);

    const strange = createTestCa('Someone Else');
    try {
      const untrusted = await serve(strange.issue(['localhost']));
      const refused = await transport().send(`localhost:${untrusted.port}`, get()).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(FederationUnreachable);
      expect(untrusted.seen).toEqual([]);
    } finally {
      strange.dispose();
    }
  });

  it('rejects with FederationUnreachable when nothing listens, and refuses an oversized answer', async () => {
    const closed = await serve(good);
    await new Promise((resolve) => servers.pop()!.close(resolve));
    await expect(transport().send(`localhost:${closed.port}`, get())).rejects.toBeInstanceOf(FederationUnreachable);

    const big = await serve(good, () => ({ body: 'x'.repeat(5000) }));
    await expect(transport({ limits: { maxResponseBytes: 1000 } }).send(`localhost:${big.port}`, get())).rejects.toBeInstanceOf(BodyTooLargeError);
  });
});

describe('the production trust path', () => {
  it('a new process trusts the test CA through NODE_EXTRA_CA_CERTS, and not without it', async () => {
    const server = await serve(good);
    const dir = mkdtempSync(join(tmpdir(), 'hearth-https-'));
    try {
      const module = fileURLToPath(new URL('./https-federation.ts', import.meta.url));
      const script = join(dir, 'send.mts');
      writeFileSync(
        script,
        `import { createHttpsFederationTransport } from ${JSON.stringify(module)};
const t = createHttpsFederationTransport();
try {
  const response = await t.send('localhost:${server.port}', new Request('http://x/_matrix/federation/v1/version'));
  console.log('status ' + response.status);
} catch (error) {
  console.log('failed ' + error.name + ': ' + error.message);
} finally {
  t.close();
}
`,
      );
      const run = (env: NodeJS.ProcessEnv) =>
        new Promise<string>((resolve, reject) => {
          const child = spawn(process.execPath, ['--import', 'tsx', script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
          let out = '';
          child.stdout.on('data', (c: Buffer) => (out += c.toString()));
          child.stderr.on('data', (c: Buffer) => (out += c.toString()));
          child.on('error', reject);
          child.on('exit', () => resolve(out));
        });
      const { NODE_EXTRA_CA_CERTS: _, ...env } = process.env;
      expect(await run({ ...env, NODE_EXTRA_CA_CERTS: ca.certFile })).toContain('status 200');
      expect(await run(env)).toMatch(/failed FederationUnreachable: .*(UNABLE_TO_VERIFY|unable to verify)/i);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
