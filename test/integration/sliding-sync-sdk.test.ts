import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';
import { decryptedBodies, sdk, until } from './sdk.ts';
import { startSlidingClient, type SlidingClient } from './sliding-sdk.ts';

// matrix-js-sdk 37's SlidingSync with SlidingSyncSdk, as Element Web runs it, against Hearth.

let server: TestServer;
const clients: SlidingClient[] = [];
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  for (const c of clients) c.stop();
  await server.close();
});

const enc = encodeURIComponent;
const createRoom = async (account: Account, body: object = {}) =>
  (await api(server, 'POST', '/_matrix/client/v3/createRoom', { token: account.accessToken, body })).body.room_id as string;
const send = (account: Account, roomId: string, body: string) =>
  api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/${enc(`t${Math.random()}`)}`, { token: account.accessToken, body: { msgtype: 'm.text', body } });
const start = async (account: Account, options: Parameters<typeof startSlidingClient>[2] = {}) => {
  const started = await startSlidingClient(server.url, account, options);
  clients.push(started);
  return started;
};
/** The client's rooms by recency (bump stamp), as Element Web's room list orders them. */
const byRecency = (client: sdk.MatrixClient) =>
  client.getRooms().filter((r) => r.getMyMembership() === 'join').sort((a, b) => (b.getBumpStamp() ?? 0) - (a.getBumpStamp() ?? 0)).map((r) => r.name);

describe('matrix-js-sdk SlidingSync', () => {
  it('lists rooms by recency and reorders them when a message arrives', async () => {
    const alice = await register(server, 'alice');
    for (const name of ['oldest', 'middle', 'newest']) await send(alice, await createRoom(alice, { name }), `in ${name}`);
    const { client, slidingSync } = await start(alice);
    expect(byRecency(client)).toEqual(['newest', 'middle', 'oldest']);
    expect(slidingSync.getListData('rooms')?.joinedCount).toBe(3);
    const oldest = client.getRooms().find((r) => r.name === 'oldest')!;
    expect(oldest.getLiveTimeline().getEvents().at(-1)?.getContent()['body']).toBe('in oldest');
    await send(alice, oldest.roomId, 'now the latest');
    await until(client, () => byRecency(client)[0] === 'oldest', 'the room with the new message on top');
    expect(byRecency(client)).toEqual(['oldest', 'newest', 'middle']);
    expect(oldest.getLiveTimeline().getEvents().at(-1)?.getContent()['body']).toBe('now the latest');
  });

  it('subscribes to a room for its timeline and paginates back through /messages from prev_batch', async () => {
    const bob = await register(server, 'bob');
    const roomId = await createRoom(bob, { name: 'history' });
    for (let i = 0; i < 70; i++) await send(bob, roomId, `message ${i}`);
    const { client, slidingSync } = await start(bob);
    const room = client.getRoom(roomId)!;
    expect(room.getLiveTimeline().getEvents().filter((e) => e.getType() === 'm.room.message')).toHaveLength(1);
    slidingSync.modifyRoomSubscriptions(new Set([roomId]));
    await until(client, () => room.getLiveTimeline().getEvents().filter((e) => e.getType() === 'm.room.message').length >= 50, 'the subscription timeline');
    // All state with the subscription.
    expect(room.currentState.getStateEvents('m.room.power_levels', '')).toBeTruthy();
    const bodies = () => room.getLiveTimeline().getEvents().filter((e) => e.getType() === 'm.room.message').map((e) => e.getContent()['body'] as string);
    expect(bodies().at(-1)).toBe('message 69');
    while (await client.paginateEventTimeline(room.getLiveTimeline(), { backwards: true, limit: 30 }));
    expect(bodies()).toEqual(Array.from({ length: 70 }, (_, i) => `message ${i}`));
    expect(room.getLiveTimeline().getEvents()[0]?.getType()).toBe('m.room.create');
  });

  it('shows invites, joins, renames, leaves and DMs in the right lists', async () => {
    const carol = await register(server, 'carol');
    const dave = await register(server, 'dave');
    const { client, slidingSync } = await start(carol, {
      lists: {
        rooms: { ranges: [[0, 19]], timeline_limit: 1, required_state: [['m.room.name', ''], ['m.room.member', '$ME']], filters: { is_invite: false } },
        invites: { ranges: [[0, 19]], timeline_limit: 0, required_state: [], filters: { is_invite: true } },
        dms: { ranges: [[0, 19]], timeline_limit: 1, required_state: [['m.room.member', '$ME']], filters: { is_dm: true } },
      },
    });
    const roomId = await createRoom(dave, { name: 'invited', invite: [carol.userId] });
    await until(client, () => client.getRoom(roomId)?.getMyMembership() === 'invite', 'the invite');
    expect(slidingSync.getListData('invites')?.joinedCount).toBe(1);
    expect(client.getRoom(roomId)!.name).toBe('invited');

    await client.joinRoom(roomId);
    await until(client, () => slidingSync.getListData('invites')?.joinedCount === 0 && slidingSync.getListData('rooms')?.joinedCount === 1, 'the joined room out of the invites');
    await api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.name/`, { token: dave.accessToken, body: { name: 'renamed' } });
    await until(client, () => client.getRoom(roomId)?.name === 'renamed', 'the rename');

    await api(server, 'POST', `/_matrix/client/v3/rooms/${enc(roomId)}/kick`, { token: dave.accessToken, body: { user_id: carol.userId } });
    await until(client, () => client.getRoom(roomId)?.getMember(carol.userId)?.membership === 'leave', 'the kick');

    // A DM: the invite says is_direct; once joined, carol's m.direct names it.
    const dm = await createRoom(dave, { is_direct: true, invite: [carol.userId] });
    await until(client, () => client.getRoom(dm)?.getMyMembership() === 'invite', 'the DM invite');
    expect(slidingSync.getListData('dms')?.joinedCount).toBe(1);
    await client.joinRoom(dm);
    await client.setAccountData(sdk.EventType.Direct, { [dave.userId]: [dm] });
    await until(client, () => slidingSync.getListData('dms')?.joinedCount === 1 && client.getRoom(dm)?.getMyMembership() === 'join', 'the joined DM');
    expect(client.getAccountData(sdk.EventType.Direct)?.getContent()).toEqual({ [dave.userId]: [dm] });
  });

  it('encrypts between two users over the sliding sync extensions alone, with Rust crypto', async () => {
    const erin = await register(server, 'erin');
    const frank = await register(server, 'frank');
    const a = await start(erin, { crypto: true });
    const b = await start(frank, { crypto: true });
    const { room_id: roomId } = await a.client.createRoom({
      preset: sdk.Preset.PrivateChat,
      invite: [frank.userId],
      initial_state: [{ type: 'm.room.encryption', state_key: '', content: { algorithm: 'm.megolm.v1.aes-sha2' } }],
    });
    // Element Web subscribes to the room it shows: all of its state.
    a.slidingSync.modifyRoomSubscriptions(new Set([roomId]));
    await until(b.client, () => b.client.getRoom(roomId)?.getMyMembership() === 'invite', 'the invite');
    await b.client.joinRoom(roomId);
    b.slidingSync.modifyRoomSubscriptions(new Set([roomId]));
    await until(a.client, () => a.client.getRoom(roomId)?.getMember(frank.userId)?.membership === 'join', 'frank joined, seen by erin');
    await until(b.client, () => b.client.getRoom(roomId)?.hasEncryptionStateEvent() ?? false, 'the room encrypted for frank');
    await a.client.sendTextMessage(roomId, 'secret over sliding sync');
    await until(b.client, () => decryptedBodies(b.client, roomId).includes('secret over sliding sync'), 'frank decrypts');
    await b.client.sendTextMessage(roomId, 'and back');
    await until(a.client, () => decryptedBodies(a.client, roomId).includes('and back'), 'erin decrypts');
    // No /sync: keys, to-device messages and device lists came over sliding sync's extensions.
    for (const c of [a, b]) {
      expect(c.paths.filter((p) => p.endsWith('/v3/sync'))).toEqual([]);
      expect(c.paths.filter((p) => p.endsWith('/org.matrix.simplified_msc3575/sync')).length).toBeGreaterThan(1);
    }
    const raw = await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=5`, { token: erin.accessToken });
    expect(raw.body.chunk.filter((e: any) => e.type === 'm.room.message')).toEqual([]);
  });
});
