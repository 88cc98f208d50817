import { afterEach, describe, expect, it } from 'vitest';
import { signJson } from '../../src/crypto/signing.ts';
import { crossSigningSet, deviceKeys } from '../support/e2ee-keys.ts';
import { federatedServers, sharedRoom, syncUntil, type FederatedServer } from '../support/federated-homeservers.ts';

// Keys of users on another server, through the client API of real homeservers
// federating in one process: what /keys/query says of them, and signing them.

let close: () => Promise<void> = async () => {};
afterEach(async () => close());

const V3 = '/_matrix/client/v3';

describe('keys of users on other servers', () => {
  it("serves a remote user's devices and cross-signing keys, and keeps a local user's signature of their master key for that user alone", async () => {
    const net = await federatedServers(2);
    close = net.close;
    const [a, b] = net.servers as [FederatedServer, FederatedServer];
    const [alice, bob] = [await a.register('alice'), await b.register('bob')];
    const carol = await a.register('carol');
    const roomId = await sharedRoom(a, alice, [[b, bob]]);
    await a.api('POST', `${V3}/rooms/${encodeURIComponent(roomId)}/invite`, { token: alice.accessToken, body: { user_id: carol.userId } });
    await a.api('POST', `${V3}/join/${encodeURIComponent(roomId)}`, { token: carol.accessToken, body: {} });

    const bobDevice = await deviceKeys(bob);
    expect((await b.api('POST', `${V3}/keys/upload`, { token: bob.accessToken, body: { device_keys: bobDevice.signed } })).status).toBe(200);
    const bobKeys = await crossSigningSet(bob.userId);
    expect((await b.api('POST', `${V3}/keys/device_signing/upload`, { token: bob.accessToken, body: { master_key: bobKeys.master.object, self_signing_key: bobKeys.selfSigning.object } })).status).toBe(200);
    const aliceKeys = await crossSigningSet(alice.userId);
    await a.api('POST', `${V3}/keys/device_signing/upload`, { token: alice.accessToken, body: { master_key: aliceKeys.master.object, self_signing_key: aliceKeys.selfSigning.object, user_signing_key: aliceKeys.userSigning.object } });

    const query = async (who: typeof alice) => (await a.api('POST', `${V3}/keys/query`, { token: who.accessToken, body: { device_keys: { [bob.userId]: [] } } })).body;
    const seen = await query(alice);
    expect(Object.keys(seen.device_keys[bob.userId])).toEqual([bob.deviceId]);
    expect(seen.master_keys[bob.userId].keys).toEqual(bobKeys.master.object.keys);
    expect(seen.failures).toEqual({});

    const signed = await signJson(bobKeys.master.object, alice.userId, `ed25519:${aliceKeys.userSigning.pub}`, aliceKeys.userSigning.key);
    const upload = await a.api('POST', `${V3}/keys/signatures/upload`, { token: alice.accessToken, body: { [bob.userId]: { [bobKeys.master.pub]: signed } } });
    expect(upload.body.failures).toEqual({});
    expect((await query(alice)).master_keys[bob.userId].signatures[alice.userId]).toEqual(signed.signatures[alice.userId]);
    expect((await query(carol)).master_keys[bob.userId].signatures?.[alice.userId]).toBeUndefined();

    // A new device of bob's reaches alice's /sync and /keys/query without her asking B.
    const since = (await a.api('GET', `${V3}/sync`, { token: alice.accessToken })).body.next_batch;
    const second = await b.homeserver.services.users.createSession(bob.userId, 'SECOND', 'phone');
    await b.api('POST', `${V3}/keys/upload`, { token: second.accessToken, body: { device_keys: (await deviceKeys({ userId: bob.userId, deviceId: 'SECOND' })).signed } });
    // The login and the key upload are two updates: each wakes her /sync; the second brings the keys.
    let token = since;
    for (let round = 0; round < 2; round++) {
      token = (await syncUntil(a, alice, (s) => s.device_lists?.changed?.includes(bob.userId), token)).next_batch;
      if (Object.keys((await query(alice)).device_keys[bob.userId]).includes('SECOND')) break;
    }
    expect(Object.keys((await query(alice)).device_keys[bob.userId]).sort()).toEqual([bob.deviceId, 'SECOND'].sort());
  });
});
