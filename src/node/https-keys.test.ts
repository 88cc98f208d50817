import { loopbackLookup } from '../../test/support/dns-server.ts';
import initSqlJs from 'sql.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestCa, type TestCa } from '../../test/support/test-ca.ts';
import { validateFederationResponse } from '../../test/support/spec-schema.ts';
import { tweetnaclBackend } from '../crypto/ed25519.ts';
import { webRandomBytes } from '../crypto/random.ts';
import { serverKeysSchema, SqlServerKeyStore } from '../federation/server-key-store.ts';
import { ServerKeys, transportKeyFetcher } from '../federation/server-keys.ts';
import { memorySigningKeyStorage, ServerSigningKeys } from '../federation/signing-keys.ts';
import { authorizationHeader } from '../federation/x-matrix.ts';
import { openSqlJsDatabase } from '../storage/sqljs-database.ts';
import { createHttpsFederationTransport } from './https-federation.ts';
import type { RunningHttpServer } from './http-server.ts';
import { routeByApi, startHttpsServer } from './https-server.ts';

// Key servers and notaries over real HTTPS on loopback, with a CA of the test's own.


let ca: TestCa;
let certificate: { key: string; cert: string };
const running: { close(): unknown }[] = [];
beforeAll(() => {
  ca = createTestCa();
  certificate = ca.issue(['localhost']);
});
afterEach(async () => {
  for (const r of running.splice(0).reverse()) await r.close();
});
afterAll(() => ca.dispose());

interface Host {
  name: string;
  keys: ServerKeys;
  signing: ServerSigningKeys;
  server: RunningHttpServer;
  /** What reached the federation side, with the sender it was given. */
  inbound: { path: string; remoteServerName: string | undefined }[];
}

/** A server `localhost:PORT` whose key server and notary endpoints answer over HTTPS. */
async function host(trustedNotaries: string[] = []): Promise<Host> {
  const inbound: Host['inbound'] = [];
  let keys!: ServerKeys;
  const federation = async (request: Request, remoteServerName: string | undefined): Promise<Response> => {
    const url = new URL(request.url);
    inbound.push({ path: url.pathname, remoteServerName });
    if (url.pathname === '/_matrix/key/v2/server') return Response.json(await keys.serverKeys());
    if (url.pathname === '/_matrix/key/v2/query') return Response.json(await keys.notaryBatch(await request.json()));
    const query = /^\/_matrix\/key\/v2\/query\/([^/]+)$/.exec(url.pathname);
    if (query) return Response.json(await keys.notaryQuery(decodeURIComponent(query[1]!)));
    return Response.json({ errcode: 'M_UNRECOGNIZED' }, { status: 404 });
  };
  const server = await startHttpsServer(routeByApi({ client: async () => Response.json({ api: 'client' }), federation }), { ...certificate });
  running.push(server);
  const name = `localhost:${server.port}`;
  const transport = createHttpsFederationTransport({ extraCa: [ca.cert], lookup: loopbackLookup });
  running.push(transport);
  const signing = await ServerSigningKeys.open({ storage: memorySigningKeyStorage(), ed25519: tweetnaclBackend, random: webRandomBytes, now: Date.now });
  keys = new ServerKeys({
    serverName: name,
    signingKeys: signing,
    ed25519: tweetnaclBackend,
    store: new SqlServerKeyStore(await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: [serverKeysSchema] })),
    fetcher: transportKeyFetcher(transport),
    trustedNotaries,
    now: Date.now,
  });
  return { name, keys, signing, server, inbound };
}

describe('server keys over HTTPS', () => {
  it("fetches another server's key document from its key server and checks it", async () => {
    const [a, b] = [await host(), await host()];
    expect(await b.keys.verifyKey(a.name, a.signing.keyId)).toEqual(a.signing.signingKey.publicKey);
    expect(a.inbound).toEqual([{ path: '/_matrix/key/v2/server', remoteServerName: undefined }]);
    validateFederationResponse('GET', '/_matrix/key/v2/server', 200, await a.keys.serverKeys());
  });

  it('asks a trusted notary when the server itself is down, and takes only what both signed', async () => {
    const a = await host();
    const notary = await host();
    const answer = await (await fetchVia(notary, `/_matrix/key/v2/query/${encodeURIComponent(a.name)}`)).json();
    validateFederationResponse('GET', `/_matrix/key/v2/query/${encodeURIComponent(a.name)}`, 200, answer);
    await a.server.close();
    const b = await host([notary.name]);
    expect(await b.keys.verifyKey(a.name, a.signing.keyId)).toEqual(a.signing.signingKey.publicKey);
    expect(notary.inbound.map((i) => i.path)).toEqual([`/_matrix/key/v2/query/${encodeURIComponent(a.name)}`, '/_matrix/key/v2/query', '/_matrix/key/v2/server']);
  });

  it('hands server-server requests to federation named by their X-Matrix origin, the rest to the client API', async () => {
    const [a, b] = [await host(), await host()];
    const authorization = await authorizationHeader('GET', '/_matrix/federation/v1/version', b.name, a.name, undefined, b.signing.keyId, b.signing.signingKey);
    await fetchVia(b, '/_matrix/federation/v1/version', a.name, { authorization });
    expect(a.inbound.at(-1)).toEqual({ path: '/_matrix/federation/v1/version', remoteServerName: undefined });
    expect(await (await fetchVia(b, '/_matrix/client/versions', a.name)).json()).toEqual({ api: 'client' });
  });
});

/** One request from `from`'s HTTPS transport (to itself unless `to` is given). */
async function fetchVia(from: Host, path: string, to = from.name, headers: Record<string, string> = {}): Promise<Response> {
  const transport = createHttpsFederationTransport({ extraCa: [ca.cert], lookup: loopbackLookup });
  try {
    const response = await transport.send(to, new Request(`http://${to}${path}`, { headers }));
    return new Response(await response.arrayBuffer(), response);
  } finally {
    transport.close();
  }
}
