import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signJson } from '../../src/crypto/signing.ts';
import { crossSigningSet, deviceKeys } from '../support/e2ee-keys.ts';
import { spawnHearth, stopAllHearths } from '../support/hearth-process.ts';
import { createTestTls, spawnHttpsHearth, type TestTls } from '../support/https-hosts.ts';
import { httpSyncer, longPollUntil, type SyncBody } from '../support/sync-until.ts';
import { api, type Account } from './harness.ts';

// Device lists between two Hearth hosts, each `npm run serve` in a process of its own, over
// libp2p and over HTTPS with DNS names (issue 34): the cases an independent conformance suite
// runs with a user on each of two servers of the same implementation, in its order of steps.
// The same cases against a remote that is not Hearth are in device-lists-remote.test.ts.

const PASSWORD = 'correct horse battery staple';
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;

interface Host {
  url: string;
  fetch?: typeof fetch;
}

const transports: [string, () => Promise<{ a: Host; b: Host; close(): Promise<void> }>][] = [
  ['libp2p', async () => {
    const dirs = await Promise.all([mkdtemp(join(tmpdir(), 'hearth-dl2-a-')), mkdtemp(join(tmpdir(), 'hearth-dl2-b-'))]);
    const a = await spawnHearth({ dataDir: dirs[0] });
    const b = await spawnHearth({ dataDir: dirs[1], bootstrap: a.multiaddrs });
    return {
      a, b,
      close: async () => {
        await Promise.all([a.stop(), b.stop()]);
        for (const dir of dirs) await rm(dir, { recursive: true, force: true, maxRetries: 5 });
      },
    };
  }],
  ['HTTPS', async () => {
    const tls: TestTls = await createTestTls();
    const [a, b] = await Promise.all([spawnHttpsHearth(tls), spawnHttpsHearth(tls)]);
    return {
      a, b,
      close: async () => {
        await Promise.all([a.close(), b.close()]);
        await tls.dispose();
      },
    };
  }],
];

describe.each(transports)('device lists between two Hearth hosts over %s', (_transport, start) => {
  let a: Host;
  let b: Host;
  let close: () => Promise<void>;
  let count = 0;

  beforeAll(async () => {
    ({ a, b, close } = await start());
  });
  afterAll(async () => {
    await close?.();
    await stopAllHearths();
  });

  interface User extends Account {
    host: Host;
    /** The last next_batch this user's syncs reached (the conformance suite's "sync again"). */
    since?: string;
  }

  async function user(host: Host, name: string): Promise<User> {
    const r = await api(host, 'POST', `${V3}/register`, { body: { username: `${name}${++count}`, password: PASSWORD, auth: { type: 'm.login.dummy' } } });
    expect(r.status).toBe(200);
    return { host, userId: r.body.user_id, accessToken: r.body.access_token, deviceId: r.body.device_id };
  }
  const call = async (u: User, method: string, path: string, body?: unknown) => {
    const r = await api(u.host, method, path, { token: u.accessToken, ...(body === undefined ? {} : { body }) });
    expect(r.status, `${method} ${path}: ${JSON.stringify(r.body)}`).toBe(200);
    return r.body;
  };
  /** Syncs on from the user's last token (an initial sync when there is none) until `done` holds. */
  const syncUntil = (u: User, done: (body: SyncBody) => boolean): Promise<SyncBody> =>
    longPollUntil(httpSyncer(u.host, u.accessToken, 5_000), (b) => ((u.since = b.next_batch), done(b)), { since: u.since, who: u.userId });
  const changed = (body: SyncBody): string[] => body['device_lists']?.changed ?? [];
  const untilInChanged = (u: User, other: User) => syncUntil(u, (body) => changed(body).includes(other.userId));
  const createRoom = async (u: User, body: Record<string, unknown> = {}) => (await call(u, 'POST', `${V3}/createRoom`, body)).room_id as string;
  const invite = (u: User, roomId: string, other: User) => call(u, 'POST', `${V3}/rooms/${enc(roomId)}/invite`, { user_id: other.userId });
  const joinRoom = (u: User, roomId: string) => call(u, 'POST', `${V3}/join/${enc(roomId)}`, {});
  const leave = (u: User, roomId: string) => call(u, 'POST', `${V3}/rooms/${enc(roomId)}/leave`, {});
  /** Waits until the user's server holds the user's membership as `membership` (a remote event arrived). */
  const untilMembership = (u: User, roomId: string, who: User, membership: string) =>
    syncUntil(u, (body) => [...(body.rooms?.join?.[roomId]?.timeline?.events ?? []), ...(body.rooms?.invite?.[roomId]?.invite_state?.events ?? [])]
      .some((e: any) => e.type === 'm.room.member' && e.state_key === who.userId && e.content?.membership === membership));
  /** Keys as the conformance suite uploads them: made-up keys, no signatures, and a one-time key. */
  const putKeys = (u: User, keys: Record<string, string>) => call(u, 'POST', `${V3}/keys/upload`, {
    device_keys: { user_id: u.userId, device_id: u.deviceId, algorithms: ['m.olm.v1.curve25519-aes-sha2', 'm.megolm.v1.aes-sha2'], keys, signatures: {} },
    one_time_keys: { 'ed25519:test': 'xnuozvb3VBxu2hr9Wc5Xe5pj7hbqyr7djaCANodTRAk' },
  });
  const queryKeys = (u: User, other: User) => call(u, 'POST', `${V3}/keys/query`, { device_keys: { [other.userId]: [] } });
  /** /keys/query until its answer for `other` satisfies `done`, syncing to the next change of theirs in between. */
  const untilKeys = async (u: User, other: User, done: (answer: any) => boolean): Promise<any> => {
    for (;;) {
      const answer = await queryKeys(u, other);
      if (done(answer)) return answer;
      await untilInChanged(u, other);
    }
  };

  it('a remote user who leaves the only room we shared: their later key change never shows as changed, the other remote user\'s does', async () => {
    const creator = await user(a, 'creator');
    const leaver = await user(b, 'leaver');
    const remote2 = await user(b, 'remote');
    const roomId = await createRoom(creator);
    await syncUntil(creator, () => true);
    for (const remote of [leaver, remote2]) {
      await invite(creator, roomId, remote);
      await untilMembership(remote, roomId, remote, 'invite');
      await joinRoom(remote, roomId);
    }
    await untilInChanged(creator, leaver);
    await putKeys(remote2, { [`ed25519:${remote2.deviceId}`]: 'aI2BUUeIQ0Y8T7Tv7jJh2ADagpoWdtHf4XipFPvjXI8' });
    await putKeys(leaver, { [`ed25519:${leaver.deviceId}`]: 'j9eIBhARnZg5vhKzp8zm1A6up1LmSiDoXuDqTTIvkcI' });
    await untilKeys(creator, leaver, (answer) => answer.device_keys[leaver.userId]?.[leaver.deviceId]?.keys[`ed25519:${leaver.deviceId}`] === 'j9eIBhARnZg5vhKzp8zm1A6up1LmSiDoXuDqTTIvkcI');

    await leave(leaver, roomId);
    await untilMembership(creator, roomId, leaver, 'leave');
    await putKeys(leaver, { [`ed25519:${leaver.deviceId}`]: '2NNgAXoqO06lZc3FOOKj76daZT8CmbHmmJKr29Jv85g' });
    await putKeys(remote2, { [`ed25519:${remote2.deviceId}`]: 'c3op6BJi8aUnDGA541Q6TbTPmbiy1GqGv-zzXDQM9Us' });
    await syncUntil(creator, (body) => {
      expect(changed(body)).not.toContain(leaver.userId);
      return changed(body).includes(remote2.userId);
    });
  });

  it('a local user leaves, a remote user changes a device, the local user rejoins: /sync and /keys/changes show the remote user, /keys/query the new keys', async () => {
    const creator = await user(a, 'creator');
    const remote = await user(b, 'remote');
    const roomId = await createRoom(creator, { invite: [remote.userId], preset: 'private_chat', power_level_content_override: { invite: 0 } });
    await untilMembership(remote, roomId, remote, 'invite');
    await joinRoom(remote, roomId);
    await syncUntil(creator, () => true);
    await putKeys(remote, { [`ed25519:${remote.deviceId}`]: 'c3op6BJi8aUnDGA541Q6TbTPmbiy1GqGv-zzXDQM9Us' });
    const first = await untilInChanged(creator, remote);

    await leave(creator, roomId);
    await untilMembership(remote, roomId, creator, 'leave');
    await putKeys(remote, { [`ed25519:${remote.deviceId}`]: 'jAV9juztEM6Fjda60eut1GYyaP6QFlkfCd609celbwo' });
    await invite(remote, roomId, creator);
    await untilMembership(creator, roomId, creator, 'invite');
    await joinRoom(creator, roomId);
    const second = await untilInChanged(creator, remote);
    const changes = await call(creator, 'GET', `${V3}/keys/changes?from=${enc(first.next_batch)}&to=${enc(second.next_batch)}`);
    expect(changes.changed).toContain(remote.userId);
    const keys = await queryKeys(creator, remote);
    expect(keys.device_keys[remote.userId][remote.deviceId].keys[`ed25519:${remote.deviceId}`]).toBe('jAV9juztEM6Fjda60eut1GYyaP6QFlkfCd609celbwo');
  });

  it('a remote user leaves, changes a device and rejoins: the local user sees them changed, and the new keys', async () => {
    const creator = await user(a, 'creator');
    const leaver = await user(b, 'leaver');
    const roomId = await createRoom(creator, { invite: [leaver.userId] });
    await untilMembership(leaver, roomId, leaver, 'invite');
    await joinRoom(leaver, roomId);
    await syncUntil(creator, () => true);
    await putKeys(leaver, { [`curve25519:${leaver.deviceId}`]: 'base64publicidentitykey', [`ed25519:${leaver.deviceId}`]: 'base64publicidentitykey2' });
    await untilInChanged(creator, leaver);
    await leave(leaver, roomId);
    await untilMembership(creator, roomId, leaver, 'leave');
    await putKeys(leaver, { [`ed25519:${leaver.deviceId}`]: 'cmltKURmLTRV86hBT_jh8AFH9RAdz0yAZOfvlBUQqP8' });
    await invite(creator, roomId, leaver);
    await untilMembership(leaver, roomId, leaver, 'invite');
    await joinRoom(leaver, roomId);
    await untilInChanged(creator, leaver);
    // The rejoin is the only notice: the list is resynced when asked for (or already was).
    const keys = await queryKeys(creator, leaver);
    expect(keys.device_keys[leaver.userId][leaver.deviceId].keys).toEqual({ [`ed25519:${leaver.deviceId}`]: 'cmltKURmLTRV86hBT_jh8AFH9RAdz0yAZOfvlBUQqP8' });
  });

  it('an invited remote user is in device_lists.changed (their devices may be encrypted to), and again once joined', async () => {
    const creator = await user(a, 'creator');
    const remote = await user(b, 'remote');
    const roomId = await createRoom(creator);
    await syncUntil(creator, () => true);
    await invite(creator, roomId, remote);
    await untilInChanged(creator, remote);
    await untilMembership(remote, roomId, remote, 'invite');
    await joinRoom(remote, roomId);
    await untilInChanged(creator, remote);
  });

  it('a display name change, then a deleted device: each reaches the other server, and the deleted device is gone from /keys/query', async () => {
    const creator = await user(a, 'creator');
    const remote = await user(b, 'remote');
    const roomId = await createRoom(creator);
    await invite(creator, roomId, remote);
    await untilMembership(remote, roomId, remote, 'invite');
    await joinRoom(remote, roomId);
    await syncUntil(creator, () => true);
    await putKeys(remote, { [`curve25519:${remote.deviceId}`]: 'base64publicidentitykey', [`ed25519:${remote.deviceId}`]: 'base64publicidentitykey2' });
    await untilInChanged(creator, remote);
    await call(remote, 'PUT', `${V3}/devices/${enc(remote.deviceId)}`, { display_name: 'test display name' });
    await untilKeys(creator, remote, (answer) => answer.device_keys[remote.userId]?.[remote.deviceId]?.unsigned?.device_display_name === 'test display name');

    const auth = { type: 'm.login.password', identifier: { type: 'm.id.user', user: remote.userId }, password: PASSWORD };
    await call(remote, 'DELETE', `${V3}/devices/${enc(remote.deviceId)}`, { auth });
    await untilKeys(creator, remote, (answer) => Object.keys(answer.device_keys[remote.userId] ?? { any: 1 }).length === 0);
  });

  it("signatures a remote user makes of their own device, and their new cross-signing keys, reach the local user's /keys/query", async () => {
    const creator = await user(a, 'creator');
    const remote = await user(b, 'remote');
    const device = await deviceKeys(remote);
    await call(remote, 'POST', `${V3}/keys/upload`, { device_keys: device.signed });
    const { master, selfSigning } = await crossSigningSet(remote.userId);
    await call(remote, 'POST', `${V3}/keys/device_signing/upload`, { master_key: master.object, self_signing_key: selfSigning.object });
    const roomId = await createRoom(creator);
    await syncUntil(creator, () => true);
    await invite(creator, roomId, remote);
    await untilInChanged(creator, remote);
    await untilMembership(remote, roomId, remote, 'invite');
    await joinRoom(remote, roomId);
    await untilInChanged(creator, remote);
    const before = await queryKeys(creator, remote);
    expect(before.master_keys[remote.userId]).toEqual(master.object);

    const { signatures: _own, ...bare } = device.signed;
    const signed = await signJson(bare, remote.userId, `ed25519:${selfSigning.pub}`, selfSigning.key);
    const upload = await call(remote, 'POST', `${V3}/keys/signatures/upload`, { [remote.userId]: { [remote.deviceId]: signed } });
    expect(upload.failures ?? {}).toEqual({});
    const signature = signed.signatures[remote.userId]![`ed25519:${selfSigning.pub}`];
    const after = await untilKeys(creator, remote, (answer) => answer.device_keys[remote.userId]?.[remote.deviceId]?.signatures?.[remote.userId]?.[`ed25519:${selfSigning.pub}`] === signature);
    expect(after.master_keys[remote.userId]).toEqual(master.object);
    expect(after.self_signing_keys[remote.userId]).toEqual(selfSigning.object);
  });
});
