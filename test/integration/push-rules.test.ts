// Push rule CRUD as Element's notification settings use it (/pushrules/global/{kind}/{ruleId}):
// new rules go before older ones of their kind (after .m.rule.master among overrides), before
// and after place them, server-default rules can be disabled and given new actions but not
// deleted, and the listing of one kind. Raw HTTP, checked against the spec.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

let server: TestServer;
let alice: Account;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;

beforeAll(async () => {
  server = await startTestServer();
  alice = await register(server, 'alice');
});
afterAll(() => server.close());

const put = (kind: string, ruleId: string, body: object, query = '') => api(server, 'PUT', `${V3}/pushrules/global/${kind}/${enc(ruleId)}${query}`, { token: alice.accessToken, body });
const ids = async (kind: string) => ((await api(server, 'GET', `${V3}/pushrules/global/${kind}/`, { token: alice.accessToken, unchecked: true })).body as any[]).map((r) => r.rule_id);
const override = (pattern: string) => ({ actions: ['notify'], conditions: [{ kind: 'event_match', key: 'content.body', pattern }] });

describe('push rule CRUD', () => {
  it('puts a new rule before older ones of its kind, overrides after .m.rule.master', async () => {
    expect((await put('override', 'first', override('one'))).status).toBe(200);
    expect((await put('override', 'second', override('two'))).status).toBe(200);
    const overrides = await ids('override');
    expect(overrides.slice(0, 3)).toEqual(['.m.rule.master', 'second', 'first']);
    expect((await put('content', 'c1', { actions: ['notify'], pattern: 'cake' })).status).toBe(200);
    expect((await put('content', 'c2', { actions: ['notify'], pattern: 'pie' })).status).toBe(200);
    expect((await ids('content')).slice(0, 2)).toEqual(['c2', 'c1']);
  });

  it('places a rule with before and after, and refuses an unknown neighbour', async () => {
    expect((await put('override', 'third', override('three'), '?after=first')).status).toBe(200);
    expect((await ids('override')).slice(0, 4)).toEqual(['.m.rule.master', 'second', 'first', 'third']);
    expect((await put('override', 'zeroth', override('zero'), '?before=second')).status).toBe(200);
    expect((await ids('override')).slice(0, 3)).toEqual(['.m.rule.master', 'zeroth', 'second']);
    const unknown = await put('override', 'lost', override('lost'), '?before=nope');
    expect(unknown.status).toBe(404);
    expect(unknown.body.errcode).toBe('M_NOT_FOUND');
  });

  it('lets a server-default rule be disabled and its actions changed, never deleted', async () => {
    const at = `${V3}/pushrules/global/override/${enc('.m.rule.suppress_notices')}`;
    expect((await api(server, 'PUT', `${at}/enabled`, { token: alice.accessToken, body: { enabled: false } })).status).toBe(200);
    expect((await api(server, 'GET', `${at}/enabled`, { token: alice.accessToken })).body).toEqual({ enabled: false });
    expect((await api(server, 'PUT', `${at}/actions`, { token: alice.accessToken, body: { actions: [] } })).status).toBe(200);
    expect((await api(server, 'GET', `${at}/actions`, { token: alice.accessToken })).body).toEqual({ actions: [] });
    const deleted = await api(server, 'DELETE', at, { token: alice.accessToken });
    expect(deleted.status).toBe(403);
    expect(deleted.body.errcode).toBe('M_FORBIDDEN');
    expect((await api(server, 'PUT', `${V3}/pushrules/global/override/${enc('.my.rule')}`, { token: alice.accessToken, body: override('x'), unchecked: true })).status).toBe(400);
  });

  it('deletes a rule of the user', async () => {
    expect((await api(server, 'DELETE', `${V3}/pushrules/global/override/first`, { token: alice.accessToken })).status).toBe(200);
    expect(await ids('override')).not.toContain('first');
    expect((await api(server, 'GET', `${V3}/pushrules/global/override/first`, { token: alice.accessToken })).status).toBe(404);
  });
});
