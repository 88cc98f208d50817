// OpenID (what widgets and integration managers depend on): a user asks their server for a
// token, and anyone holding it learns the user ID from federation's /openid/userinfo; bad,
// missing, foreign-user and expired tokens are refused. Checked against the spec.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpsFederationTransport } from '../../src/node/https-federation.ts';
import { httpsFetch } from '../support/https-fetch.ts';
import { freePort, startNodePeer } from '../support/node-peer.ts';
import { startP2PHomeserver } from '../support/p2p-homeserver.ts';
import { validateFederationResponse } from '../support/spec-schema.ts';
import { createTestCa } from '../support/test-ca.ts';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

let server: TestServer;
let alice: Account;
let bob: Account;
let clock = Date.now();
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;

beforeAll(async () => {
  server = await startTestServer({ now: () => clock });
  [alice, bob] = [await register(server, 'alice'), await register(server, 'bob')];
});
afterAll(() => server.close());

/** Federation's userinfo, as an integration manager asks it (no X-Matrix: the token is the credential). */
async function userinfo(token?: string): Promise<{ status: number; body: any }> {
  const path = '/_matrix/federation/v1/openid/userinfo' + (token === undefined ? '' : `?access_token=${enc(token)}`);
  const response = await server.homeserver.federation.fetch(new Request(`http://${server.homeserver.serverName}${path}`), 'an-integration-manager');
  const body = await response.json();
  validateFederationResponse('GET', '/_matrix/federation/v1/openid/userinfo', response.status, body);
  return { status: response.status, body };
}

describe('OpenID', () => {
  it('gives a token that userinfo exchanges for the user ID', async () => {
    const issued = await api(server, 'POST', `${V3}/user/${enc(alice.userId)}/openid/request_token`, { token: alice.accessToken, body: {} });
    expect(issued.status).toBe(200);
    expect(issued.body).toMatchObject({ access_token: expect.any(String), token_type: 'Bearer', matrix_server_name: server.homeserver.serverName, expires_in: 3600 });
    expect(await userinfo(issued.body.access_token)).toEqual({ status: 200, body: { sub: alice.userId } });
    // The OpenID token is no access token.
    const misuse = await api(server, 'GET', `${V3}/account/whoami`, { token: issued.body.access_token, unchecked: true });
    expect(misuse.status).toBe(401);
  });

  it('refuses unknown, missing and expired tokens, and tokens for someone else', async () => {
    for (const [token, errcode] of [['not-a-token', 'M_UNKNOWN_TOKEN'], [undefined, 'M_MISSING_TOKEN']] as const) {
      const refused = await userinfo(token);
      expect(refused.status).toBe(401);
      expect(refused.body.errcode).toBe(errcode);
    }
    const forBob = await api(server, 'POST', `${V3}/user/${enc(bob.userId)}/openid/request_token`, { token: alice.accessToken, body: {} });
    expect(forBob.status).toBe(403);
    const issued = await api(server, 'POST', `${V3}/user/${enc(alice.userId)}/openid/request_token`, { token: alice.accessToken, body: {} });
    clock += 3600 * 1000 + 1;
    expect((await userinfo(issued.body.access_token)).status).toBe(401);
  });
});

// Where an integration manager or another server asks (issue 41): the client API's own address (what the
// conformance suites ask, and all a host without a DNS name serves over HTTP), HTTPS with a DNS name, and libp2p.
describe('OpenID userinfo wherever the server is reached', () => {
  const refusals = async (ask: (token?: string) => Promise<{ status: number; body: any }>) => {
    for (const [token, errcode] of [['an/invalid/token', 'M_UNKNOWN_TOKEN'], [undefined, 'M_MISSING_TOKEN']] as const) {
      const refused = await ask(token);
      expect({ status: refused.status, errcode: refused.body.errcode }).toEqual({ status: 401, errcode });
      expect(typeof refused.body.error).toBe('string');
    }
  };
  const userinfoPath = (token?: string) => '/_matrix/federation/v1/openid/userinfo' + (token === undefined ? '' : `?access_token=${enc(token)}`);
  const answer = async (response: Response) => {
    const body = await response.json();
    validateFederationResponse('GET', '/_matrix/federation/v1/openid/userinfo', response.status, body);
    return { status: response.status, body };
  };

  it('is served at the client API address too, over plain HTTP', async () => {
    const issued = await api(server, 'POST', `${V3}/user/${enc(alice.userId)}/openid/request_token`, { token: alice.accessToken, body: {} });
    const ask = async (token?: string) => answer(await fetch(server.url + userinfoPath(token)));
    expect(await ask(issued.body.access_token)).toEqual({ status: 200, body: { sub: alice.userId } });
    await refusals(ask);
    await refusals(userinfo);
  });

  it('is exchanged by another server over HTTPS, at a DNS-named host', async () => {
    const ca = createTestCa();
    const port = await freePort();
    const host = await startNodePeer({ port, listen: [], serverName: `localhost:${port}`, tls: ca.issue(['localhost', '127.0.0.1']), https: { extraCa: [ca.cert] } });
    try {
      const carol = await register({ url: host.url, fetch: httpsFetch(ca.cert) }, 'carol');
      const issued = await api({ url: host.url, fetch: httpsFetch(ca.cert) }, 'POST', `${V3}/user/${enc(carol.userId)}/openid/request_token`, { token: carol.accessToken, body: {} });
      expect(issued.body.matrix_server_name).toBe(`localhost:${port}`);
      // Found as any server finds another: by its name, through server discovery, its certificate checked.
      const transport = createHttpsFederationTransport({ extraCa: [ca.cert] });
      try {
        const ask = async (token?: string) => answer(await transport.send(issued.body.matrix_server_name, new Request(`https://${issued.body.matrix_server_name}${userinfoPath(token)}`)));
        expect(await ask(issued.body.access_token)).toEqual({ status: 200, body: { sub: carol.userId } });
        await refusals(ask);
      } finally {
        transport.close();
      }
    } finally {
      await host.close();
    }
  });

  it('is exchanged by another server over libp2p', async () => {
    const a = await startP2PHomeserver();
    const b = await startP2PHomeserver({ bootstrap: a.p2p.multiaddrs() });
    try {
      const dave = await register(a, 'dave');
      const issued = await api(a, 'POST', `${V3}/user/${enc(dave.userId)}/openid/request_token`, { token: dave.accessToken, body: {} });
      expect(issued.body.matrix_server_name).toBe(a.homeserver.serverName);
      const ask = async (token?: string) => answer(await b.p2p.transport.send(issued.body.matrix_server_name, new Request(`https://${issued.body.matrix_server_name}${userinfoPath(token)}`)));
      expect(await ask(issued.body.access_token)).toEqual({ status: 200, body: { sub: dave.userId } });
      await refusals(ask);
    } finally {
      await b.close();
      await a.close();
    }
  });
});
