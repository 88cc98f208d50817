import { afterEach, describe, expect, it } from 'vitest';
import { federatedServers, sharedRoom, syncUntil, type FederatedServer } from '../../test/support/federated-homeservers.ts';
import { validateFederationRequest, validateFederationResponse } from '../../test/support/spec-schema.ts';
import { HEARTH_KEY_ID, publicKeyFromServerName } from '../crypto/identity.ts';
import { decodeBase64 } from '../crypto/base64.ts';

// Every server-server exchange a flow makes is checked against the spec's OpenAPI
// definitions, request and response: the spec, not our memory of it, is the oracle.

let close: () => Promise<void> = async () => {};
afterEach(async () => close());

function checkExchanges(server: FederatedServer): string[] {
  const seen = new Set<string>();
  for (const e of server.sent) {
    validateFederationRequest(e.method, e.path, e.request);
    validateFederationResponse(e.method, e.path, e.status, e.response);
    seen.add(`${e.method} ${e.path.split('?')[0]!.replace(/\/[!$@#%][^/]*/g, '/…')}`);
  }
  return [...seen];
}

const enc = encodeURIComponent;

describe('the server-server API against the spec', () => {
  it('invites, joins, knocks, leaves, sends and backfills with spec-shaped requests and answers', async () => {
    const net = await federatedServers(3);
    close = net.close;
    const [a, b, c] = net.servers as [FederatedServer, FederatedServer, FederatedServer];
    const [alice, bob, carol] = [await a.register('alice'), await b.register('bob'), await c.register('carol')];
    const roomId = await sharedRoom(a, alice, [[b, bob]]);
    for (let i = 0; i < 5; i++) await a.api('PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/m${i}`, { token: alice.accessToken, body: { msgtype: 'm.text', body: `m${i}` } });
    await syncUntil(b, bob, (s) => JSON.stringify(s).includes('"m4"'));

    // Knocking, in a room that allows it (v7+, join rule knock), then being let in.
    const { body: knockRoom } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { initial_state: [{ type: 'm.room.join_rules', content: { join_rule: 'knock' } }] } });
    const knock = await c.api('POST', `/_matrix/client/v3/knock/${enc(knockRoom.room_id)}?via=${a.serverName}`, { token: carol.accessToken, body: { reason: 'let me in' } });
    expect(knock.status, JSON.stringify(knock.body)).toBe(200);
    await syncUntil(c, carol, (s) => !!s.rooms?.knock?.[knockRoom.room_id]);

    // C is invited to the first room late, joins, and pages back through history it does not hold.
    expect((await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/invite`, { token: alice.accessToken, body: { user_id: carol.userId } })).status).toBe(200);
    const join = await c.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?via=${a.serverName}`, { token: carol.accessToken, body: {} });
    expect(join.status).toBe(200);
    const page = await c.api('GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=20`, { token: carol.accessToken });
    expect(page.body.chunk.filter((e: any) => e.type === 'm.room.message').map((e: any) => e.content.body).reverse()).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
    const leave = await c.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/leave`, { token: carol.accessToken, body: {} });
    expect(leave.status).toBe(200);

    const endpoints = [...checkExchanges(a), ...checkExchanges(b), ...checkExchanges(c)];
    for (const used of ['PUT /_matrix/federation/v2/invite', 'GET /_matrix/federation/v1/make_join', 'PUT /_matrix/federation/v2/send_join', 'GET /_matrix/federation/v1/make_knock', 'PUT /_matrix/federation/v1/send_knock', 'GET /_matrix/federation/v1/backfill', 'PUT /_matrix/federation/v1/send']) {
      expect(endpoints.some((e) => e.startsWith(used)), used).toBe(true);
    }
  });

  it('serves its key, its version, events, state, state IDs and auth chains', async () => {
    const net = await federatedServers(2);
    close = net.close;
    const [a, b] = net.servers as [FederatedServer, FederatedServer];
    const [alice, bob] = [await a.register('alice'), await b.register('bob')];
    const roomId = await sharedRoom(a, alice, [[b, bob]]);
    const { body: sent } = await a.api('PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/x`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'x' } });
    const client = b.homeserver.federation.component.client;
    const ask = async (path: string, query?: Record<string, string>) => {
      const answer = await client.request(a.serverName, 'GET', path, { query });
      validateFederationResponse('GET', path, 200, answer);
      return answer as any;
    };
    const keys = await ask('/_matrix/key/v2/server');
    expect(keys.server_name).toBe(a.serverName);
    expect(decodeBase64(keys.verify_keys[HEARTH_KEY_ID].key)).toEqual(publicKeyFromServerName(a.serverName));
    expect(keys.valid_until_ts).toBeGreaterThan(Date.now());
    expect((await ask('/_matrix/federation/v1/version')).server.name).toBe('Hearth');
    expect((await ask(`/_matrix/federation/v1/event/${enc(sent.event_id)}`)).pdus[0].content.body).toBe('x');
    const state = await ask(`/_matrix/federation/v1/state/${enc(roomId)}`, { event_id: sent.event_id });
    const stateIds = await ask(`/_matrix/federation/v1/state_ids/${enc(roomId)}`, { event_id: sent.event_id });
    expect(stateIds.pdu_ids).toHaveLength(state.pdus.length);
    expect(state.pdus.some((p: any) => p.type === 'm.room.member' && p.state_key === bob.userId)).toBe(true);
    const auth = await ask(`/_matrix/federation/v1/event_auth/${enc(roomId)}/${enc(sent.event_id)}`);
    expect(auth.auth_chain.map((p: any) => p.type)).toContain('m.room.create');
    const missing = await client.getMissingEvents(a.serverName, roomId, { earliest_events: [], latest_events: [sent.event_id], limit: 3, min_depth: 0 });
    validateFederationResponse('POST', `/_matrix/federation/v1/get_missing_events/${enc(roomId)}`, 200, missing);
    expect(missing.events).toHaveLength(3);
  });

  it('refuses history and state to servers that are not in the room', async () => {
    const net = await federatedServers(2);
    close = net.close;
    const [a, b] = net.servers as [FederatedServer, FederatedServer];
    const alice = await a.register('alice');
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: {} });
    const error = await b.homeserver.federation.component.client
      .request(a.serverName, 'GET', `/_matrix/federation/v1/state_ids/${enc(created.room_id)}`, { query: { event_id: '$x' } })
      .then(() => undefined, (e: { status: number; errcode: string }) => e);
    expect([error?.status, error?.errcode]).toEqual([403, 'M_FORBIDDEN']);
  });
});
