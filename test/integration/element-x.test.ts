// Element X on a server without MAS: it signs in with a password and then lives on simplified sliding
// sync (MSC4186), through matrix-rust-sdk. Its FFI cannot run in this suite: there is no Element X
// build for this machine, and compiling matrix-sdk from crates.io (hundreds of crates on two cores)
// on every CI run would not fit the run's time budget. So this drives
// the requests it sends, as matrix-rust-sdk's own code and tests write them: discovery and /versions,
// the OIDC probes that must say "no", the login flows, the room list connection ("room-list": the
// all_rooms list, its required_state, $LAZY and $ME, the growing ranges, a room subscription), and
// the encryption connection ("encryption": e2ee and to_device), the two long-polling side by side.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

const V3 = '/_matrix/client/v3';
const SSS = '/_matrix/client/unstable/org.matrix.simplified_msc3575/sync';
const enc = encodeURIComponent;
const PASSWORD = 'correct horse battery staple';

// matrix-sdk-ui's room list: DEFAULT_REQUIRED_STATE, in its order.
const ROOM_LIST_REQUIRED_STATE = [
  ['m.room.name', ''], ['m.room.encryption', ''], ['m.room.member', '$LAZY'], ['m.room.member', '$ME'], ['m.room.topic', ''],
  ['m.room.avatar', ''], ['m.room.canonical_alias', ''], ['m.room.power_levels', ''], ['org.matrix.msc3401.call.member', '*'],
  ['m.room.join_rules', ''], ['m.room.tombstone', ''], ['m.room.create', ''], ['m.room.history_visibility', ''],
  ['io.element.functional_members', ''], ['m.space.parent', '*'], ['m.space.child', '*'], ['org.matrix.msc3672.beacon_info', '*'],
];
const roomListRequest = (range: [number, number]) => ({
  conn_id: 'room-list',
  lists: { all_rooms: { ranges: [range], required_state: ROOM_LIST_REQUIRED_STATE, filters: {}, timeline_limit: 1 } },
  extensions: { account_data: { enabled: true }, receipts: { enabled: true, rooms: ['*'] }, typing: { enabled: true } },
});
const encryptionRequest = (toDeviceSince?: string) => ({
  conn_id: 'encryption',
  extensions: { e2ee: { enabled: true }, to_device: { enabled: true, ...(toDeviceSince ? { since: toDeviceSince } : {}) } },
});

let server: TestServer;
let bob: Account;
let roomId: string;

beforeAll(async () => {
  server = await startTestServer();
  const alice = await register(server, 'alice', PASSWORD);
  bob = await register(server, 'bob');
  roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: bob.accessToken, body: { name: 'Garden', preset: 'public_chat' } })).body.room_id;
  await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/x1`, { token: bob.accessToken, body: { msgtype: 'm.text', body: 'welcome' } });
  await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: alice.accessToken, body: {} });
});
afterAll(() => server.close());

const slide = (token: string, body: object, query = '') => api(server, 'POST', `${SSS}${query}`, { token, body, unchecked: true });

/** Element X's sign-in: a new device of alice's, with a refresh token. */
const signIn = () => api(server, 'POST', `${V3}/login`, {
  body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'alice' }, password: PASSWORD, initial_device_display_name: 'Element X', refresh_token: true },
});

describe('Element X (matrix-rust-sdk) against Hearth', () => {
  // Each case signs in afresh, so it runs alone and its sliding sync connections start empty;
  // alice is in the room from the file's set-up, as she would be after the first sign-in.
  let token: string;
  beforeEach(async () => {
    token = (await signIn()).body.access_token;
  });

  it('finds the server, learns it has simplified sliding sync and no OIDC provider, and signs in with a password', async () => {
    const wellKnown = await api(server, 'GET', '/.well-known/matrix/client', { unchecked: true });
    expect(wellKnown.body['m.homeserver'].base_url).toBe(server.url);
    const versions = await api(server, 'GET', '/_matrix/client/versions');
    expect(versions.body.unstable_features['org.matrix.simplified_msc3575']).toBe(true);
    // matrix-rust-sdk asks for the OIDC metadata (stable, then MSC2965's unstable issuer) and signs in with
    // m.login.password when both are unrecognized.
    for (const path of ['/_matrix/client/v1/auth_metadata', '/_matrix/client/unstable/org.matrix.msc2965/auth_metadata', '/_matrix/client/unstable/org.matrix.msc2965/auth_issuer']) {
      const answer = await api(server, 'GET', path, { unchecked: true });
      expect([answer.status, answer.body.errcode], path).toEqual([404, 'M_UNRECOGNIZED']);
    }
    const flows = await api(server, 'GET', `${V3}/login`);
    expect(flows.body.flows.map((f: any) => f.type)).toContain('m.login.password');
    const login = await signIn();
    expect(login.status).toBe(200);
    expect(login.body).toMatchObject({ user_id: expect.stringMatching(/^@alice:/), access_token: expect.any(String), device_id: expect.any(String) });
  });

  it('loads the room list: the first page at once, then growing ranges, each room with its required state and one event', async () => {
    const first = await slide(token, roomListRequest([0, 19]), '?timeout=0');
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.pos).toEqual(expect.any(String));
    expect(first.body.lists.all_rooms.count).toBe(1);
    const room = first.body.rooms[roomId];
    // What matrix-sdk-base reads of a room to show it in the list.
    expect(room).toMatchObject({
      name: 'Garden', initial: true, bump_stamp: expect.any(Number), joined_count: 2, invited_count: 0,
      notification_count: expect.any(Number), highlight_count: expect.any(Number), prev_batch: expect.any(String), limited: true,
    });
    expect(room.timeline).toHaveLength(1);
    const state = room.required_state.map((e: any) => `${e.type}|${e.state_key}`);
    for (const key of ['m.room.create|', 'm.room.name|', 'm.room.power_levels|', 'm.room.join_rules|', 'm.room.history_visibility|']) expect(state).toContain(key);
    // $ME: the user's own member event; $LAZY: the timeline's sender's.
    expect(state).toContain(`m.room.member|${first.body.rooms[roomId].timeline[0].sender}`);
    expect(state.filter((k: string) => k.startsWith('m.room.member|')).length).toBeGreaterThanOrEqual(1);
    expect(first.body.extensions).toEqual(expect.any(Object));

    const grown = await slide(token, roomListRequest([0, 99]), `?pos=${enc(first.body.pos)}&timeout=0`);
    expect(grown.status, JSON.stringify(grown.body)).toBe(200);
    expect(grown.body.lists.all_rooms.count).toBe(1);
  });

  it('is told M_UNKNOWN_POS for a position the server does not know, and starts the connection again', async () => {
    // matrix-rust-sdk drops its pos and resends the whole request on exactly this errcode (an expired connection).
    const stale = await slide(token, roomListRequest([0, 19]), '?pos=not-a-position&timeout=0');
    expect([stale.status, stale.body.errcode]).toEqual([400, 'M_UNKNOWN_POS']);
    const again = await slide(token, roomListRequest([0, 19]), '?timeout=0');
    expect(again.body.rooms[roomId].initial).toBe(true);
  });

  it('subscribes to the room it opens: its required state with pinned events, and twenty events', async () => {
    const list = await slide(token, roomListRequest([0, 19]), '?timeout=0');
    const subscribed = await slide(token, {
      ...roomListRequest([0, 19]),
      room_subscriptions: { [roomId]: { required_state: [...ROOM_LIST_REQUIRED_STATE, ['m.room.pinned_events', '']], timeline_limit: 20 } },
    }, `?pos=${enc(list.body.pos)}&timeout=0`);
    expect(subscribed.status, JSON.stringify(subscribed.body)).toBe(200);
    expect(subscribed.body.rooms[roomId].timeline.length).toBeGreaterThan(1);
  });

  it('runs the encryption connection beside the room list, and both long-polls wake for what concerns them', async () => {
    const e2ee = await slide(token, encryptionRequest(), '?timeout=0');
    expect(e2ee.status, JSON.stringify(e2ee.body)).toBe(200);
    expect(e2ee.body.extensions.e2ee).toMatchObject({ device_one_time_keys_count: expect.any(Object) });
    expect(e2ee.body.extensions.to_device.next_batch).toEqual(expect.any(String));
    const list = await slide(token, roomListRequest([0, 19]), '?timeout=0');

    const listPoll = slide(token, roomListRequest([0, 19]), `?pos=${enc(list.body.pos)}&timeout=30000`);
    const e2eePoll = slide(token, encryptionRequest(e2ee.body.extensions.to_device.next_batch), `?pos=${enc(e2ee.body.pos)}&timeout=30000`);
    await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/x2`, { token: bob.accessToken, body: { msgtype: 'm.text', body: 'news' } });
    const woken = await listPoll;
    const news = woken.body.rooms[roomId].timeline;
    expect(news.map((e: any) => e.content.body)).toEqual(['news']);
    // Receipts come through the room list connection's extension, for every room ("*").
    const receiptPoll = slide(token, roomListRequest([0, 19]), `?pos=${enc(woken.body.pos)}&timeout=30000`);
    await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/receipt/m.read/${enc(news[0].event_id)}`, { token: bob.accessToken, body: {} });
    const receipts = (await receiptPoll).body.extensions.receipts;
    expect(receipts.rooms[roomId].content[news[0].event_id]['m.read'][bob.userId]).toMatchObject({ ts: expect.any(Number) });
    const whoami = await api(server, 'GET', `${V3}/account/whoami`, { token });
    await api(server, 'PUT', `${V3}/sendToDevice/m.room_key_request/t1`, { token: bob.accessToken, body: { messages: { [whoami.body.user_id]: { [whoami.body.device_id]: { action: 'cancellation', requesting_device_id: 'X', request_id: 'r1' } } } } });
    const keys = await e2eePoll;
    expect(keys.body.extensions.to_device.events.map((e: any) => e.type)).toEqual(['m.room_key_request']);
  });
});
