import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';
import { sdk, startClient } from './sdk.ts';

// End-to-end encryption on one server, driven by matrix-js-sdk with its Rust crypto
// stack: Olm sessions, Megolm room keys over to-device messages, device lists that
// follow logins and deletions, and cross-signing.

const PASSWORD = 'correct horse battery staple';

interface SentRequest {
  method: string;
  url: string;
  body: string | undefined;
}

/** A fetch that remembers what the client sent. */
function recordingFetch(log: SentRequest[]): typeof fetch {
  return async (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    log.push({ method: init?.method ?? 'GET', url, body: typeof init?.body === 'string' ? init.body : undefined });
    return fetch(input, init);
  };
}

/** Polls until `check` returns a truthy value. */
async function eventually<T>(check: () => Promise<T | undefined | false> | T | undefined | false, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const decryptedBodies = (client: sdk.MatrixClient, roomId: string): string[] =>
  client
    .getRoom(roomId)
    ?.getLiveTimeline()
    .getEvents()
    .filter((e) => e.getType() === 'm.room.message' && e.isEncrypted() && !e.isDecryptionFailure())
    .map((e) => e.getContent()['body'] as string) ?? [];

async function login(server: TestServer, username: string): Promise<Account> {
  const r = await api(server, 'POST', '/_matrix/client/v3/login', {
    body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: username }, password: PASSWORD },
  });
  expect(r.status).toBe(200);
  return { userId: r.body.user_id, accessToken: r.body.access_token, deviceId: r.body.device_id };
}

async function knownDevices(client: sdk.MatrixClient, userId: string): Promise<string[]> {
  const devices = (await client.getCrypto()!.getUserDeviceInfo([userId])).get(userId);
  return [...(devices?.keys() ?? [])].sort();
}

let server: TestServer;
let alice: Account;
let bob: Account;
let aliceClient: sdk.MatrixClient;
let bobClient: sdk.MatrixClient;
let bob2Client: sdk.MatrixClient | undefined;
const aliceRequests: SentRequest[] = [];
let roomId: string;

beforeAll(async () => {
  server = await startTestServer();
  alice = await register(server, 'alice', PASSWORD);
  bob = await register(server, 'bob', PASSWORD);
  aliceClient = await startClient(server.url, alice, { crypto: true, fetchFn: recordingFetch(aliceRequests) });
  bobClient = await startClient(server.url, bob, { crypto: true });
  // The encrypted room every case below uses, made here so each case runs alone.
  ({ room_id: roomId } = await aliceClient.createRoom({
    preset: sdk.Preset.PrivateChat,
    invite: [bob.userId],
    initial_state: [{ type: 'm.room.encryption', state_key: '', content: { algorithm: 'm.megolm.v1.aes-sha2' } }],
  }));
  await eventually(() => bobClient.getRoom(roomId)?.getMyMembership() === 'invite', 'the invite');
  await bobClient.joinRoom(roomId);
  await eventually(() => aliceClient.getRoom(roomId)?.getMember(bob.userId)?.membership === 'join', 'bob joining');
  await eventually(() => aliceClient.getRoom(roomId)?.hasEncryptionStateEvent(), 'the room to be encrypted at alice');
});

afterAll(async () => {
  aliceClient?.stopClient();
  bobClient?.stopClient();
  bob2Client?.stopClient();
  await server?.close();
});

describe('encrypted room on one server', () => {
  it('bob decrypts a message alice sends to an encrypted room', async () => {
    await aliceClient.sendTextMessage(roomId, 'hello bob');
    await eventually(() => decryptedBodies(bobClient, roomId).includes('hello bob'), 'bob decrypting');
    // What the server stored is ciphertext.
    const stored = await api(server, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=5`, { token: bob.accessToken });
    const sent = stored.body.chunk.find((e: { type: string }) => e.type === 'm.room.encrypted');
    expect(sent.content.algorithm).toBe('m.megolm.v1.aes-sha2');
    expect(JSON.stringify(stored.body)).not.toContain('hello bob');
  });

  // Bob's second device, which the first case here gets a message on and the second deletes: made
  // once, here, so either case runs alone.
  describe("bob's second device", () => {
    let bob2: Account;
    beforeAll(async () => {
      bob2 = await login(server, 'bob');
      bob2Client = await startClient(server.url, bob2, { crypto: true });
      await eventually(async () => (await knownDevices(aliceClient, bob.userId)).includes(bob2.deviceId), "alice learning bob's new device");
    });

    it("bob's new device decrypts the next message", async () => {
      // The login and the key upload reach alice as device list changes.
      await eventually(async () => (await knownDevices(aliceClient, bob.userId)).includes(bob2.deviceId), "alice learning bob's new device");

      await aliceClient.sendTextMessage(roomId, 'for both of your devices');
      await eventually(() => decryptedBodies(bob2Client!, roomId).includes('for both of your devices'), "bob's new device decrypting");
      await eventually(() => decryptedBodies(bobClient, roomId).includes('for both of your devices'), "bob's first device decrypting");
    });

    it('alice stops encrypting to a device bob deleted', async () => {
      const bob2DeviceId = bob2Client!.getDeviceId()!;
      await bobClient.deleteDevice(bob2DeviceId, {
        type: 'm.login.password',
        identifier: { type: 'm.id.user', user: bob.userId },
        password: PASSWORD,
      } as never);
      bob2Client!.stopClient();
      await eventually(async () => !(await knownDevices(aliceClient, bob.userId)).includes(bob2DeviceId), 'alice forgetting the deleted device');
      expect(await knownDevices(aliceClient, bob.userId)).toEqual([bob.deviceId]);

      // A new Megolm session goes, over to-device messages, to bob's remaining device only.
      aliceRequests.length = 0;
      await aliceClient.getCrypto()!.forceDiscardSession(roomId);
      await aliceClient.sendTextMessage(roomId, 'after the deletion');
      await eventually(() => decryptedBodies(bobClient, roomId).includes('after the deletion'), 'bob decrypting after the deletion');
      const toDevice = aliceRequests.filter((r) => r.method === 'PUT' && r.url.includes('/sendToDevice/m.room.encrypted/'));
      const bobTargets = toDevice.flatMap((r) => Object.keys((JSON.parse(r.body!) as { messages: Record<string, object> }).messages[bob.userId] ?? {}));
      expect(bobTargets).toContain(bob.deviceId);
      expect(bobTargets).not.toContain(bob2DeviceId);

      // The deleted device's keys are gone from the server.
      const query = await api(server, 'POST', '/_matrix/client/v3/keys/query', { token: alice.accessToken, body: { device_keys: { [bob.userId]: [] } } });
      expect(Object.keys(query.body.device_keys[bob.userId])).toEqual([bob.deviceId]);
    });
  });
});

describe('cross-signing', () => {
  const uia = (account: Account, log: number[]) => async (makeRequest: (auth: Record<string, unknown> | null) => Promise<unknown>) => {
    let session: string | undefined;
    try {
      await makeRequest(null);
      return;
    } catch (error) {
      const e = error as { httpStatus?: number; data?: { session?: string } };
      if (e.httpStatus !== 401) throw error;
      log.push(401);
      session = e.data?.session;
    }
    await makeRequest({ type: 'm.login.password', identifier: { type: 'm.id.user', user: account.userId }, password: PASSWORD, session });
  };

  it('bootstraps cross-signing, and a reset needs the password', async () => {
    const crypto = aliceClient.getCrypto()!;
    const challenges: number[] = [];
    await crypto.bootstrapCrossSigning({ authUploadDeviceSigningKeys: uia(alice, challenges) as never });
    // First-time setup needs no user-interactive auth.
    expect(challenges).toEqual([]);
    const status = await crypto.getCrossSigningStatus();
    expect(status.publicKeysOnDevice).toBe(true);
    expect(status.privateKeysCachedLocally).toEqual({ masterKey: true, selfSigningKey: true, userSigningKey: true });
    await eventually(async () => (await crypto.getDeviceVerificationStatus(alice.userId, alice.deviceId))?.crossSigningVerified, "alice's device cross-signed");

    // Bob sees alice's master and self-signing keys, and her device signed by the latter; not her user-signing key.
    const seen = await api(server, 'POST', '/_matrix/client/v3/keys/query', { token: bob.accessToken, body: { device_keys: { [alice.userId]: [] } } });
    const master = seen.body.master_keys[alice.userId];
    const selfSigning = seen.body.self_signing_keys[alice.userId];
    expect(master.usage).toEqual(['master']);
    expect(seen.body.user_signing_keys?.[alice.userId]).toBeUndefined();
    const selfSigningKeyId = Object.keys(selfSigning.keys)[0]!;
    expect(seen.body.device_keys[alice.userId][alice.deviceId].signatures[alice.userId][selfSigningKeyId]).toBeTruthy();
    const own = await api(server, 'POST', '/_matrix/client/v3/keys/query', { token: alice.accessToken, body: { device_keys: { [alice.userId]: [] } } });
    expect(own.body.user_signing_keys[alice.userId].usage).toEqual(['user_signing']);

    // Bob's client learns alice's identity.
    await eventually(async () => (await bobClient.getCrypto()!.getUserVerificationStatus(alice.userId)) !== undefined, "alice's identity at bob");

    // Replacing the keys asks for the password.
    await crypto.bootstrapCrossSigning({ setupNewCrossSigning: true, authUploadDeviceSigningKeys: uia(alice, challenges) as never });
    expect(challenges).toEqual([401]);
    const after = await api(server, 'POST', '/_matrix/client/v3/keys/query', { token: bob.accessToken, body: { device_keys: { [alice.userId]: [] } } });
    expect(after.body.master_keys[alice.userId].keys).not.toEqual(master.keys);
  });
});

describe('key backup', () => {
  it('creates a backup the client then fills', async () => {
    // A room key alice holds, whichever cases ran before.
    await aliceClient.sendTextMessage(roomId, 'a room key for the backup');
    const crypto = aliceClient.getCrypto()!;
    await crypto.resetKeyBackup();
    const version = await api(server, 'GET', '/_matrix/client/v3/room_keys/version', { token: alice.accessToken });
    expect(version.status).toBe(200);
    expect(version.body.algorithm).toBe('m.megolm_backup.v1.curve25519-aes-sha2');
    await eventually(async () => {
      const v = await api(server, 'GET', `/_matrix/client/v3/room_keys/version/${version.body.version}`, { token: alice.accessToken });
      return v.body.count > 0;
    }, 'room keys in the backup');
    const keys = await api(server, 'GET', `/_matrix/client/v3/room_keys/keys?version=${version.body.version}`, { token: alice.accessToken });
    expect(Object.keys(keys.body.rooms)).toContain(roomId);
  });
});
