// OpenID (what widgets and integration managers depend on): a user asks their server for a
// token, and anyone holding it learns the user ID from federation's /openid/userinfo; bad,
// missing, foreign-user and expired tokens are refused. Checked against the spec.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateFederationResponse } from '../support/spec-schema.ts';
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
    for (const token of ['not-a-token', undefined]) {
      const refused = await userinfo(token);
      expect(refused.status).toBe(401);
      expect(refused.body.errcode).toBe('M_UNKNOWN_TOKEN');
    }
    const forBob = await api(server, 'POST', `${V3}/user/${enc(bob.userId)}/openid/request_token`, { token: alice.accessToken, body: {} });
    expect(forBob.status).toBe(403);
    const issued = await api(server, 'POST', `${V3}/user/${enc(alice.userId)}/openid/request_token`, { token: alice.accessToken, body: {} });
    clock += 3600 * 1000 + 1;
    expect((await userinfo(issued.body.access_token)).status).toBe(401);
  });
});
