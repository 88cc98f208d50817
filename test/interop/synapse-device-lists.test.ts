import { beforeAll, describe, expect, it } from 'vitest';
import { signJson } from '../../src/crypto/signing.ts';
import { api } from '../integration/harness.ts';
import { call, devicesOf, listing, newDevice, ownerAndWatcher, query, syncUntil, untilQuery, type Person } from '../support/device-list-watch.ts';
import { crossSigningSet } from '../support/e2ee-keys.ts';
import { PASSWORD, synapseAndHearth } from '../support/synapse-interop.ts';
import type { SyncBody } from '../support/sync-until.ts';

// Device lists between a Hearth host and Synapse as the other server (issue 34, checked against an
// independent implementation), each case both ways: the person whose devices change ("the owner")
// is on one server, the one who watches them on the other. What the watcher's own server says is
// read as a client reads it: `/keys/query` and `/sync`'s `device_lists`.
//   - a new device, a device's new display name, a deleted device, and cross-signing keys with a
//     signature on a device: in /keys/query, and the owner in `device_lists.changed`;
//   - the watcher leaves their only shared room, the owner adds a device, the watcher rejoins:
//     `changed` again, and the new device listed;
//   - the owner leaves the only shared room: `left`, and their later changes are not `changed`;
//   - /keys/query for the owner sharing no room answers their devices, the newest included.

// Synapse keeps device names from other servers unless told (its default; the spec has no such switch).
const servers = synapseAndHearth({ synapseConfig: { allow_device_name_lookup_over_federation: true } });

/** The member events of a room in a /sync answer (state and timeline). */
const memberEvents = (body: SyncBody, roomId: string): any[] => {
  const room = body.rooms?.join?.[roomId];
  return [...(room?.state?.events ?? []), ...(room?.timeline?.events ?? [])].filter((e: any) => e.type === 'm.room.member');
};

describe.each([
  { direction: 'a Synapse user’s devices, watched from Hearth', ownerServer: () => servers.synapse, watcherServer: () => servers.hearth, tag: 's2h' },
  { direction: 'a Hearth user’s devices, watched from Synapse', ownerServer: () => servers.hearth, watcherServer: () => servers.synapse, tag: 'h2s' },
])('$direction', ({ ownerServer, watcherServer, tag }) => {
  let owner: Person;
  let watcher: Person;
  let roomId: string;
  /** The device added while the watcher was away. */
  let meanwhile: string;

  beforeAll(async () => ({ owner, watcher, roomId } = await ownerAndWatcher(ownerServer(), watcherServer(), tag)));

  it('a new device is listed, and the owner is in device_lists.changed', async () => {
    const second = await newDevice(owner, 'the second device');
    const answer = await untilQuery(watcher, owner, listing(owner, [owner.account.deviceId, second.deviceId]), 'the new device');
    const listed = answer.device_keys[owner.account.userId][second.deviceId];
    expect(listed.unsigned?.device_display_name).toBe('the second device');
    await call({ server: owner.server, account: second }, 'POST', '/_matrix/client/v3/logout', {});
    await untilQuery(watcher, owner, listing(owner, [owner.account.deviceId]), 'the second device logged out');
  });

  it('a device’s new display name reaches the other server', async () => {
    await call(owner, 'PUT', `/_matrix/client/v3/devices/${encodeURIComponent(owner.account.deviceId)}`, { display_name: `renamed ${tag}` });
    // Asked again on each change: the owner's devices may still be settling from the test before.
    const nameOf = (answer: any) => answer.device_keys?.[owner.account.userId]?.[owner.account.deviceId]?.unsigned?.device_display_name;
    const answer = await untilQuery(watcher, owner, (a) => nameOf(a) === `renamed ${tag}`, 'the new display name');
    expect(nameOf(answer)).toBe(`renamed ${tag}`);
  });

  it('a deleted device is no longer listed', async () => {
    const doomed = await newDevice(owner, 'doomed');
    await untilQuery(watcher, owner, listing(owner, [owner.account.deviceId, doomed.deviceId]), 'the doomed device');
    // Deleting a device needs the password (user-interactive auth).
    const path = `/_matrix/client/v3/devices/${encodeURIComponent(doomed.deviceId)}`;
    const challenge = await api(owner.server, 'DELETE', path, { token: owner.account.accessToken, body: {}, unchecked: true });
    expect(challenge.status).toBe(401);
    await call(owner, 'DELETE', path, { auth: { type: 'm.login.password', identifier: { type: 'm.id.user', user: owner.account.userId }, password: PASSWORD, session: challenge.body.session } });
    await untilQuery(watcher, owner, listing(owner, [owner.account.deviceId]), 'the deletion');
  });

  it('cross-signing keys, and the self-signing key’s signature on a device, reach the other server', async () => {
    const { master, selfSigning, userSigning } = await crossSigningSet(owner.account.userId);
    await call(owner, 'POST', '/_matrix/client/v3/keys/device_signing/upload', { master_key: master.object, self_signing_key: selfSigning.object, user_signing_key: userSigning.object });
    await untilQuery(watcher, owner, (answer) => answer.self_signing_keys?.[owner.account.userId] !== undefined, 'the cross-signing keys');

    // The owner signs their own device with the self-signing key.
    const own = (await call(owner, 'POST', '/_matrix/client/v3/keys/query', { device_keys: { [owner.account.userId]: [owner.account.deviceId] } })).device_keys[owner.account.userId][owner.account.deviceId];
    const { signatures: _, unsigned: __, ...unsignedDevice } = own;
    const signed = await signJson({ ...unsignedDevice, signatures: own.signatures }, owner.account.userId, `ed25519:${selfSigning.pub}`, selfSigning.key);
    const upload = await call(owner, 'POST', '/_matrix/client/v3/keys/signatures/upload', { [owner.account.userId]: { [owner.account.deviceId]: signed } });
    expect(upload.failures ?? {}).toEqual({});
    const signature = (answer: any) => answer.device_keys?.[owner.account.userId]?.[owner.account.deviceId]?.signatures?.[owner.account.userId]?.[`ed25519:${selfSigning.pub}`];
    await untilQuery(watcher, owner, (answer) => signature(answer) !== undefined, 'the signature on the device');

    const seen = await query(watcher, owner);
    expect(seen.master_keys?.[owner.account.userId]?.keys).toEqual(master.object.keys);
    expect(seen.self_signing_keys?.[owner.account.userId]?.keys).toEqual(selfSigning.object.keys);
    // A user-signing key is for its owner's eyes only.
    expect(seen.user_signing_keys?.[owner.account.userId]).toBeUndefined();
    expect(signature(seen)).toBe(signed.signatures[owner.account.userId]![`ed25519:${selfSigning.pub}`]);
  });

  it('the watcher leaves the only shared room, the owner adds a device, the watcher rejoins: changed, and the device listed', async () => {
    await call(watcher, 'POST', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/leave`, {});
    // Synapse drops a room's current state once its last user leaves, so its /sync cannot name the
    // room's other members in `left` (which the spec words as "may have left"): there, the room left is what shows.
    const gone = watcher.server === servers.synapse ? (body: SyncBody) => !!body.rooms?.leave?.[roomId] : (_: SyncBody, seen: { left: Set<string> }) => seen.left.has(owner.account.userId);
    await syncUntil(watcher, gone, 'the owner in device_lists.left');
    const sinceBeforeRejoin = watcher.since!;
    // The device is added once the owner's server knows the watcher is gone, so that it is surely added while apart.
    await syncUntil(owner, (body) => memberEvents(body, roomId).some((e) => e.state_key === watcher.account.userId && e.content?.membership === 'leave'), "the watcher's leave");
    meanwhile = (await newDevice(owner, 'added while apart')).deviceId;
    await call(watcher, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}?server_name=${encodeURIComponent(owner.server.name)}`, {});
    await untilQuery(watcher, owner, listing(owner, [owner.account.deviceId, meanwhile]), 'the owner, after the rejoin');
    const changes = await call(watcher, 'GET', `/_matrix/client/v3/keys/changes?from=${encodeURIComponent(sinceBeforeRejoin)}&to=${encodeURIComponent(watcher.since!)}`);
    expect(changes.changed).toContain(owner.account.userId);
  });

  it('the owner leaves the only shared room: left, their later changes are not changed, and /keys/query still answers their devices', async () => {
    await call(owner, 'POST', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/leave`, {});
    await syncUntil(watcher, (_, seen) => seen.left.has(owner.account.userId), 'the owner in device_lists.left');
    const later = await newDevice(owner, 'added after leaving');
    // A to-device message from the owner comes after anything the device change made the owner's server send.
    await call(owner, 'PUT', `/_matrix/client/v3/sendToDevice/org.example.barrier/b-${tag}`, { messages: { [watcher.account.userId]: { [watcher.account.deviceId]: {} } } });
    const seen = await syncUntil(watcher, (body) => (body.to_device?.events ?? []).some((e: any) => e.type === 'org.example.barrier'), 'the to-device message after the new device');
    expect([...seen.changed]).not.toContain(owner.account.userId);

    // Sharing no room, the watcher's server asks the owner's: every device, the newest too.
    expect(await devicesOf(watcher, owner)).toEqual([owner.account.deviceId, meanwhile, later.deviceId].sort());
  });
});
