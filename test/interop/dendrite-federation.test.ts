import { beforeAll, describe, expect, it } from 'vitest';
import { startDendrite } from '../support/dendrite.ts';
import { call, listing, newDevice, ownerAndWatcher, untilQuery, type Person } from '../support/device-list-watch.ts';
import { remoteAndHearth } from '../support/interop.ts';
import { encryptedDmsBothWays, ephemeralNewsBothWays, roomsJoinedBothWays } from './federation-cases.ts';

// A DNS-named Hearth host and a real Dendrite (the version scripts/install-dendrite.sh builds), each
// `localhost:P` on loopback, federating over HTTPS with certificates from the test's own CA (issue
// 35). matrix-js-sdk drives both as a person's client would, each case both ways: rooms made on one
// server (Dendrite's default room version is 10) and joined from the other by ID and by alias, with
// messages both ways; invites accepted and rejected; typing, receipts, presence and to-device
// messages (federation-cases.ts, as Synapse is held to); a new device and its sign-out reaching the
// other server's /keys/query and /sync; and DMs encrypted with Rust crypto on both sides.

const servers = remoteAndHearth((tls) => startDendrite({ tls }));

roomsJoinedBothWays(servers, 'Dendrite');
ephemeralNewsBothWays(servers, 'Dendrite');

describe.each([
  { direction: 'a Dendrite user’s devices, watched from Hearth', ownerServer: () => servers.remote, watcherServer: () => servers.hearth, tag: 'd2h' },
  { direction: 'a Hearth user’s devices, watched from Dendrite', ownerServer: () => servers.hearth, watcherServer: () => servers.remote, tag: 'h2d' },
])('$direction', ({ ownerServer, watcherServer, tag }) => {
  let owner: Person;
  let watcher: Person;

  beforeAll(async () => ({ owner, watcher } = await ownerAndWatcher(ownerServer(), watcherServer(), tag)));

  it('a new device is listed, and the owner is in device_lists.changed; its sign-out takes it off the list', async () => {
    const second = await newDevice(owner, 'the second device');
    const answer = await untilQuery(watcher, owner, listing(owner, [owner.account.deviceId, second.deviceId]), 'the new device');
    expect(answer.device_keys[owner.account.userId][second.deviceId].keys).toBeDefined();
    await call({ server: owner.server, account: second }, 'POST', '/_matrix/client/v3/logout', {});
    await untilQuery(watcher, owner, listing(owner, [owner.account.deviceId]), 'the second device logged out');
  });
});

encryptedDmsBothWays(servers, 'Dendrite');
