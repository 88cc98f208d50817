import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeBase64 } from '../../crypto/base64.ts';
import { defaultEd25519Backend } from '../../crypto/ed25519.ts';
import { signJson } from '../../crypto/signing.ts';
import { sharedRoom, threeServers, type Account, type Exchange, type FederatedServer, type ThreeServers } from '../../../test/support/federated-homeservers.ts';
import { validateFederationResponse } from '../../../test/support/spec-schema.ts';
import { FederationRequestError } from '../client.ts';

// The query endpoints of the server-server API, asked by a real homeserver of
// another through its signed client, and the client-server lookups built on them.

const enc = encodeURIComponent;
let servers: ThreeServers;
let a: FederatedServer;
let b: FederatedServer;
let c: FederatedServer;
let alice: Account;
let bob: Account;
let carol: Account;
let counter = 0;

beforeAll(async () => {
  servers = await threeServers();
  ({ a, b, c, alice, bob, carol } = servers);
});
afterAll(() => servers.close());

/** The exchange a server last had on a path, checked against the spec. */
function lastExchange(server: FederatedServer, path: string): Exchange {
  const exchange = server.sent.filter((e) => e.path.split('?')[0] === path).at(-1);
  if (!exchange) throw new Error(`nothing was sent to ${path}`);
  validateFederationResponse(exchange.method, exchange.path, exchange.status, exchange.response);
  return exchange;
}

/** Device keys for a fresh device of a user, signed by the device's own key. */
async function uploadDeviceKeys(server: FederatedServer, account: Account): Promise<Record<string, unknown>> {
  const ed = await defaultEd25519Backend();
  const key = await ed.keyFromSeed(crypto.getRandomValues(new Uint8Array(32)));
  const deviceKeys = await signJson({
    user_id: account.userId,
    device_id: account.deviceId,
    algorithms: ['m.olm.v1.curve25519-aes-sha2', 'm.megolm.v1.aes-sha2'],
    keys: { [`ed25519:${account.deviceId}`]: encodeBase64(key.publicKey), [`curve25519:${account.deviceId}`]: encodeBase64(crypto.getRandomValues(new Uint8Array(32))) },
  }, account.userId, `ed25519:${account.deviceId}`, key);
  const otk = { key: encodeBase64(crypto.getRandomValues(new Uint8Array(32))), signatures: { [account.userId]: { [`ed25519:${account.deviceId}`]: 'sig' } } };
  const upload = await server.api('POST', '/_matrix/client/v3/keys/upload', { token: account.accessToken, body: { device_keys: deviceKeys, one_time_keys: { 'signed_curve25519:AAAA': otk } } });
  expect(upload.status).toBe(200);
  // A master key, so cross-signing keys travel too.
  const masterKey = await ed.keyFromSeed(crypto.getRandomValues(new Uint8Array(32)));
  const pub = encodeBase64(masterKey.publicKey);
  const master = { user_id: account.userId, usage: ['master'], keys: { [`ed25519:${pub}`]: pub } };
  const signing = await server.api('POST', '/_matrix/client/v3/keys/device_signing/upload', { token: account.accessToken, body: { master_key: master } });
  expect(signing.status).toBe(200);
  return deviceKeys as Record<string, unknown>;
}

describe('profile queries', () => {
  it('a client asks for a remote user\'s profile; the user\'s server answers for its own users only', async () => {
    await b.api('PUT', `/_matrix/client/v3/profile/${enc(bob.userId)}/displayname`, { token: bob.accessToken, body: { displayname: 'Bob of B' } });

    const profile = await a.api('GET', `/_matrix/client/v3/profile/${enc(bob.userId)}`, { token: alice.accessToken });
    expect(profile).toMatchObject({ status: 200, body: { displayname: 'Bob of B' } });
    expect(lastExchange(a, '/_matrix/federation/v1/query/profile')).toMatchObject({ destination: b.serverName, status: 200, response: { displayname: 'Bob of B' } });

    const field = await a.api('GET', `/_matrix/client/v3/profile/${enc(bob.userId)}/displayname`, { token: alice.accessToken });
    expect(field).toEqual({ status: 200, body: { displayname: 'Bob of B' } });
    expect(lastExchange(a, '/_matrix/federation/v1/query/profile').path).toContain('field=displayname');
    expect((await a.api('GET', `/_matrix/client/v3/profile/${enc(bob.userId)}/avatar_url`, { token: alice.accessToken })).status).toBe(404);

    const unknown = await a.api('GET', `/_matrix/client/v3/profile/${enc(`@nobody:${b.serverName}`)}`, { token: alice.accessToken });
    expect(unknown).toMatchObject({ status: 404, body: { errcode: 'M_NOT_FOUND' } });
    expect(lastExchange(a, '/_matrix/federation/v1/query/profile')).toMatchObject({ status: 404, response: { errcode: 'M_NOT_FOUND' } });

    // B is asked about a user of A: not its to answer.
    const refused = await a.homeserver.federation.component.client.queryProfile(b.serverName, alice.userId).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(FederationRequestError);
    expect(refused).toMatchObject({ status: 400, errcode: 'M_INVALID_PARAM' });
  });
});

describe('directory queries', () => {
  it('a remote alias resolves through its server, with every server in the room, the alias\'s first', async () => {
    const roomId = await sharedRoom(a, alice, [[b, bob]]);
    const alias = `#lounge${++counter}:${a.serverName}`;
    expect((await a.api('PUT', `/_matrix/client/v3/directory/room/${enc(alias)}`, { token: alice.accessToken, body: { room_id: roomId } })).status).toBe(200);

    const resolved = await c.api('GET', `/_matrix/client/v3/directory/room/${enc(alias)}`, { token: carol.accessToken });
    expect(resolved.status).toBe(200);
    expect(resolved.body.room_id).toBe(roomId);
    expect(resolved.body.servers.slice(0, 2)).toEqual([a.serverName, b.serverName]);
    expect(lastExchange(c, '/_matrix/federation/v1/query/directory')).toMatchObject({ destination: a.serverName, response: { room_id: roomId, servers: [a.serverName, b.serverName] } });

    const missing = await c.api('GET', `/_matrix/client/v3/directory/room/${enc(`#nothing:${a.serverName}`)}`, { token: carol.accessToken });
    expect(missing).toMatchObject({ status: 404, body: { errcode: 'M_NOT_FOUND' } });
    expect(lastExchange(c, '/_matrix/federation/v1/query/directory')).toMatchObject({ status: 404, response: { errcode: 'M_NOT_FOUND' } });

    // Locally, the same answer, from our own table.
    const local = await a.api('GET', `/_matrix/client/v3/directory/room/${enc(alias)}`, { token: alice.accessToken });
    expect(local.body).toEqual({ room_id: roomId, servers: [a.serverName, b.serverName] });
  });
});

describe('device and key queries', () => {
  it('serves a local user\'s devices, keys and one-time keys to another server', async () => {
    const dave = await b.register(`dave${++counter}`);
    const deviceKeys = await uploadDeviceKeys(b, dave);
    const client = a.homeserver.federation.component.client;

    const devices = await client.userDevices(b.serverName, dave.userId);
    lastExchange(a, `/_matrix/federation/v1/user/devices/${enc(dave.userId)}`);
    expect(devices).toMatchObject({ user_id: dave.userId, devices: [{ device_id: dave.deviceId, keys: deviceKeys }], master_key: { usage: ['master'] } });
    expect(devices['stream_id']).toBeGreaterThan(0);

    const query = await client.userKeysQuery(b.serverName, { [dave.userId]: [], [alice.userId]: [] });
    lastExchange(a, '/_matrix/federation/v1/user/keys/query');
    expect(Object.keys(query['device_keys'] as object)).toEqual([dave.userId]);
    expect(query).toMatchObject({ device_keys: { [dave.userId]: { [dave.deviceId]: deviceKeys } }, master_keys: { [dave.userId]: { usage: ['master'] } } });

    const claim = await client.userKeysClaim(b.serverName, { [dave.userId]: { [dave.deviceId]: 'signed_curve25519' } });
    lastExchange(a, '/_matrix/federation/v1/user/keys/claim');
    expect(claim).toMatchObject({ one_time_keys: { [dave.userId]: { [dave.deviceId]: { 'signed_curve25519:AAAA': { key: expect.any(String) } } } } });

    const notOurs = await client.userDevices(b.serverName, alice.userId).catch((e: unknown) => e);
    expect(notOurs).toMatchObject({ status: 400, errcode: 'M_INVALID_PARAM' });
  });

  it('a client\'s /keys/query and /keys/claim ask each remote user\'s server and merge the answers, with a failure per unreachable server', async () => {
    const erin = await b.register(`erin${++counter}`);
    const deviceKeys = await uploadDeviceKeys(b, erin);
    const ghost = '@ghost:unreachable.example';
    const aliceKeys = await uploadDeviceKeys(a, alice);

    const query = await a.api('POST', '/_matrix/client/v3/keys/query', { token: alice.accessToken, body: { device_keys: { [erin.userId]: [], [ghost]: [], [alice.userId]: [] } } });
    expect(query.status).toBe(200);
    expect(query.body.device_keys[erin.userId][erin.deviceId]).toMatchObject(deviceKeys);
    expect(query.body.device_keys[alice.userId][alice.deviceId]).toMatchObject(aliceKeys);
    expect(query.body.master_keys[erin.userId]).toMatchObject({ user_id: erin.userId, usage: ['master'] });
    expect(Object.keys(query.body.failures)).toEqual(['unreachable.example']);

    const claim = await a.api('POST', '/_matrix/client/v3/keys/claim', { token: alice.accessToken, body: { one_time_keys: { [erin.userId]: { [erin.deviceId]: 'signed_curve25519' }, [ghost]: { X: 'signed_curve25519' } } } });
    expect(claim.status).toBe(200);
    expect(Object.keys(claim.body.one_time_keys[erin.userId][erin.deviceId])).toEqual(['signed_curve25519:AAAA']);
    expect(Object.keys(claim.body.failures)).toEqual(['unreachable.example']);
    // A one-time key goes once: the second claim gets none.
    const again = await a.api('POST', '/_matrix/client/v3/keys/claim', { token: alice.accessToken, body: { one_time_keys: { [erin.userId]: { [erin.deviceId]: 'signed_curve25519' } } } });
    expect(again.body).toEqual({ one_time_keys: {}, failures: {} });
  });
});
