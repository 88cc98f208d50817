import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signJson } from '../../src/crypto/signing.ts';
import { clientCalls } from '../support/client-calls.ts';
import { crossSigningKey, crossSigningSet, deviceKeys, newKey } from '../support/e2ee-keys.ts';
import { api, nextLongPoll, register, UNTIL_WOKEN_MS, type Account, startTestServer, type TestServer } from './harness.ts';

// Raw HTTP against the end-to-end encryption endpoints: each validation error has
// its status and code, and the bookkeeping (/sync device lists, key counts,
// to-device delivery) is what the spec describes.

const PASSWORD = 'correct horse battery staple';
const V3 = '/_matrix/client/v3';

let server: TestServer;
let counter = 0;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

const expectError = (response: { status: number; body: any }, status: number, errcode: string) => {
  expect({ status: response.status, errcode: response.body?.errcode }).toEqual({ status, errcode });
  expect(typeof response.body.error).toBe('string');
};

/** A one-time or fallback key object (its signature is not checked by the server). */
const otk = (key: string, fallback = false) => ({ key, ...(fallback ? { fallback: true } : {}), signatures: { '@someone:example.org': { 'ed25519:DEVICE': 'sig' } } });

const newUser = (name: string) => register(server, `${name}${++counter}`, PASSWORD);

const upload = (account: Account, body: unknown, unchecked = false) => api(server, 'POST', `${V3}/keys/upload`, { token: account.accessToken, body, unchecked });
const query = (account: Account, users: Record<string, string[]>) => api(server, 'POST', `${V3}/keys/query`, { token: account.accessToken, body: { device_keys: users } });
const claim = (account: Account, keys: Record<string, Record<string, string>>) => api(server, 'POST', `${V3}/keys/claim`, { token: account.accessToken, body: { one_time_keys: keys } });
const sync = async (account: Account, since?: string, timeout = 0) => {
  const r = await api(server, 'GET', `${V3}/sync?timeout=${timeout}${since ? `&since=${since}` : ''}`, { token: account.accessToken });
  expect(r.status).toBe(200);
  return r.body;
};
const password = (account: Account, session?: string) => ({
  type: 'm.login.password', identifier: { type: 'm.id.user', user: account.userId }, password: PASSWORD, ...(session ? { session } : {}),
});
const login = async (username: string): Promise<Account> => {
  const r = await api(server, 'POST', `${V3}/login`, { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: username }, password: PASSWORD } });
  return { userId: r.body.user_id, accessToken: r.body.access_token, deviceId: r.body.device_id };
};
const localpart = (account: Account) => account.userId.slice(1, account.userId.indexOf(':'));

async function sharedRoom(a: Account, b: Account): Promise<string> {
  const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: a.accessToken, body: { preset: 'public_chat' } })).body.room_id;
  expect((await api(server, 'POST', `${V3}/join/${encodeURIComponent(roomId)}`, { token: b.accessToken, body: {} })).status).toBe(200);
  return roomId;
}

describe('POST /keys/upload: device keys', () => {
  it('stores signed device keys, and /keys/query returns them with the display name', async () => {
    const alice = await newUser('alice');
    const { signed } = await deviceKeys(alice);
    const r = await upload(alice, { device_keys: signed });
    expect(r.status).toBe(200);
    expect(r.body.one_time_key_counts).toEqual({ signed_curve25519: 0 });
    await api(server, 'PUT', `${V3}/devices/${alice.deviceId}`, { token: alice.accessToken, body: { display_name: 'laptop' } });
    const q = await query(alice, { [alice.userId]: [] });
    expect(q.body.device_keys[alice.userId][alice.deviceId]).toEqual({ ...signed, unsigned: { device_display_name: 'laptop' } });
    // Identical re-upload is fine.
    expect((await upload(alice, { device_keys: signed })).status).toBe(200);
  });

  it('M_BAD_JSON when user_id is not the caller', async () => {
    const alice = await newUser('alice');
    const { signed } = await deviceKeys(alice, { user_id: '@mallory:example.org' });
    expectError(await upload(alice, { device_keys: signed }), 400, 'M_BAD_JSON');
  });

  it('M_BAD_JSON when device_id is not the calling device', async () => {
    const alice = await newUser('alice');
    const { signed } = await deviceKeys(alice, { device_id: 'OTHERDEVICE' });
    expectError(await upload(alice, { device_keys: signed }), 400, 'M_BAD_JSON');
  });

  it('stores keys without an ed25519:<device_id> key, or not signed by it, as given: keys are opaque to the server, as in Synapse and Dendrite', async () => {
    const alice = await newUser('alice');
    const { signed } = await deviceKeys(alice, { keys: { [`curve25519:${alice.deviceId}`]: 'abc' } });
    expect((await upload(alice, { device_keys: signed })).status).toBe(200);
    expect((await query(alice, { [alice.userId]: [] })).body.device_keys[alice.userId][alice.deviceId]).toMatchObject(signed);
    const bob = await newUser('bob');
    const { signed: bobs } = await deviceKeys(bob);
    const other = await newKey();
    const forged = await signJson({ ...bobs, signatures: {} }, bob.userId, `ed25519:${bob.deviceId}`, other.key);
    expect((await upload(bob, { device_keys: forged })).status).toBe(200);
    expect((await query(bob, { [bob.userId]: [] })).body.device_keys[bob.userId][bob.deviceId]).toMatchObject(forged);
    // The clients that fetch them refuse what does not verify.
  });

  it('M_BAD_JSON for the wrong shape', async () => {
    const alice = await newUser('alice');
    const { signed } = await deviceKeys(alice);
    expectError(await upload(alice, { device_keys: { ...signed, algorithms: 'all' } }, true), 400, 'M_BAD_JSON');
    expectError(await upload(alice, { one_time_keys: { 'signed_curve25519:AAAA': 5 } }, true), 400, 'M_BAD_JSON');
  });
});

describe('one-time and fallback keys', () => {
  it('counts, accepts identical re-uploads, refuses a changed key atomically', async () => {
    const alice = await newUser('alice');
    const otks = { 'signed_curve25519:AAAAAQ': otk('one'), 'signed_curve25519:AAAAAg': otk('two') };
    expect((await upload(alice, { one_time_keys: otks })).body.one_time_key_counts).toEqual({ signed_curve25519: 2 });
    expect((await upload(alice, { one_time_keys: otks })).body.one_time_key_counts).toEqual({ signed_curve25519: 2 });
    const conflict = await upload(alice, { one_time_keys: { 'signed_curve25519:AAAAAw': otk('three'), 'signed_curve25519:AAAAAQ': otk('changed') } });
    expectError(conflict, 400, 'M_INVALID_PARAM');
    // The request changed nothing: AAAAAw was not stored either.
    expect((await upload(alice, {})).body.one_time_key_counts).toEqual({ signed_curve25519: 2 });
  });

  it('M_BAD_JSON for a key ID without an algorithm', async () => {
    const alice = await newUser('alice');
    expectError(await upload(alice, { one_time_keys: { AAAAAQ: 'key' } }), 400, 'M_BAD_JSON');
    expectError(await upload(alice, { fallback_keys: { 'signed_curve25519:': 'key' } }), 400, 'M_BAD_JSON');
  });

  it('M_INVALID_PARAM for two fallback keys of one algorithm', async () => {
    const alice = await newUser('alice');
    const r = await upload(alice, { fallback_keys: { 'signed_curve25519:F1': otk('a', true), 'signed_curve25519:F2': otk('b', true) } });
    expectError(r, 400, 'M_INVALID_PARAM');
  });

  it('claims the oldest key first, then the fallback key, which /sync then reports used', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    await upload(alice, { one_time_keys: { 'signed_curve25519:B': otk('first') } });
    await upload(alice, { one_time_keys: { 'signed_curve25519:A': otk('second') }, fallback_keys: { 'signed_curve25519:F': otk('fb', true) } });
    const initial = await sync(alice);
    expect(initial.device_one_time_keys_count).toEqual({ signed_curve25519: 2 });
    expect(initial.device_unused_fallback_key_types).toEqual(['signed_curve25519']);

    const take = async () => (await claim(bob, { [alice.userId]: { [alice.deviceId]: 'signed_curve25519' } })).body.one_time_keys[alice.userId]?.[alice.deviceId];
    expect(await take()).toEqual({ 'signed_curve25519:B': otk('first') });
    expect(await take()).toEqual({ 'signed_curve25519:A': otk('second') });
    expect(await take()).toEqual({ 'signed_curve25519:F': otk('fb', true) });
    expect(await take()).toEqual({ 'signed_curve25519:F': otk('fb', true) });

    const after = await sync(alice, initial.next_batch);
    expect(after.device_one_time_keys_count).toEqual({ signed_curve25519: 0 });
    expect(after.device_unused_fallback_key_types).toEqual([]);
    // Re-uploading the used key keeps it used; a new one is unused.
    await upload(alice, { fallback_keys: { 'signed_curve25519:F': otk('fb', true) } });
    expect((await sync(alice, after.next_batch)).device_unused_fallback_key_types).toEqual([]);
    await upload(alice, { fallback_keys: { 'signed_curve25519:G': otk('fb2', true) } });
    expect((await sync(alice, after.next_batch)).device_unused_fallback_key_types).toEqual(['signed_curve25519']);
  });

  it('claims nothing for an unknown device or algorithm', async () => {
    const alice = await newUser('alice');
    await upload(alice, { one_time_keys: { 'signed_curve25519:A': otk('k') } });
    const r = await claim(alice, { [alice.userId]: { NOSUCHDEVICE: 'signed_curve25519' }, '@nobody:example.org': { X: 'signed_curve25519' } });
    expect(r.status).toBe(200);
    expect(r.body.one_time_keys).toEqual({});
    expect(Object.keys(r.body.failures)).toEqual(['example.org']);
  });

  it('M_INVALID_PARAM for an invalid user ID in /keys/query and /keys/claim', async () => {
    const alice = await newUser('alice');
    expectError(await api(server, 'POST', `${V3}/keys/query`, { token: alice.accessToken, body: { device_keys: { 'not-a-user': [] } }, unchecked: true }), 400, 'M_INVALID_PARAM');
    expectError(await api(server, 'POST', `${V3}/keys/claim`, { token: alice.accessToken, body: { one_time_keys: { 'not-a-user': {} } }, unchecked: true }), 400, 'M_INVALID_PARAM');
    expectError(await api(server, 'POST', `${V3}/keys/query`, { token: alice.accessToken, body: {}, unchecked: true }), 400, 'M_BAD_JSON');
  });
});

describe('device lists', () => {
  it('reports new devices, key uploads, joins and leaves to users sharing a room', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const carol = await newUser('carol');
    let aliceToken = (await sync(alice)).next_batch;

    // Not sharing a room: bob's keys are none of alice's business.
    await upload(bob, { device_keys: (await deviceKeys(bob)).signed });
    let s = await sync(alice, aliceToken);
    expect(s.device_lists).toEqual({ changed: [], left: [] });
    aliceToken = s.next_batch;

    // Bob joins alice's room: alice should fetch his devices.
    const roomId = await sharedRoom(alice, bob);
    s = await sync(alice, aliceToken);
    expect(s.device_lists.changed).toEqual([bob.userId]);
    aliceToken = s.next_batch;

    // Bob logs in a second device, then uploads its keys.
    const bob2 = await login(localpart(bob));
    s = await sync(alice, aliceToken);
    expect(s.device_lists.changed).toEqual([bob.userId]);
    aliceToken = s.next_batch;
    await upload(bob2, { device_keys: (await deviceKeys(bob2)).signed });
    s = await sync(alice, aliceToken);
    expect(s.device_lists.changed).toEqual([bob.userId]);
    aliceToken = s.next_batch;

    // Carol joining the room is a change for alice, and for carol every member is.
    let carolToken = (await sync(carol)).next_batch;
    await api(server, 'POST', `${V3}/join/${encodeURIComponent(roomId)}`, { token: carol.accessToken, body: {} });
    expect((await sync(alice, aliceToken)).device_lists.changed).toEqual([carol.userId]);
    const carolSync = await sync(carol, carolToken);
    expect(carolSync.device_lists.changed).toEqual([alice.userId, bob.userId].sort());
    carolToken = carolSync.next_batch;
    aliceToken = (await sync(alice, aliceToken)).next_batch;

    // Bob deletes his second device: a change, and its keys are gone.
    const first = await api(server, 'DELETE', `${V3}/devices/${bob2.deviceId}`, { token: bob.accessToken, body: {} });
    expect(first.status).toBe(401);
    await api(server, 'DELETE', `${V3}/devices/${bob2.deviceId}`, { token: bob.accessToken, body: { auth: password(bob, first.body.session) } });
    s = await sync(alice, aliceToken);
    expect(s.device_lists.changed).toEqual([bob.userId]);
    aliceToken = s.next_batch;
    expect(Object.keys((await query(alice, { [bob.userId]: [] })).body.device_keys[bob.userId])).toEqual([bob.deviceId]);

    // Bob leaves: alice and carol share no room with him any more.
    await api(server, 'POST', `${V3}/rooms/${encodeURIComponent(roomId)}/leave`, { token: bob.accessToken, body: {} });
    s = await sync(alice, aliceToken);
    expect(s.device_lists).toEqual({ changed: [], left: [bob.userId] });
    aliceToken = s.next_batch;
    expect((await sync(carol, carolToken)).device_lists.left).toEqual([bob.userId]);

    // /keys/changes answers the same from the tokens.
    const changes = await api(server, 'GET', `${V3}/keys/changes?from=${carolToken}&to=${aliceToken}`, { token: carol.accessToken });
    expect(changes.body).toEqual({ changed: [], left: [bob.userId] });
  });

  it("reports the user's own new device to their other devices", async () => {
    const alice = await newUser('alice');
    const token = (await sync(alice)).next_batch;
    await login(localpart(alice));
    expect((await sync(alice, token)).device_lists.changed).toEqual([alice.userId]);
  });

  it('wakes a waiting /sync when a shared user uploads keys', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    await sharedRoom(alice, bob);
    const token = (await sync(alice)).next_batch;
    const listening = nextLongPoll(server);
    const waiting = sync(alice, token, UNTIL_WOKEN_MS);
    await listening;
    await upload(bob, { device_keys: (await deviceKeys(bob)).signed });
    const s = await waiting;
    expect(s.device_lists.changed).toEqual([bob.userId]);
  });

  it('M_MISSING_PARAM without from, M_INVALID_PARAM for a bad token in /keys/changes', async () => {
    const alice = await newUser('alice');
    expectError(await api(server, 'GET', `${V3}/keys/changes`, { token: alice.accessToken, unchecked: true }), 400, 'M_MISSING_PARAM');
    expectError(await api(server, 'GET', `${V3}/keys/changes?from=nonsense&to=s1_0`, { token: alice.accessToken }), 400, 'M_INVALID_PARAM');
  });
});

describe('POST /keys/device_signing/upload', () => {
  it('takes the first keys without auth, the same keys again without auth, new keys only with the password', async () => {
    const alice = await newUser('alice');
    const first = await crossSigningSet(alice.userId);
    const body = { master_key: first.master.object, self_signing_key: first.selfSigning.object, user_signing_key: first.userSigning.object };
    const path = `${V3}/keys/device_signing/upload`;
    expect((await api(server, 'POST', path, { token: alice.accessToken, body })).status).toBe(200);
    expect((await api(server, 'POST', path, { token: alice.accessToken, body })).status).toBe(200);

    const second = await crossSigningSet(alice.userId);
    const replace = { master_key: second.master.object, self_signing_key: second.selfSigning.object, user_signing_key: second.userSigning.object };
    // (The spec lists no 401 for this endpoint, so the validator would want a plain error; a UIA challenge is right.)
    const challenge = await api(server, 'POST', path, { token: alice.accessToken, body: replace, unchecked: true });
    expect(challenge.status).toBe(401);
    expect(challenge.body.flows).toEqual([{ stages: ['m.login.password'] }]);
    const wrong = await api(server, 'POST', path, { token: alice.accessToken, body: { ...replace, auth: { ...password(alice, challenge.body.session), password: 'wrong' } }, unchecked: true });
    expect(wrong.status).toBe(401);
    expect(wrong.body.errcode).toBe('M_FORBIDDEN');
    // Still the first keys.
    expect((await query(alice, { [alice.userId]: [] })).body.master_keys[alice.userId]).toEqual(first.master.object);
    const ok = await api(server, 'POST', path, { token: alice.accessToken, body: { ...replace, auth: password(alice, challenge.body.session) } });
    expect(ok.status).toBe(200);
    expect((await query(alice, { [alice.userId]: [] })).body.master_keys[alice.userId]).toEqual(second.master.object);
  });

  it('is served under the unstable prefix too, as Synapse still serves it, and so is /keys/signatures/upload (issue 24, client behaviour 9)', async () => {
    const alice = await newUser('alice');
    const keys = await crossSigningSet(alice.userId);
    const body = { master_key: keys.master.object, self_signing_key: keys.selfSigning.object, user_signing_key: keys.userSigning.object };
    // The unstable paths are not in the spec, so the validator knows them not.
    const uploaded = await api(server, 'POST', '/_matrix/client/unstable/keys/device_signing/upload', { token: alice.accessToken, body, unchecked: true });
    expect([uploaded.status, uploaded.body]).toEqual([200, {}]);
    expect((await query(alice, { [alice.userId]: [] })).body.master_keys[alice.userId]).toEqual(keys.master.object);
    const signatures = await api(server, 'POST', '/_matrix/client/unstable/keys/signatures/upload', { token: alice.accessToken, body: {}, unchecked: true });
    expect([signatures.status, signatures.body]).toEqual([200, { failures: {} }]);
  });

  it('M_INVALID_SIGNATURE for a self-signing key the master key did not sign', async () => {
    const alice = await newUser('alice');
    const master = await crossSigningKey(alice.userId, 'master');
    const stranger = await newKey();
    const selfSigning = await crossSigningKey(alice.userId, 'self_signing', stranger);
    const r = await api(server, 'POST', `${V3}/keys/device_signing/upload`, { token: alice.accessToken, body: { master_key: master.object, self_signing_key: selfSigning.object } });
    expectError(r, 400, 'M_INVALID_SIGNATURE');
  });

  it('M_MISSING_PARAM without any master key', async () => {
    const alice = await newUser('alice');
    const master = await crossSigningKey(alice.userId, 'master');
    const selfSigning = await crossSigningKey(alice.userId, 'self_signing', master);
    const r = await api(server, 'POST', `${V3}/keys/device_signing/upload`, { token: alice.accessToken, body: { self_signing_key: selfSigning.object } });
    expectError(r, 400, 'M_MISSING_PARAM');
  });

  it("M_INVALID_PARAM for another user's key or a wrong usage", async () => {
    const alice = await newUser('alice');
    const master = await crossSigningKey('@mallory:example.org', 'master');
    expectError(await api(server, 'POST', `${V3}/keys/device_signing/upload`, { token: alice.accessToken, body: { master_key: master.object } }), 400, 'M_INVALID_PARAM');
    const wrongUsage = await crossSigningKey(alice.userId, 'self_signing');
    expectError(await api(server, 'POST', `${V3}/keys/device_signing/upload`, { token: alice.accessToken, body: { master_key: wrongUsage.object } }), 400, 'M_INVALID_PARAM');
    const badKey = { user_id: alice.userId, usage: ['master'], keys: { 'ed25519:abc': 'def' } };
    expectError(await api(server, 'POST', `${V3}/keys/device_signing/upload`, { token: alice.accessToken, body: { master_key: badKey } }), 400, 'M_INVALID_PARAM');
  });

  it('M_FORBIDDEN when a public key is one of the user’s device IDs', async () => {
    const { pub } = await newKey();
    const alice = await newUser('alice');
    const session = await api(server, 'POST', `${V3}/login`, {
      body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: localpart(alice) }, password: PASSWORD, device_id: pub },
    });
    expect(session.status).toBe(200);
    const master = { user_id: alice.userId, usage: ['master'], keys: { [`ed25519:${pub}`]: pub } };
    expectError(await api(server, 'POST', `${V3}/keys/device_signing/upload`, { token: alice.accessToken, body: { master_key: master } }), 403, 'M_FORBIDDEN');
  });
});

describe('POST /keys/signatures/upload', () => {
  it('adds self-signing signatures to devices, device signatures to the master key, and keeps user-signing signatures private', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    await sharedRoom(alice, bob);
    const aliceDevice = await deviceKeys(alice);
    await upload(alice, { device_keys: aliceDevice.signed });
    const aliceKeys = await crossSigningSet(alice.userId);
    const bobKeys = await crossSigningSet(bob.userId);
    await api(server, 'POST', `${V3}/keys/device_signing/upload`, { token: alice.accessToken, body: { master_key: aliceKeys.master.object, self_signing_key: aliceKeys.selfSigning.object, user_signing_key: aliceKeys.userSigning.object } });
    await api(server, 'POST', `${V3}/keys/device_signing/upload`, { token: bob.accessToken, body: { master_key: bobKeys.master.object, self_signing_key: bobKeys.selfSigning.object } });
    const bobToken = (await sync(bob)).next_batch;
    const aliceToken = (await sync(alice)).next_batch;

    const { signatures: _s, ...bareDevice } = aliceDevice.signed;
    const deviceSigned = await signJson(bareDevice, alice.userId, `ed25519:${aliceKeys.selfSigning.pub}`, aliceKeys.selfSigning.key);
    const masterSigned = await signJson(aliceKeys.master.object, alice.userId, `ed25519:${alice.deviceId}`, aliceDevice.key);
    const bobMasterSigned = await signJson(bobKeys.master.object, alice.userId, `ed25519:${aliceKeys.userSigning.pub}`, aliceKeys.userSigning.key);
    const forged = await signJson(bareDevice, alice.userId, `ed25519:${aliceKeys.selfSigning.pub}`, (await newKey()).key);
    const r = await api(server, 'POST', `${V3}/keys/signatures/upload`, {
      token: alice.accessToken,
      body: {
        [alice.userId]: { [alice.deviceId]: deviceSigned, [aliceKeys.master.pub]: masterSigned, NOSUCHDEVICE: forged },
        [bob.userId]: { [bobKeys.master.pub]: bobMasterSigned },
      },
    });
    expect(r.status).toBe(200);
    expect(r.body.failures).toEqual({ [alice.userId]: { NOSUCHDEVICE: { errcode: 'M_NOT_FOUND', error: expect.any(String) } } });

    // Everyone sees alice's device signed by her self-signing key, and her master key signed by her device.
    const byBob = await query(bob, { [alice.userId]: [], [bob.userId]: [] });
    expect(byBob.body.device_keys[alice.userId][alice.deviceId].signatures[alice.userId]).toEqual({
      [`ed25519:${alice.deviceId}`]: aliceDevice.signed.signatures[alice.userId]![`ed25519:${alice.deviceId}`],
      [`ed25519:${aliceKeys.selfSigning.pub}`]: deviceSigned.signatures[alice.userId]![`ed25519:${aliceKeys.selfSigning.pub}`],
    });
    expect(byBob.body.master_keys[alice.userId].signatures[alice.userId][`ed25519:${alice.deviceId}`]).toBeTruthy();
    // Alice's signature of bob's master key is for alice alone.
    expect(byBob.body.master_keys[bob.userId].signatures?.[alice.userId]).toBeUndefined();
    const byAlice = await query(alice, { [bob.userId]: [] });
    expect(byAlice.body.master_keys[bob.userId].signatures[alice.userId]).toEqual(bobMasterSigned.signatures[alice.userId]);

    // Bob hears of alice's changes; alice hears of bob because she signed him.
    expect((await sync(bob, bobToken)).device_lists.changed).toEqual([alice.userId]);
    expect((await sync(alice, aliceToken)).device_lists.changed).toEqual([alice.userId, bob.userId].sort());
  });

  it('reports a bad signature and a mismatched key as failures', async () => {
    const alice = await newUser('alice');
    const aliceDevice = await deviceKeys(alice);
    await upload(alice, { device_keys: aliceDevice.signed });
    const keys = await crossSigningSet(alice.userId);
    await api(server, 'POST', `${V3}/keys/device_signing/upload`, { token: alice.accessToken, body: { master_key: keys.master.object, self_signing_key: keys.selfSigning.object } });
    const { signatures: _s, ...bareDevice } = aliceDevice.signed;
    const forged = await signJson(bareDevice, alice.userId, `ed25519:${keys.selfSigning.pub}`, (await newKey()).key);
    const mismatched = await signJson({ ...bareDevice, algorithms: ['other'] }, alice.userId, `ed25519:${keys.selfSigning.pub}`, keys.selfSigning.key);
    const r1 = await api(server, 'POST', `${V3}/keys/signatures/upload`, { token: alice.accessToken, body: { [alice.userId]: { [alice.deviceId]: forged } } });
    expect(r1.body.failures[alice.userId][alice.deviceId].errcode).toBe('M_INVALID_SIGNATURE');
    const r2 = await api(server, 'POST', `${V3}/keys/signatures/upload`, { token: alice.accessToken, body: { [alice.userId]: { [alice.deviceId]: mismatched } } });
    expect(r2.body.failures[alice.userId][alice.deviceId].errcode).toBe('M_INVALID_PARAM');
    expectError(await api(server, 'POST', `${V3}/keys/signatures/upload`, { token: alice.accessToken, body: { [alice.userId]: { X: 'not an object' } }, unchecked: true }), 400, 'M_BAD_JSON');
  });
});

describe('PUT /sendToDevice', () => {
  const send = (account: Account, type: string, txnId: string, body: unknown, unchecked = false) =>
    api(server, 'PUT', `${V3}/sendToDevice/${encodeURIComponent(type)}/${encodeURIComponent(txnId)}`, { token: account.accessToken, body, unchecked });

  it('delivers in order, to every device for *, once per transaction ID, until acknowledged', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const bob2 = await login(localpart(bob));
    const bobToken = (await sync(bob)).next_batch;
    const bob2Token = (await sync(bob2)).next_batch;

    expect((await send(alice, 'm.test', 't1', { messages: { [bob.userId]: { [bob.deviceId]: { n: 1 } } } })).status).toBe(200);
    expect((await send(alice, 'm.test', 't1', { messages: { [bob.userId]: { [bob.deviceId]: { n: 1 } } } })).status).toBe(200);
    await send(alice, 'm.test', 't2', { messages: { [bob.userId]: { '*': { n: 2 } } } });
    await send(alice, 'm.other', 't3', { messages: { [bob.userId]: { [bob.deviceId]: { n: 3 }, NOSUCHDEVICE: { n: 0 } } } });

    const first = await sync(bob, bobToken);
    expect(first.to_device.events).toEqual([
      { sender: alice.userId, type: 'm.test', content: { n: 1 } },
      { sender: alice.userId, type: 'm.test', content: { n: 2 } },
      { sender: alice.userId, type: 'm.other', content: { n: 3 } },
    ]);
    expect((await sync(bob2, bob2Token)).to_device.events).toEqual([{ sender: alice.userId, type: 'm.test', content: { n: 2 } }]);

    // A retry from the same token gets them again; syncing on from the new token acknowledges them.
    expect((await sync(bob, bobToken)).to_device.events).toHaveLength(3);
    const again = await sync(bob, bobToken);
    const next = await sync(bob, again.next_batch);
    expect(next.to_device.events).toEqual([]);
    expect(await server.homeserver.services.keys.toDevice.pending(bob.userId, bob.deviceId)).toBe(0);
    expect((await sync(bob, bobToken)).to_device.events).toEqual([]);
  });

  it('a long-poll that times out still acknowledges', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    await send(alice, 'm.test', 'a1', { messages: { [bob.userId]: { [bob.deviceId]: { n: 1 } } } });
    const first = await sync(bob);
    expect(first.to_device.events).toHaveLength(1);
    const idle = await sync(bob, first.next_batch, 300);
    expect(idle.to_device.events).toEqual([]);
    expect(await server.homeserver.services.keys.toDevice.pending(bob.userId, bob.deviceId)).toBe(0);
  });

  it('wakes the recipient’s waiting /sync', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const token = (await sync(bob)).next_batch;
    const listening = nextLongPoll(server);
    const waiting = sync(bob, token, UNTIL_WOKEN_MS);
    await listening;
    await send(alice, 'm.ping', 'p1', { messages: { [bob.userId]: { [bob.deviceId]: { hi: true } } } });
    expect((await waiting).to_device.events).toEqual([{ sender: alice.userId, type: 'm.ping', content: { hi: true } }]);
  });

  it('M_BAD_JSON for a bad body, M_INVALID_PARAM for a bad user ID', async () => {
    const alice = await newUser('alice');
    expectError(await send(alice, 'm.test', 'b1', {}, true), 400, 'M_BAD_JSON');
    expectError(await send(alice, 'm.test', 'b2', { messages: { [alice.userId]: { DEV: 'text' } } }, true), 400, 'M_BAD_JSON');
    expectError(await send(alice, 'm.test', 'b3', { messages: { 'not-a-user': { DEV: {} } } }, true), 400, 'M_INVALID_PARAM');
    const notJson = await api(server, 'PUT', `${V3}/sendToDevice/m.test/b4`, { token: alice.accessToken, rawBody: '{', headers: { 'content-type': 'application/json' }, unchecked: true });
    expectError(notJson, 400, 'M_NOT_JSON');
  });

  it('drops the messages of a deleted device', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const bob2 = await login(localpart(bob));
    await send(alice, 'm.test', 'd1', { messages: { [bob.userId]: { [bob2.deviceId]: { n: 1 } } } });
    expect(await server.homeserver.services.keys.toDevice.pending(bob.userId, bob2.deviceId)).toBe(1);
    await api(server, 'POST', `${V3}/logout`, { token: bob2.accessToken, body: {} });
    expect(await server.homeserver.services.keys.toDevice.pending(bob.userId, bob2.deviceId)).toBe(0);
  });
});

describe('key backup', () => {
  const authData = { public_key: 'abcdefg', signatures: {} };
  const algorithm = 'm.megolm_backup.v1.curve25519-aes-sha2';
  const data = (index: number, verified = false, forwarded = 0) => ({
    first_message_index: index, forwarded_count: forwarded, is_verified: verified, session_data: { ciphertext: `c${index}` },
  });

  it('creates, reads, updates and deletes versions', async () => {
    const alice = await newUser('alice');
    expectError(await api(server, 'GET', `${V3}/room_keys/version`, { token: alice.accessToken }), 404, 'M_NOT_FOUND');
    const created = await api(server, 'POST', `${V3}/room_keys/version`, { token: alice.accessToken, body: { algorithm, auth_data: authData } });
    expect(created.body).toEqual({ version: '1' });
    const current = await api(server, 'GET', `${V3}/room_keys/version`, { token: alice.accessToken });
    expect(current.body).toEqual({ algorithm, auth_data: authData, count: 0, etag: '0', version: '1' });
    const updated = await api(server, 'PUT', `${V3}/room_keys/version/1`, { token: alice.accessToken, body: { algorithm, auth_data: { ...authData, public_key: 'new' } } });
    expect(updated.status).toBe(200);
    expect((await api(server, 'GET', `${V3}/room_keys/version/1`, { token: alice.accessToken })).body.auth_data.public_key).toBe('new');
    expectError(await api(server, 'PUT', `${V3}/room_keys/version/1`, { token: alice.accessToken, body: { algorithm, auth_data: authData, version: '2' } }), 400, 'M_INVALID_PARAM');
    expectError(await api(server, 'PUT', `${V3}/room_keys/version/1`, { token: alice.accessToken, body: { algorithm: 'm.other', auth_data: authData }, unchecked: true }), 400, 'M_INVALID_PARAM');
    expectError(await api(server, 'PUT', `${V3}/room_keys/version/9`, { token: alice.accessToken, body: { algorithm, auth_data: authData } }), 404, 'M_NOT_FOUND');
    expect((await api(server, 'DELETE', `${V3}/room_keys/version/1`, { token: alice.accessToken })).status).toBe(200);
    expect((await api(server, 'DELETE', `${V3}/room_keys/version/1`, { token: alice.accessToken })).status).toBe(200);
    expectError(await api(server, 'DELETE', `${V3}/room_keys/version/7`, { token: alice.accessToken }), 404, 'M_NOT_FOUND');
    expectError(await api(server, 'GET', `${V3}/room_keys/version/1`, { token: alice.accessToken }), 404, 'M_NOT_FOUND');
    // Numbers are not reused.
    expect((await api(server, 'POST', `${V3}/room_keys/version`, { token: alice.accessToken, body: { algorithm, auth_data: authData } })).body.version).toBe('2');
  });

  it('takes auth_data with any public_key string, as other servers do: the server never reads it (issue 24, client behaviour 9)', async () => {
    const alice = await newUser('alice');
    for (const public_key of ['', 'not base64!', 'hdx|KJ2sk', 'x'.repeat(300), '🔑']) {
      const auth_data = { public_key, signatures: { [alice.userId]: { 'ed25519:ABC': 'not a signature either' } } };
      const created = await api(server, 'POST', `${V3}/room_keys/version`, { token: alice.accessToken, body: { algorithm, auth_data } });
      expect(created.status, public_key).toBe(200);
      expect((await api(server, 'GET', `${V3}/room_keys/version/${created.body.version}`, { token: alice.accessToken })).body.auth_data).toEqual(auth_data);
      const updated = await api(server, 'PUT', `${V3}/room_keys/version/${created.body.version}`, { token: alice.accessToken, body: { algorithm, auth_data: { ...auth_data, public_key: `${public_key}!` } } });
      expect(updated.status, public_key).toBe(200);
    }
  });

  it('keeps auth_data as given, any JSON as Synapse takes it (a string, as the suites send), through more than ten versions, the newest current (issue 41)', async () => {
    const alice = await newUser('alice');
    const given: unknown[] = [{ public_key: 'k', signatures: {}, 'org.example.extra': [1, { deep: true }] }, 'anopaquestring', ['a', 1], 7, null];
    const versions: string[] = [];
    for (let i = 0; i < 12; i++) {
      const auth_data = given[i % given.length];
      // The spec says an object and names one algorithm: these are checked by hand, not against its schema.
      const unchecked = true;
      const created = await api(server, 'POST', `${V3}/room_keys/version`, { token: alice.accessToken, body: { algorithm: 'm.megolm_backup.v1', auth_data }, unchecked });
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      versions.push(created.body.version);
      const current = await api(server, 'GET', `${V3}/room_keys/version`, { token: alice.accessToken, unchecked });
      expect(current.body).toEqual({ algorithm: 'm.megolm_backup.v1', auth_data, count: 0, etag: '0', version: created.body.version });
    }
    expect(new Set(versions).size).toBe(12);
    expect(versions.map(Number)).toEqual([...versions.map(Number)].sort((x, y) => x - y));
    // Version 10 onwards compare as numbers, not as text: 12 is newer than 9.
    expect((await api(server, 'GET', `${V3}/room_keys/version/${versions[8]}`, { token: alice.accessToken, unchecked: true })).body.auth_data).toEqual(given[8 % given.length]);
    const updated = await api(server, 'PUT', `${V3}/room_keys/version/${versions[11]}`, { token: alice.accessToken, body: { algorithm: 'm.megolm_backup.v1', auth_data: 'replaced' }, unchecked: true });
    expect(updated.status).toBe(200);
    expect((await api(server, 'GET', `${V3}/room_keys/version`, { token: alice.accessToken, unchecked: true })).body.auth_data).toBe('replaced');
    // Deleting the newest makes the one before current.
    expect((await api(server, 'DELETE', `${V3}/room_keys/version/${versions[11]}`, { token: alice.accessToken })).status).toBe(200);
    expect((await api(server, 'GET', `${V3}/room_keys/version`, { token: alice.accessToken, unchecked: true })).body.version).toBe(versions[10]);
    // Still refused: no algorithm, or one that is not a string.
    for (const body of [{ auth_data: {} }, { algorithm: 5, auth_data: {} }]) {
      expectError(await api(server, 'POST', `${V3}/room_keys/version`, { token: alice.accessToken, body, unchecked: true }), 400, 'M_BAD_JSON');
    }
  });

  it('stores keys in the current version, keeping the better key, with etag and count', async () => {
    const alice = await newUser('alice');
    const room = '!room:example.org';
    await api(server, 'POST', `${V3}/room_keys/version`, { token: alice.accessToken, body: { algorithm, auth_data: authData } });
    const put1 = await api(server, 'PUT', `${V3}/room_keys/keys?version=1`, { token: alice.accessToken, body: { rooms: { [room]: { sessions: { s1: data(5), s2: data(0) } } } } });
    expect(put1.body).toEqual({ etag: '1', count: 2 });
    // Worse (higher index) is ignored; verified wins; then lower index.
    const worse = await api(server, 'PUT', `${V3}/room_keys/keys/${encodeURIComponent(room)}/s1?version=1`, { token: alice.accessToken, body: data(9) });
    expect(worse.body).toEqual({ etag: '1', count: 2 });
    await api(server, 'PUT', `${V3}/room_keys/keys/${encodeURIComponent(room)}/s1?version=1`, { token: alice.accessToken, body: data(7, true) });
    await api(server, 'PUT', `${V3}/room_keys/keys/${encodeURIComponent(room)}?version=1`, { token: alice.accessToken, body: { sessions: { s1: data(1) } } });
    const s1 = await api(server, 'GET', `${V3}/room_keys/keys/${encodeURIComponent(room)}/s1?version=1`, { token: alice.accessToken });
    expect(s1.body).toEqual(data(7, true));
    expect((await api(server, 'GET', `${V3}/room_keys/keys/${encodeURIComponent(room)}?version=1`, { token: alice.accessToken })).body.sessions.s2).toEqual(data(0));
    expect((await api(server, 'GET', `${V3}/room_keys/keys/${encodeURIComponent('!other:example.org')}?version=1`, { token: alice.accessToken })).body).toEqual({ sessions: {} });
    expectError(await api(server, 'GET', `${V3}/room_keys/keys/${encodeURIComponent(room)}/nope?version=1`, { token: alice.accessToken }), 404, 'M_NOT_FOUND');

    // A newer version makes version 1 read-only.
    await api(server, 'POST', `${V3}/room_keys/version`, { token: alice.accessToken, body: { algorithm, auth_data: authData } });
    const stale = await api(server, 'PUT', `${V3}/room_keys/keys?version=1`, { token: alice.accessToken, body: { rooms: {} } });
    expectError(stale, 403, 'M_WRONG_ROOM_KEYS_VERSION');
    expect(stale.body.current_version).toBe('2');
    expectError(await api(server, 'PUT', `${V3}/room_keys/keys`, { token: alice.accessToken, body: { rooms: {} }, unchecked: true }), 400, 'M_MISSING_PARAM');
    expectError(await api(server, 'GET', `${V3}/room_keys/keys?version=9`, { token: alice.accessToken }), 404, 'M_NOT_FOUND');
    expectError(await api(server, 'PUT', `${V3}/room_keys/keys/${encodeURIComponent(room)}/s1?version=2`, { token: alice.accessToken, body: { first_message_index: -1 }, unchecked: true }), 400, 'M_BAD_JSON');

    const deleted = await api(server, 'DELETE', `${V3}/room_keys/keys/${encodeURIComponent(room)}/s2?version=1`, { token: alice.accessToken });
    expect(deleted.body).toEqual({ etag: '3', count: 1 });
    expect((await api(server, 'DELETE', `${V3}/room_keys/keys?version=1`, { token: alice.accessToken })).body.count).toBe(0);
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 17).
describe('device keys', () => {
  const { createRoom, join, leave, sync } = clientCalls(() => server);
  it('/keys/upload takes key strings as opaque once the structure is right; /keys/query returns them; changes and leaves reach /sync and /keys/changes', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await join(bob, roomId);
    const since = (await sync(alice)).next_batch;
    const deviceKeys = {
      user_id: bob.userId, device_id: bob.deviceId, algorithms: ['m.olm.v1.curve25519-aes-sha2', 'm.megolm.v1.aes-sha2'],
      keys: { [`curve25519:${bob.deviceId}`]: 'an opaque curve key', [`ed25519:${bob.deviceId}`]: 'an opaque ed25519 key' },
      signatures: { [bob.userId]: { [`ed25519:${bob.deviceId}`]: 'an opaque signature' } },
    };
    const upload = await api(server, 'POST', `${V3}/keys/upload`, { token: bob.accessToken, body: { device_keys: deviceKeys } });
    expect(upload.status).toBe(200);
    const query = await api(server, 'POST', `${V3}/keys/query`, { token: alice.accessToken, body: { device_keys: { [bob.userId]: [] } } });
    expect(query.body.device_keys[bob.userId][bob.deviceId]).toMatchObject(deviceKeys);
    const changed = await sync(alice, { since });
    expect(changed.device_lists.changed).toContain(bob.userId);
    expect((await api(server, 'GET', `${V3}/keys/changes?from=${since}&to=${changed.next_batch}`, { token: alice.accessToken })).body.changed).toContain(bob.userId);

    // The structure is still checked.
    const otherUser = await api(server, 'POST', `${V3}/keys/upload`, { token: bob.accessToken, body: { device_keys: { ...deviceKeys, user_id: alice.userId } } });
    expect(otherUser.status).toBe(400);
    const otherDevice = await api(server, 'POST', `${V3}/keys/upload`, { token: bob.accessToken, body: { device_keys: { ...deviceKeys, device_id: 'NOTMINE' } } });
    expect(otherDevice.status).toBe(400);
    const wrongType = await api(server, 'POST', `${V3}/keys/upload`, { token: bob.accessToken, body: { device_keys: { ...deviceKeys, keys: { [`ed25519:${bob.deviceId}`]: 5 } } }, unchecked: true });
    expect([wrongType.status, wrongType.body.errcode]).toEqual([400, 'M_BAD_JSON']);

    // Bob leaves: alice no longer shares a room with him, and hears so.
    await leave(bob, roomId);
    const gone = await sync(alice, { since: changed.next_batch });
    expect(gone.device_lists.left).toContain(bob.userId);
    expect((await api(server, 'GET', `${V3}/keys/changes?from=${changed.next_batch}&to=${gone.next_batch}`, { token: alice.accessToken })).body.left).toContain(bob.userId);
  });
});
