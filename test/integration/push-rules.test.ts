// Push rule CRUD as Element's notification settings use it (/pushrules/global/{kind}/{ruleId}):
// new rules go before older ones of their kind (after .m.rule.master among overrides), before
// and after place them, server-default rules can be disabled and given new actions but not
// deleted, and the listing of one kind. Raw HTTP, checked against the spec.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { clientCalls } from '../support/client-calls.ts';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

let server: TestServer;
let alice: Account;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

const put = (kind: string, ruleId: string, body: object, query = '') => api(server, 'PUT', `${V3}/pushrules/global/${kind}/${enc(ruleId)}${query}`, { token: alice.accessToken, body });
const ids = async (kind: string) => ((await api(server, 'GET', `${V3}/pushrules/global/${kind}/`, { token: alice.accessToken, unchecked: true })).body as any[]).map((r) => r.rule_id);
const override = (pattern: string) => ({ actions: ['notify'], conditions: [{ kind: 'event_match', key: 'content.body', pattern }] });

describe('push rule CRUD', () => {
  // Each case has a user of its own, so it runs alone and sees only the rules it made.
  let run = 0;
  beforeEach(async () => {
    alice = await register(server, `crud${++run}`);
  });
  /** The overrides `first` then `second`, which the cases that place and delete rules start from. */
  const firstAndSecond = async () => {
    for (const [ruleId, pattern] of [['first', 'one'], ['second', 'two']] as const) expect((await put('override', ruleId, override(pattern))).status).toBe(200);
  };

  it('puts a new rule before older ones of its kind, overrides after .m.rule.master', async () => {
    expect((await put('override', 'first', override('one'))).status).toBe(200);
    expect((await put('override', 'second', override('two'))).status).toBe(200);
    const overrides = await ids('override');
    expect(overrides.slice(0, 3)).toEqual(['.m.rule.master', 'second', 'first']);
    expect((await put('content', 'c1', { actions: ['notify'], pattern: 'cake' })).status).toBe(200);
    expect((await put('content', 'c2', { actions: ['notify'], pattern: 'pie' })).status).toBe(200);
    expect((await ids('content')).slice(0, 2)).toEqual(['c2', 'c1']);
  });

  it('places a rule with before and after, and refuses an unknown neighbour', async () => {
    await firstAndSecond();
    expect((await put('override', 'third', override('three'), '?after=first')).status).toBe(200);
    expect((await ids('override')).slice(0, 4)).toEqual(['.m.rule.master', 'second', 'first', 'third']);
    expect((await put('override', 'zeroth', override('zero'), '?before=second')).status).toBe(200);
    expect((await ids('override')).slice(0, 3)).toEqual(['.m.rule.master', 'zeroth', 'second']);
    const unknown = await put('override', 'lost', override('lost'), '?before=nope');
    expect(unknown.status).toBe(404);
    expect(unknown.body.errcode).toBe('M_NOT_FOUND');
  });

  it('lets a server-default rule be disabled and its actions changed, never deleted', async () => {
    const at = `${V3}/pushrules/global/override/${enc('.m.rule.suppress_notices')}`;
    expect((await api(server, 'PUT', `${at}/enabled`, { token: alice.accessToken, body: { enabled: false } })).status).toBe(200);
    expect((await api(server, 'GET', `${at}/enabled`, { token: alice.accessToken })).body).toEqual({ enabled: false });
    expect((await api(server, 'PUT', `${at}/actions`, { token: alice.accessToken, body: { actions: [] } })).status).toBe(200);
    expect((await api(server, 'GET', `${at}/actions`, { token: alice.accessToken })).body).toEqual({ actions: [] });
    const deleted = await api(server, 'DELETE', at, { token: alice.accessToken });
    expect(deleted.status).toBe(403);
    expect(deleted.body.errcode).toBe('M_FORBIDDEN');
    expect((await api(server, 'PUT', `${V3}/pushrules/global/override/${enc('.my.rule')}`, { token: alice.accessToken, body: override('x'), unchecked: true })).status).toBe(400);
  });

  it('deletes a rule of the user', async () => {
    await firstAndSecond();
    expect((await api(server, 'DELETE', `${V3}/pushrules/global/override/first`, { token: alice.accessToken })).status).toBe(200);
    expect(await ids('override')).not.toContain('first');
    expect((await api(server, 'GET', `${V3}/pushrules/global/override/first`, { token: alice.accessToken })).status).toBe(404);
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 18).
describe('push rules', () => {
  const { newUser, createRoom, join, send, sync } = clientCalls(() => server);
  const sendContent = async (account: Account, roomId: string, content: object, type = 'm.room.message') => {
    const r = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/${type}/${enc(`t${Math.random()}`)}`, { token: account.accessToken, body: content });
    expect(r.status).toBe(200);
    return r.body.event_id as string;
  };
  const text = (body: string, extra: object = {}) => ({ msgtype: 'm.text', body, ...extra });
  const putRule = async (account: Account, kind: string, ruleId: string, body: object) =>
    expect((await api(server, 'PUT', `${V3}/pushrules/global/${kind}/${enc(ruleId)}`, { token: account.accessToken, body })).status).toBe(200);
  const setup = async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const carol = await newUser('carol');
    const roomId = await createRoom(alice, { preset: 'public_chat', name: 'Counts' });
    await join(bob, roomId);
    await join(carol, roomId);
    return { alice, bob, carol, roomId };
  };

  it('unread notification and highlight counts come from the push rules: the defaults with m.mentions, keywords, room and sender rules', async () => {
    const { alice, bob, carol, roomId } = await setup();
    const counts = async () => (await sync(bob, { filter: { room: { rooms: [roomId] } } })).rooms.join[roomId].unread_notifications;
    const expectCounts = async (notification_count: number, highlight_count: number) => expect(await counts()).toEqual({ notification_count, highlight_count, 'org.matrix.msc2625.unread_count': notification_count });
    await expectCounts(0, 0); // the joins are member events, which do not notify
    await send(alice, roomId, 'hello');
    await expectCounts(1, 0);
    await sendContent(alice, roomId, { msgtype: 'm.notice', body: 'a bot speaking' });
    await expectCounts(1, 0);
    await sendContent(alice, roomId, text('hey you', { 'm.mentions': { user_ids: [bob.userId] } }));
    await expectCounts(2, 1);
    // @room needs the sender to hold the notifications.room level (50): carol does not, alice does.
    await sendContent(carol, roomId, text('everyone!', { 'm.mentions': { room: true } }));
    await expectCounts(3, 1);
    await sendContent(alice, roomId, text('everyone!', { 'm.mentions': { room: true } }));
    await expectCounts(4, 2);
    // An edit does not notify again.
    const original = await send(alice, roomId, 'tpyo');
    await sendContent(alice, roomId, text('* typo', { 'm.new_content': text('typo'), 'm.relates_to': { rel_type: 'm.replace', event_id: original } }));
    await expectCounts(5, 2);
    // A keyword, on word boundaries.
    await putRule(bob, 'content', 'cake', { pattern: 'cake', actions: ['notify', { set_tweak: 'highlight' }] });
    await send(alice, roomId, 'Who baked the CAKE?');
    await expectCounts(6, 3);
    await send(alice, roomId, 'pancakes');
    await expectCounts(7, 3);
    // A sender muted, then the room muted and unmuted.
    await putRule(bob, 'sender', carol.userId, { actions: [] });
    await send(carol, roomId, 'you will not hear me');
    await expectCounts(7, 3);
    await putRule(bob, 'room', roomId, { actions: [] });
    const muted = await send(alice, roomId, 'muted room');
    await expectCounts(7, 3);
    expect((await api(server, 'DELETE', `${V3}/pushrules/global/room/${enc(roomId)}`, { token: bob.accessToken })).status).toBe(200);
    await send(alice, roomId, 'unmuted');
    await expectCounts(8, 3);
    // Reading resets them; the master rule silences everything.
    const last = await send(alice, roomId, 'last one');
    await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/receipt/m.read/${enc(last)}`, { token: bob.accessToken, body: {} });
    await expectCounts(0, 0);
    await api(server, 'PUT', `${V3}/pushrules/global/override/.m.rule.master/enabled`, { token: bob.accessToken, body: { enabled: true } });
    await sendContent(alice, roomId, text('hey you', { 'm.mentions': { user_ids: [bob.userId] } }));
    await expectCounts(0, 0);
    void muted;
    // Counts are per user: alice's own messages never count for her; carol's count follows her own (default) rules.
    const aliceCounts = (await sync(alice, { filter: { room: { rooms: [roomId] } } })).rooms.join[roomId].unread_notifications;
    expect(aliceCounts.notification_count).toBe(2); // carol's two messages
    const carolCounts = (await sync(carol, { filter: { room: { rooms: [roomId] } } })).rooms.join[roomId].unread_notifications;
    expect(carolCounts).toEqual({ notification_count: 10, highlight_count: 1, 'org.matrix.msc2625.unread_count': 10 }); // alice's ten, one an @room
  });

  it('counts what a mark_unread rule matches toward MSC2625’s unread_count, not as a notification; notify counts in both (issue 41)', async () => {
    const { alice, bob, roomId } = await setup();
    const counts = async () => (await sync(bob, { filter: { room: { rooms: [roomId] } } })).rooms.join[roomId].unread_notifications;
    // The conformance suites' rule: every message's body, marked unread only.
    await putRule(bob, 'content', 'anything', { pattern: '*', actions: ['org.matrix.msc2625.mark_unread'] });
    const first = await send(alice, roomId, 'Test message 1');
    expect((await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/receipt/m.read/${enc(first)}`, { token: bob.accessToken, body: {} })).status).toBe(200);
    expect(await counts()).toEqual({ notification_count: 0, highlight_count: 0, 'org.matrix.msc2625.unread_count': 0 });
    await send(alice, roomId, 'Test message 2');
    expect(await counts()).toEqual({ notification_count: 0, highlight_count: 0, 'org.matrix.msc2625.unread_count': 1 });
    // notify implies mark_unread (MSC2625); the user's own messages count in neither.
    await putRule(bob, 'content', 'anything', { pattern: '*', actions: ['notify'] });
    await send(alice, roomId, 'Test message 3');
    await send(bob, roomId, 'my own');
    expect(await counts()).toEqual({ notification_count: 1, highlight_count: 0, 'org.matrix.msc2625.unread_count': 2 });
  });

  it('keeps m.marked_unread (MSC2867) and its unstable name as room account data, which /sync carries (issue 41)', async () => {
    const { bob, roomId } = await setup();
    const initial = await sync(bob);
    for (const type of ['m.marked_unread', 'com.famedly.marked_unread']) {
      expect((await api(server, 'PUT', `${V3}/user/${enc(bob.userId)}/rooms/${enc(roomId)}/account_data/${type}`, { token: bob.accessToken, body: { unread: true } })).status).toBe(200);
    }
    const next = await sync(bob, { since: initial.next_batch, timeout: 0 });
    const data = next.rooms.join[roomId].account_data.events.map((e: any) => [e.type, e.content]);
    expect(data).toEqual(expect.arrayContaining([['m.marked_unread', { unread: true }], ['com.famedly.marked_unread', { unread: true }]]));
  });

  it('one-to-one and encrypted rooms notify by the underride rules; a display name in the body does not highlight (that legacy rule is gone)', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'private_chat', invite: [bob.userId], initial_state: [{ type: 'm.room.encryption', content: { algorithm: 'm.megolm.v1.aes-sha2' } }] });
    await join(bob, roomId);
    await sendContent(alice, roomId, { algorithm: 'm.megolm.v1.aes-sha2', ciphertext: 'opaque', sender_key: 'k', session_id: 's', device_id: 'D' }, 'm.room.encrypted');
    await send(alice, roomId, `${bob.userId.slice(1).split(':')[0]} are you there?`);
    expect((await sync(bob)).rooms.join[roomId].unread_notifications).toEqual({ notification_count: 2, highlight_count: 0, 'org.matrix.msc2625.unread_count': 2 });
  });

  it('/notifications lists what notified, newest first, with the actions, whether it was read, only=highlight and pages', async () => {
    const { alice, bob, roomId } = await setup();
    const other = await createRoom(alice, { preset: 'public_chat' });
    await join(bob, other);
    const first = await send(alice, roomId, 'one');
    await sendContent(alice, roomId, { msgtype: 'm.notice', body: 'not a notification' });
    const mention = await sendContent(alice, other, text('two', { 'm.mentions': { user_ids: [bob.userId] } }));
    const third = await send(alice, roomId, 'three');
    await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/receipt/m.read/${enc(first)}`, { token: bob.accessToken, body: {} });
    const all = (await api(server, 'GET', `${V3}/notifications`, { token: bob.accessToken })).body;
    expect(all.notifications.map((n: any) => [n.event.event_id, n.room_id, n.read])).toEqual([[third, roomId, false], [mention, other, false], [first, roomId, true]]);
    expect(all.notifications[1].actions).toEqual(['notify', { set_tweak: 'sound', value: 'default' }, { set_tweak: 'highlight' }]);
    expect(all.notifications[0].actions).toEqual(['notify']);
    expect(all.notifications.every((n: any) => typeof n.ts === 'number' && n.event.content.body)).toBe(true);
    expect(all.next_token).toBeUndefined();
    const highlights = (await api(server, 'GET', `${V3}/notifications?only=highlight`, { token: bob.accessToken })).body;
    expect(highlights.notifications.map((n: any) => n.event.event_id)).toEqual([mention]);
    const page1 = (await api(server, 'GET', `${V3}/notifications?limit=2`, { token: bob.accessToken })).body;
    expect(page1.notifications.map((n: any) => n.event.event_id)).toEqual([third, mention]);
    const page2 = (await api(server, 'GET', `${V3}/notifications?limit=2&from=${page1.next_token}`, { token: bob.accessToken })).body;
    expect(page2.notifications.map((n: any) => n.event.event_id)).toEqual([first]);
    expect(page2.next_token).toBeUndefined();
  });
});
