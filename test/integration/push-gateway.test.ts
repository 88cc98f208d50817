// Delivery to push gateways: a real HTTP gateway on 127.0.0.1 receives POST
// /_matrix/push/v1/notify for what the user's push rules say notify, with the room's
// name and alias, the counts and the sender's display name; a muted room is not
// pushed, and a pusher its gateway rejects is removed. (The spec data here has no push
// gateway OpenAPI, so the bodies are checked field by field against the spec's text.)
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNodeHost } from '../../src/node/node-host.ts';
import { fetchPushGateway } from '../../src/sync/push-delivery.ts';
import { clientCalls } from '../support/client-calls.ts';
import { createTestTls } from '../support/https-hosts.ts';
import { startPushGateway, type PushGateway } from '../support/push-gateway.ts';
import { freePort, startNodePeer } from '../support/node-peer.ts';
import { startScriptedRemote } from '../support/scripted-remote.ts';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

let server: TestServer;
let gateway: PushGateway;
let alice: Account;
let bob: Account;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;
const nextPush = () => gateway.next();

beforeAll(async () => {
  gateway = await startPushGateway();
  server = await startTestServer({ pushGateway: fetchPushGateway });
  [alice, bob] = [await register(server, 'alice'), await register(server, 'bob')];
  await api(server, 'PUT', `${V3}/profile/${enc(bob.userId)}/displayname`, { token: bob.accessToken, body: { displayname: 'Bob Builder' } });
  const pusher = await api(server, 'POST', `${V3}/pushers/set`, {
    token: alice.accessToken,
    body: { kind: 'http', app_id: 'org.example.app', pushkey: 'alice-phone', app_display_name: 'Example', device_display_name: 'Phone', lang: 'en', data: { url: gateway.url, brand: 'tea' } },
  });
  expect(pusher.status).toBe(200);
});
afterAll(async () => {
  await server.close();
  await gateway.close();
});

let txn = 0;
const say = async (roomId: string, body: string) =>
  (await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/t${++txn}`, { token: bob.accessToken, body: { msgtype: 'm.text', body } })).body.event_id as string;

/** A room of Alice's that Bob has joined, new for each case, so that each counts its own unread messages and runs alone. */
async function roomWithBob(name: string, alias?: string): Promise<string> {
  const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: { name, ...(alias ? { room_alias_name: alias } : {}), invite: [bob.userId] } })).body.room_id as string;
  expect((await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: bob.accessToken, body: {} })).status).toBe(200);
  return roomId;
}

describe('push gateways', () => {
  it("pushes a message with the room's name and alias, the counts and the sender's display name", async () => {
    const teaRoom = await roomWithBob('Tea room', 'tea');
    const eventId = await say(teaRoom, 'the kettle is on');
    const push = await nextPush();
    expect(push.path).toBe('/_matrix/push/v1/notify');
    expect(push.body.notification).toMatchObject({
      event_id: eventId,
      room_id: teaRoom,
      type: 'm.room.message',
      sender: bob.userId,
      sender_display_name: 'Bob Builder',
      room_name: 'Tea room',
      room_alias: `#tea:${server.homeserver.serverName}`,
      content: { msgtype: 'm.text', body: 'the kettle is on' },
      counts: { unread: 1 },
      // The default rule for a one-to-one room rings: high priority.
      prio: 'high',
      devices: [{ app_id: 'org.example.app', pushkey: 'alice-phone', pushkey_ts: expect.any(Number), data: { brand: 'tea' }, tweaks: expect.any(Object) }],
    });
    await say(teaRoom, 'milk?');
    expect((await nextPush()).body.notification.counts).toEqual({ unread: 2 });
  });

  it('does not push from a muted room', async () => {
    const [quietRoom, teaRoom] = [await roomWithBob('Quiet'), await roomWithBob('Tea room')];
    const mute = await api(server, 'PUT', `${V3}/pushrules/global/override/${enc(quietRoom)}`, {
      token: alice.accessToken, body: { actions: [], conditions: [{ kind: 'event_match', key: 'room_id', pattern: quietRoom }] },
    });
    expect(mute.status).toBe(200);
    await say(quietRoom, 'shh');
    const loud = await say(teaRoom, 'after the quiet one');
    // Rooms are pushed in the order they changed: had the muted one been pushed, it would come first.
    expect((await nextPush()).body.notification.event_id).toBe(loud);
  });

  it('removes a pusher the gateway rejects, and keeps the others', async () => {
    const teaRoom = await roomWithBob('Tea room');
    const second = await api(server, 'POST', `${V3}/pushers/set`, {
      token: alice.accessToken,
      body: { kind: 'http', app_id: 'org.example.app', pushkey: 'old-tablet', app_display_name: 'Example', device_display_name: 'Tablet', lang: 'en', data: { url: gateway.url, format: 'event_id_only' }, append: true },
    });
    expect(second.status).toBe(200);
    gateway.rejectedPushkeys.add('old-tablet');
    const eventId = await say(teaRoom, 'anyone there?');
    const pushes = [await nextPush(), await nextPush()];
    const toTablet = pushes.find((p) => p.body.notification.devices[0].pushkey === 'old-tablet')!;
    // event_id_only: the IDs and counts, not the content.
    expect(toTablet.body.notification).toEqual({ event_id: eventId, room_id: teaRoom, prio: 'high', counts: { unread: 1 }, devices: [expect.objectContaining({ pushkey: 'old-tablet', data: { format: 'event_id_only' } })] });
    await server.homeserver.services.sync.pushDelivery!.idle();
    const left = await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken });
    expect(left.body.pushers.map((p: any) => p.pushkey)).toEqual(['alice-phone']);
  });

  it('pushes an invite to the invited user, as Synapse does, once, and then only what comes after (issue 24, client behaviour 10)', async () => {
    const teaRoom = await roomWithBob('Tea room');
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: bob.accessToken, body: { name: 'Workshop' } })).body.room_id as string;
    const invite = await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/invite`, { token: bob.accessToken, body: { user_id: alice.userId } });
    expect(invite.status).toBe(200);
    // A message after it: had the invite not been pushed, this would come first.
    const eventId = await say(teaRoom, 'after the invite');
    const push = await nextPush();
    expect(push.body.notification).toMatchObject({
      room_id: roomId, type: 'm.room.member', sender: bob.userId, sender_display_name: 'Bob Builder', room_name: 'Workshop',
      user_is_target: true, content: { membership: 'invite' }, prio: 'high',
      devices: [expect.objectContaining({ pushkey: 'alice-phone' })],
    });
    const next = await nextPush();
    expect(next.body.notification.event_id).toBe(eventId);
    await server.homeserver.services.sync.pushDelivery!.idle();
    expect(gateway.untaken()).toEqual([]);
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 7).
describe('pushers', () => {
  const { newUser, passwordAuth, login } = clientCalls(() => server);
  const pusher = (pushkey: string, extra: object = {}) => ({
    kind: 'http', app_id: 'org.example.app', pushkey, app_display_name: 'Example', device_display_name: 'Phone', lang: 'en',
    data: { url: 'https://push.example.org/_matrix/push/v1/notify', format: 'event_id_only', 'org.example.custom': 1 }, ...extra,
  });

  it('sets, lists, replaces and deletes pushers, and refuses incomplete ones', async () => {
    const alice = await newUser('alice');
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body).toEqual({ pushers: [] });
    expect((await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('k1', { profile_tag: 'tag' }) })).status).toBe(200);
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body).toEqual({ pushers: [pusher('k1', { profile_tag: 'tag' })] });
    // The same app and key again updates it.
    await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('k1', { lang: 'fr' }) });
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers).toEqual([pusher('k1', { lang: 'fr' })]);
    await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('k2') });
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['k1', 'k2']);
    // kind null deletes.
    await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: { kind: null, app_id: 'org.example.app', pushkey: 'k1' } });
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['k2']);
    // Another user taking the same app and key takes it over, unless appending.
    const bob = await newUser('bob');
    await api(server, 'POST', `${V3}/pushers/set`, { token: bob.accessToken, body: pusher('k2') });
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers).toEqual([]);
    await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('k2', { append: true }) });
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['k2']);
    expect((await api(server, 'GET', `${V3}/pushers`, { token: bob.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['k2']);

    const missing = await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: { kind: 'http', app_id: 'org.example.app', pushkey: 'k3', data: {} } });
    expect([missing.status, missing.body.errcode]).toEqual([400, 'M_MISSING_PARAM']);
    const noUrl = await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('k3', { data: {} }) });
    expect([noUrl.status, noUrl.body.errcode]).toEqual([400, 'M_MISSING_PARAM']);
    const badPath = await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('k3', { data: { url: 'https://push.example.org/notify' } }) });
    expect([badPath.status, badPath.body.errcode]).toEqual([400, 'M_INVALID_PARAM']);
    const longKey = await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('k'.repeat(513)) });
    expect([longKey.status, longKey.body.errcode]).toEqual([400, 'M_INVALID_PARAM']);
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['k2']);
  });

  it('on a password change, deletes the pushers other access tokens made and keeps the current token’s', async () => {
    const alice = await newUser('alice');
    const phone = await login(alice);
    const laptop = await login(alice);
    await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('mine') });
    await api(server, 'POST', `${V3}/pushers/set`, { token: phone.accessToken, body: pusher('phone') });
    await api(server, 'POST', `${V3}/pushers/set`, { token: laptop.accessToken, body: pusher('laptop') });
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['mine', 'phone', 'laptop']);
    const changed = await api(server, 'POST', `${V3}/account/password`, { token: alice.accessToken, body: { new_password: 'a new password', auth: passwordAuth(alice) } });
    expect(changed.status).toBe(200);
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['mine']);
    for (const other of [phone, laptop]) expect((await api(server, 'GET', `${V3}/account/whoami`, { token: other.accessToken })).status).toBe(401);
  });

  it('GET /notifications gives each notification its actions, ts, read and the asking token’s pusher’s profile_tag', async () => {
    const carol = await newUser('carol');
    const dave = await newUser('dave');
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: carol.accessToken, body: { invite: [dave.userId] } })).body.room_id;
    await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: dave.accessToken, body: {} });
    await api(server, 'POST', `${V3}/pushers/set`, { token: carol.accessToken, body: pusher('tagged', { profile_tag: 'carols-phone' }) });
    const sent = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/n1`, { token: dave.accessToken, body: { msgtype: 'm.text', body: 'ping' } });
    const listed = await api(server, 'GET', `${V3}/notifications`, { token: carol.accessToken });
    expect(listed.body.notifications).toEqual([{
      actions: expect.arrayContaining(['notify']), event: expect.objectContaining({ event_id: sent.body.event_id }),
      profile_tag: 'carols-phone', read: false, room_id: roomId, ts: expect.any(Number),
    }]);
    await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/receipt/m.read/${enc(sent.body.event_id)}`, { token: carol.accessToken, body: {} });
    expect((await api(server, 'GET', `${V3}/notifications`, { token: carol.accessToken })).body.notifications[0].read).toBe(true);
  });

  it('a device deleted or logged out takes its token’s pushers with it', async () => {
    const alice = await newUser('alice');
    const phone = await login(alice);
    await api(server, 'POST', `${V3}/pushers/set`, { token: alice.accessToken, body: pusher('mine') });
    await api(server, 'POST', `${V3}/pushers/set`, { token: phone.accessToken, body: pusher('phone') });
    await api(server, 'POST', `${V3}/logout`, { token: phone.accessToken, body: {} });
    expect((await api(server, 'GET', `${V3}/pushers`, { token: alice.accessToken })).body.pushers.map((p: any) => p.pushkey)).toEqual(['mine']);
  });
});

const httpPusher = (url: string, pushkey = 'phone') => ({
  kind: 'http', app_id: 'org.example.app', pushkey, app_display_name: 'Example', device_display_name: 'Phone', lang: 'en', data: { url },
});

describe('durable delivery', () => {
  it('retries a POST its gateway failed, with backoff, until it is taken: one notification per event per pusher', async () => {
    // Three failures: more than a gateway that is merely slow to come back would be allowed were retries capped at a few.
    const gateway = await startPushGateway([500, 503, 502]);
    const home = await startTestServer({ pushGateway: fetchPushGateway });
    try {
      const [carol, dave] = [await register(home, 'carol'), await register(home, 'dave')];
      const roomId = (await api(home, 'POST', `${V3}/createRoom`, { token: carol.accessToken, body: { invite: [dave.userId] } })).body.room_id;
      await api(home, 'POST', `${V3}/join/${enc(roomId)}`, { token: dave.accessToken, body: {} });
      expect((await api(home, 'POST', `${V3}/pushers/set`, { token: carol.accessToken, body: httpPusher(gateway.url) })).status).toBe(200);
      const eventId = (await api(home, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/r1`, { token: dave.accessToken, body: { msgtype: 'm.text', body: 'are you there?' } })).body.event_id;
      const posts = await gateway.posted(4);
      expect(posts.map((p) => [p.status, p.body.notification.event_id])).toEqual([[500, eventId], [503, eventId], [502, eventId], [200, eventId]]);
      await home.homeserver.services.sync.pushDelivery!.idle();
      expect(gateway.posts).toHaveLength(4);
    } finally {
      await home.close();
      await gateway.close();
    }
  });

  it('keeps what its gateway did not take across a restart, and delivers it then', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'hearth-push-'));
    // Three failures: as many tries as a host that kept its retries in memory would ever make, lingering after its close.
    const gateway = await startPushGateway([503, 503, 503]);
    try {
      const first = await startNodeHost({ dataDir, port: 0, rateLimits: false });
      const [carol, dave] = [await register(first, 'carol'), await register(first, 'dave')];
      const roomId = (await api(first, 'POST', `${V3}/createRoom`, { token: carol.accessToken, body: { invite: [dave.userId] } })).body.room_id;
      await api(first, 'POST', `${V3}/join/${enc(roomId)}`, { token: dave.accessToken, body: {} });
      await api(first, 'POST', `${V3}/pushers/set`, { token: carol.accessToken, body: httpPusher(gateway.url) });
      const eventId = (await api(first, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/r2`, { token: dave.accessToken, body: { msgtype: 'm.text', body: 'before the restart' } })).body.event_id;
      await gateway.posted(1);
      await first.close();

      const second = await startNodeHost({ dataDir, port: 0, rateLimits: false });
      try {
        const delivered = await gateway.postedWhere((p) => p.status === 200);
        expect(delivered.body.notification).toMatchObject({ event_id: eventId, counts: { unread: 1 } });
        await second.homeserver.services.sync.pushDelivery!.idle();
        expect(gateway.posts.filter((p) => p.status === 200)).toHaveLength(1);
      } finally {
        await second.close();
      }
    } finally {
      await gateway.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

// Events from another server that the room does not take (rejected) or takes only into its history (soft-failed)
// are never pushed: a scripted remote sends both, then a local message; only that one reaches the gateway.
describe('events other servers send', () => {
  it('never pushes rejected or soft-failed events', async () => {
    const tls = await createTestTls();
    const port = await freePort();
    const host = await startNodePeer({ port, listen: [], serverName: `localhost:${port}`, tls: tls.leaf, https: { extraCa: [tls.ca.cert] } });
    const hearth = { url: host.url, fetch: tls.fetch };
    const remote = await startScriptedRemote(tls);
    const gateway = await startPushGateway();
    try {
      const [alice, carol] = [await register(hearth, 'alice'), await register(hearth, 'carol')];
      const bob = `@bob:${remote.name}`;
      const roomId = (await api(hearth, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: { preset: 'public_chat' } })).body.room_id;
      await api(hearth, 'POST', `${V3}/join/${enc(roomId)}`, { token: carol.accessToken, body: {} });
      await remote.joinRoom(host.homeserver.serverName, roomId, bob);
      const stateId = (type: string, key = '') => remote.rooms.get(roomId)!.state.get(`${type}\u0000${key}`)!;
      const bobJoin = stateId('m.room.member', bob);
      const oldAuth = [stateId('m.room.create'), stateId('m.room.power_levels'), bobJoin];
      // Messages need power 50 from now on; bob has none.
      const levels = await api(hearth, 'GET', `${V3}/rooms/${enc(roomId)}/state/m.room.power_levels/`, { token: alice.accessToken });
      await api(hearth, 'PUT', `${V3}/rooms/${enc(roomId)}/state/m.room.power_levels/`, { token: alice.accessToken, body: { ...levels.body, events: { ...levels.body.events, 'm.room.message': 50 } } });
      await remote.waitForPdu((pdu) => pdu.type === 'm.room.power_levels' && (pdu.content as any).events?.['m.room.message'] === 50);
      expect((await api(hearth, 'POST', `${V3}/pushers/set`, { token: carol.accessToken, body: httpPusher(gateway.url) })).status).toBe(200);

      // Allowed by its own history (bob's join), not by the room's state now: soft-failed.
      const softFailed = await remote.createEvent(roomId, { type: 'm.room.message', sender: bob, content: { msgtype: 'm.text', body: 'soft-failed' }, prev_events: [bobJoin], auth_events: oldAuth });
      expect(await remote.sendPdus(host.homeserver.serverName, [softFailed.pdu])).toEqual({ [softFailed.eventId]: {} });
      // From someone who is not in the room: rejected.
      const rejected = await remote.createEvent(roomId, { type: 'm.room.message', sender: `@stranger:${remote.name}`, content: { msgtype: 'm.text', body: 'rejected' }, auth_events: [stateId('m.room.create'), stateId('m.room.power_levels')] }, { hold: true });
      expect((await remote.sendPdus(host.homeserver.serverName, [rejected.pdu]))[rejected.eventId]?.error).toMatch(/rejected/);
      const sentinel = (await api(hearth, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/sentinel`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'sentinel' } })).body.event_id;
      // Rooms are evaluated in stream order: had either been pushed, it would have come first.
      expect((await gateway.next()).body.notification.event_id).toBe(sentinel);
      await host.homeserver.services.sync.pushDelivery!.idle();
      expect(gateway.posts.map((p) => p.body.notification.event_id)).toEqual([sentinel]);
    } finally {
      await remote.close();
      await host.close();
      await gateway.close();
      await tls.dispose();
    }
  });
});
