import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';
import { sdk, startClient, waitFor } from './sdk.ts';

// Two users drive the Node host through matrix-js-sdk, as a real client would.

let server: TestServer;
let alice: Account;
let bob: Account;
let aliceClient: sdk.MatrixClient;
let bobClient: sdk.MatrixClient;

beforeAll(async () => {
  server = await startTestServer();
  alice = await register(server, 'alice');
  bob = await register(server, 'bob');
  aliceClient = await startClient(server.url, alice);
  bobClient = await startClient(server.url, bob);
});

afterAll(async () => {
  aliceClient?.stopClient();
  bobClient?.stopClient();
  await server?.close();
});

const timelineBodies = (client: sdk.MatrixClient, roomId: string) =>
  client.getRoom(roomId)?.getLiveTimeline().getEvents().filter((e) => e.getType() === 'm.room.message').map((e) => e.getContent()['body']) ?? [];

describe('accounts', () => {
  it('logs in with a password and a new device', async () => {
    const client = sdk.createClient({ baseUrl: server.url });
    const login = await client.loginRequest({ type: 'm.login.password', identifier: { type: 'm.id.user', user: 'alice' }, password: 'correct horse battery staple' });
    expect(login.user_id).toBe(alice.userId);
    expect(login.device_id).not.toBe(alice.deviceId);
    const whoami = await api(server, 'GET', '/_matrix/client/v3/account/whoami', { token: login.access_token });
    expect(whoami.body.device_id).toBe(login.device_id);
  });
});

describe('rooms', () => {
  it.each(['private_chat', 'trusted_private_chat', 'public_chat'] as const)('creates a %s room, invites and joins', async (preset) => {
    const { room_id: roomId } = await aliceClient.createRoom({ preset: preset as sdk.Preset, name: `room ${preset}`, invite: [bob.userId] });
    await waitFor(bobClient, () => bobClient.getRoom(roomId)?.getMyMembership() === 'invite', 10_000, 'the invite');
    await bobClient.joinRoom(roomId);
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.getMember(bob.userId)?.membership === 'join', 10_000, 'bob joining');
    const room = aliceClient.getRoom(roomId)!;
    expect(room.name).toBe(`room ${preset}`);
    const joinRule = room.currentState.getStateEvents('m.room.join_rules', '')?.getContent()['join_rule'];
    expect(joinRule).toBe(preset === 'public_chat' ? 'public' : 'invite');
    const bobLevel = room.currentState.getStateEvents('m.room.power_levels', '')?.getContent()['users']?.[bob.userId];
    expect(bobLevel).toBe(preset === 'trusted_private_chat' ? 100 : undefined);
  });

  it('exchanges messages and paginates back through history', async () => {
    const { room_id: roomId } = await aliceClient.createRoom({ preset: sdk.Preset.PublicChat });
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId), 10_000, 'the room');
    await bobClient.joinRoom(roomId);
    for (let i = 0; i < 30; i++) await aliceClient.sendTextMessage(roomId, `message ${i}`);
    await waitFor(bobClient, () => timelineBodies(bobClient, roomId).includes('message 29'), 10_000, 'the last message');

    // A fresh client starts from a limited timeline and paginates to the start.
    const fresh = await startClient(server.url, bob);
    try {
      const room = (await waitFor(fresh, () => fresh.getRoom(roomId), 10_000, 'room in fresh client'))!;
      while (room.getLiveTimeline().getPaginationToken(sdk.EventTimeline.BACKWARDS)) {
        await fresh.scrollback(room, 10);
        if (timelineBodies(fresh, roomId).includes('message 0')) break;
      }
      const bodies = timelineBodies(fresh, roomId);
      expect(bodies).toEqual(Array.from({ length: 30 }, (_, i) => `message ${i}`));
    } finally {
      fresh.stopClient();
    }
  });

  it('carries typing and read receipts', async () => {
    const { room_id: roomId } = await aliceClient.createRoom({ preset: sdk.Preset.PublicChat });
    await bobClient.joinRoom(roomId);
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.getMember(bob.userId)?.membership === 'join', 10_000, 'join');
    await bobClient.sendTyping(roomId, true, 30_000);
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.getMember(bob.userId)?.typing, 10_000, 'typing on');
    await bobClient.sendTyping(roomId, false, 0);
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.getMember(bob.userId)?.typing === false, 10_000, 'typing off');

    const { event_id: eventId } = await aliceClient.sendTextMessage(roomId, 'read me');
    const event = await waitFor(bobClient, () => bobClient.getRoom(roomId)?.findEventById(eventId), 10_000, 'message at bob');
    await bobClient.sendReadReceipt(event);
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.getEventReadUpTo(bob.userId) === eventId, 10_000, 'receipt');
  });

  it('carries a profile change into the room', async () => {
    const { room_id: roomId } = await aliceClient.createRoom({ preset: sdk.Preset.PublicChat });
    await bobClient.joinRoom(roomId);
    await bobClient.setDisplayName('Bob the Builder');
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.getMember(bob.userId)?.name === 'Bob the Builder', 10_000, 'new name');
    const profile = await aliceClient.getProfileInfo(bob.userId);
    expect(profile.displayname).toBe('Bob the Builder');
  });

  it('redacts a message for everyone', async () => {
    const { room_id: roomId } = await aliceClient.createRoom({ preset: sdk.Preset.PublicChat });
    await bobClient.joinRoom(roomId);
    const { event_id: eventId } = await bobClient.sendTextMessage(roomId, 'oops');
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.findEventById(eventId), 10_000, 'message');
    await bobClient.redactEvent(roomId, eventId, undefined, { reason: 'typo' });
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.findEventById(eventId)?.isRedacted(), 10_000, 'redaction');
    const fetched = await api(server, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/event/${encodeURIComponent(eventId)}`, { token: alice.accessToken });
    expect(fetched.body.content).toEqual({});
    expect(fetched.body.unsigned.redacted_because.content.reason).toBe('typo');
  });

  it('leaves, kicks and bans', async () => {
    const { room_id: roomId } = await aliceClient.createRoom({ preset: sdk.Preset.PublicChat });
    await bobClient.joinRoom(roomId);
    await bobClient.leave(roomId);
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.getMember(bob.userId)?.membership === 'leave', 10_000, 'leave');
    // The SDK skips a join for a room it still believes it is in: let it see the leave first.
    await waitFor(bobClient, () => bobClient.getRoom(roomId)?.getMyMembership() === 'leave', 10_000, 'leave at bob');
    await bobClient.joinRoom(roomId);
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.getMember(bob.userId)?.membership === 'join', 10_000, 'rejoin');
    await aliceClient.kick(roomId, bob.userId, 'out');
    await waitFor(bobClient, () => bobClient.getRoom(roomId)?.getMyMembership() === 'leave', 10_000, 'kicked');
    await bobClient.joinRoom(roomId);
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.getMember(bob.userId)?.membership === 'join', 10_000, 'join after kick');
    await aliceClient.ban(roomId, bob.userId, 'begone');
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.getMember(bob.userId)?.membership === 'ban', 10_000, 'ban');
    await waitFor(bobClient, () => bobClient.getRoom(roomId)?.getMyMembership() === 'ban', 10_000, 'ban at bob');
    await expect(bobClient.joinRoom(roomId)).rejects.toMatchObject({ errcode: 'M_FORBIDDEN' });
    await aliceClient.unban(roomId, bob.userId);
    await bobClient.joinRoom(roomId);
    await waitFor(aliceClient, () => aliceClient.getRoom(roomId)?.getMember(bob.userId)?.membership === 'join', 10_000, 'join after unban');
  });
});
