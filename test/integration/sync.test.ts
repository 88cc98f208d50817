import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bodies, clientCalls, V3 } from '../support/client-calls.ts';
import { api, nextLongPoll, register, UNTIL_WOKEN_MS, startTestServer, type Account, type TestServer } from './harness.ts';

let server: TestServer;
let alice: Account;
let bob: Account;

beforeAll(async () => {
  server = await startTestServer();
  alice = await register(server, 'alice');
  bob = await register(server, 'bob');
});
afterAll(() => server.close());

const enc = encodeURIComponent;
const sync = (account: Account, query = '') => api(server, 'GET', `/_matrix/client/v3/sync${query}`, { token: account.accessToken });
const send = (account: Account, roomId: string, body: string, txn = `t${Math.random()}`) =>
  api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/${enc(txn)}`, { token: account.accessToken, body: { msgtype: 'm.text', body } });
const createRoom = async (account: Account, body: object = {}) =>
  (await api(server, 'POST', '/_matrix/client/v3/createRoom', { token: account.accessToken, body })).body.room_id as string;

describe('/sync', () => {
  it('never returns an event twice across incremental syncs', async () => {
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await api(server, 'POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: bob.accessToken, body: {} });
    let since = (await sync(bob)).body.next_batch;
    const seen = new Map<string, number>();
    const sending = (async () => {
      for (let i = 0; i < 40; i++) await send(alice, roomId, `m${i}`);
    })();
    let done = false;
    void sending.then(() => (done = true));
    while (!done || seen.size < 40) {
      const r = await sync(bob, `?since=${since}&timeout=2000`);
      for (const event of r.body.rooms.join[roomId]?.timeline.events ?? []) seen.set(event.event_id, (seen.get(event.event_id) ?? 0) + 1);
      for (const event of r.body.rooms.join[roomId]?.state.events ?? []) seen.set(event.event_id, (seen.get(event.event_id) ?? 0) + 1);
      since = r.body.next_batch;
      if (done && r.body.rooms.join[roomId] === undefined) break;
    }
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    expect(seen.size).toBe(40);
  });

  it('wakes a waiting long-poll as soon as a message is sent', async () => {
    const roomId = await createRoom(alice);
    const since = (await sync(alice)).body.next_batch;
    const listening = nextLongPoll(server);
    const polling = sync(alice, `?since=${since}&timeout=${UNTIL_WOKEN_MS}`);
    await listening;
    await send(alice, roomId, 'wake up');
    const r = await polling;
    expect(r.body.rooms.join[roomId].timeline.events.map((e: any) => e.content.body)).toEqual(['wake up']);
  });

  it('returns after the timeout with the same position when nothing happens', async () => {
    const since = (await sync(alice)).body.next_batch;
    const started = Date.now();
    const r = await sync(alice, `?since=${since}&timeout=300`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(r.body.next_batch).toBe(since);
  });

  it('limits the timeline and gives a prev_batch that /messages continues from', async () => {
    const roomId = await createRoom(alice);
    for (let i = 0; i < 15; i++) await send(alice, roomId, `n${i}`);
    const filter = JSON.stringify({ room: { timeline: { limit: 5 } } });
    const r = await sync(alice, `?filter=${enc(filter)}`);
    const timeline = r.body.rooms.join[roomId].timeline;
    expect(timeline.limited).toBe(true);
    expect(timeline.events.map((e: any) => e.content.body)).toEqual(['n10', 'n11', 'n12', 'n13', 'n14']);
    const older = await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=3&from=${timeline.prev_batch}`, { token: alice.accessToken });
    expect(older.body.chunk.map((e: any) => e.content.body)).toEqual(['n9', 'n8', 'n7']);
    const forward = await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=f&limit=3&from=${older.body.end}`, { token: alice.accessToken });
    expect(forward.body.chunk.map((e: any) => e.content.body)).toEqual(['n7', 'n8', 'n9']);
  });

  it('stores filters and applies types, not_types and lazy_load_members', async () => {
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await api(server, 'POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: bob.accessToken, body: {} });
    await send(alice, roomId, 'hello');
    const created = await api(server, 'POST', `/_matrix/client/v3/user/${enc(bob.userId)}/filter`, {
      token: bob.accessToken,
      body: { room: { rooms: [roomId], timeline: { types: ['m.room.message'] }, state: { lazy_load_members: true } } },
    });
    const r = await sync(bob, `?filter=${created.body.filter_id}`);
    const room = r.body.rooms.join[roomId];
    expect(Object.keys(r.body.rooms.join)).toEqual([roomId]);
    expect(room.timeline.events.map((e: any) => e.type)).toEqual(['m.room.message']);
    const members = room.state.events.filter((e: any) => e.type === 'm.room.member').map((e: any) => e.state_key).sort();
    expect(members).toEqual([alice.userId, bob.userId].sort());
  });

  it('gives the full state with full_state, and stops at `to` in /messages', async () => {
    const roomId = await createRoom(alice, { name: 'Full' });
    const since = (await sync(alice)).body.next_batch;
    await send(alice, roomId, 'one');
    const incremental = await sync(alice, `?since=${since}`);
    expect(incremental.body.rooms.join[roomId].state.events).toEqual([]);
    const full = await sync(alice, `?since=${since}&full_state=true`);
    const types = full.body.rooms.join[roomId].state.events.map((e: any) => e.type);
    expect(types).toEqual(expect.arrayContaining(['m.room.create', 'm.room.name', 'm.room.power_levels', 'm.room.member']));
    await send(alice, roomId, 'two');
    const between = await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=f&from=${since}&to=${incremental.body.next_batch}`, { token: alice.accessToken });
    expect(between.body.chunk.map((e: any) => e.content.body)).toEqual(['one']);
  });

  it('reports a room whose only news is a tag, a receipt or typing', async () => {
    const quiet = await createRoom(alice);
    const other = await createRoom(alice);
    const { event_id: eventId } = (await send(alice, quiet, 'hello')).body;
    let since = (await sync(alice)).body.next_batch;
    await api(server, 'PUT', `/_matrix/client/v3/user/${enc(alice.userId)}/rooms/${enc(quiet)}/tags/u.work`, { token: alice.accessToken, body: {} });
    let r = await sync(alice, `?since=${since}`);
    expect(Object.keys(r.body.rooms.join)).toEqual([quiet]);
    expect(r.body.rooms.join[quiet].account_data.events[0].type).toBe('m.tag');
    since = r.body.next_batch;
    await api(server, 'POST', `/_matrix/client/v3/rooms/${enc(quiet)}/receipt/m.read/${enc(eventId)}`, { token: alice.accessToken, body: {} });
    r = await sync(alice, `?since=${since}`);
    expect(Object.keys(r.body.rooms.join)).toEqual([quiet]);
    expect(r.body.rooms.join[quiet].ephemeral.events.map((e: any) => e.type)).toEqual(['m.receipt']);
    since = r.body.next_batch;
    await api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(other)}/typing/${enc(alice.userId)}`, { token: alice.accessToken, body: { typing: true, timeout: 10_000 } });
    r = await sync(alice, `?since=${since}`);
    expect(Object.keys(r.body.rooms.join)).toEqual([other]);
    expect(r.body.rooms.join[other].ephemeral.events[0].content.user_ids).toEqual([alice.userId]);
  });

  it('wakes a long-poll when someone sharing a room changes presence', async () => {
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await api(server, 'POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: bob.accessToken, body: {} });
    const since = (await sync(alice, '?set_presence=offline')).body.next_batch;
    const listening = nextLongPoll(server);
    const polling = sync(alice, `?since=${since}&timeout=${UNTIL_WOKEN_MS}&set_presence=offline`);
    await listening;
    await api(server, 'PUT', `/_matrix/client/v3/presence/${enc(bob.userId)}/status`, { token: bob.accessToken, body: { presence: 'unavailable', status_msg: 'away' } });
    const r = await polling;
    expect(r.body.presence.events.find((e: any) => e.sender === bob.userId).content).toMatchObject({ presence: 'unavailable', status_msg: 'away' });
  });

  it('keeps presence as set_presence says, offline meaning "leave it alone" as Synapse reads it', async () => {
    const carol = await register(server, 'carol');
    const presence = async () => (await api(server, 'GET', `/_matrix/client/v3/presence/${enc(carol.userId)}/status`, { token: alice.accessToken })).body.presence;
    await sync(carol, '?set_presence=offline');
    expect(await presence()).toBe('offline');
    await sync(carol, '?set_presence=online');
    expect(await presence()).toBe('online');
    await sync(carol, '?set_presence=offline');
    expect(await presence()).toBe('online');
    await sync(carol, '?set_presence=unavailable');
    expect(await presence()).toBe('unavailable');
    await sync(carol, '?set_presence=offline');
    expect(await presence()).toBe('unavailable');
  });

  it('lists invites with stripped state and left rooms', async () => {
    const roomId = await createRoom(alice, { name: 'Secret', invite: [bob.userId] });
    const since = (await sync(bob)).body.next_batch;
    const initial = await sync(bob);
    expect(initial.body.rooms.invite[roomId].invite_state.events.some((e: any) => e.type === 'm.room.name' && e.content.name === 'Secret')).toBe(true);
    await api(server, 'POST', `/_matrix/client/v3/rooms/${enc(roomId)}/leave`, { token: bob.accessToken, body: {} });
    const after = await sync(bob, `?since=${since}`);
    expect(after.body.rooms.leave[roomId].timeline.events.at(-1).content.membership).toBe('leave');
  });

  it('keeps tokens valid across a restart of the homeserver', async () => {
    const { default: initSqlJs } = await import('sql.js');
    const { openSqlJsDatabase } = await import('../../src/storage/sqljs-database.ts');
    const { createHomeserver, homeserverSchemas } = await import('../../src/homeserver.ts');
    const sqlJs = await initSqlJs();
    const seed = crypto.getRandomValues(new Uint8Array(32));
    const first = await createHomeserver({ database: await openSqlJsDatabase({ sqlJs, schemas: homeserverSchemas }), seed, rateLimits: false, passwordIterations: 1000 });
    const call = async (hs: typeof first, method: string, path: string, token?: string, body?: unknown) => {
      const response = await hs.fetch(new Request(`http://localhost${path}`, {
        method, headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
      }));
      return (await response.json()) as any;
    };
    const account = await call(first, 'POST', '/_matrix/client/v3/register', undefined, { username: 'restart', password: 'p', auth: { type: 'm.login.dummy' } });
    const roomId = (await call(first, 'POST', '/_matrix/client/v3/createRoom', account.access_token, {})).room_id;
    const since = (await call(first, 'GET', '/_matrix/client/v3/sync', account.access_token)).next_batch;
    const image = (first.services.users as any).options.db.db.export() as Uint8Array;
    await first.close();

    const second = await createHomeserver({ database: await openSqlJsDatabase({ sqlJs, schemas: homeserverSchemas, image }), seed, rateLimits: false, passwordIterations: 1000 });
    await call(second, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/after`, account.access_token, { msgtype: 'm.text', body: 'after restart' });
    const r = await call(second, 'GET', `/_matrix/client/v3/sync?since=${since}`, account.access_token);
    expect(r.rooms.join[roomId].timeline.events.map((e: any) => e.content.body)).toEqual(['after restart']);
    await second.close();
  });
});

describe('idempotent sends', () => {
  it('returns the same event for a repeated txnId from the same device', async () => {
    const roomId = await createRoom(alice);
    const first = await send(alice, roomId, 'once', 'same-txn');
    const second = await send(alice, roomId, 'once', 'same-txn');
    expect(second.body.event_id).toBe(first.body.event_id);
    const messages = await api(server, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=20`, { token: alice.accessToken });
    expect(messages.body.chunk.filter((e: any) => e.content.body === 'once')).toHaveLength(1);
    expect(messages.body.chunk.find((e: any) => e.content.body === 'once').unsigned.transaction_id).toBe('same-txn');
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 9).
describe('typing', () => {
  const { newUser, createRoom, join, sync } = clientCalls(() => server);
  it('typing expires after its timeout, and a waiting /sync hears that the user stopped', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    await join(bob, roomId);
    const typing = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/typing/${enc(alice.userId)}`, { token: alice.accessToken, body: { typing: true, timeout: 300 } });
    expect(typing.status).toBe(200);
    const now = await sync(bob);
    const typingNow = now.rooms.join[roomId].ephemeral.events.find((e: any) => e.type === 'm.typing');
    expect(typingNow.content.user_ids).toEqual([alice.userId]);
    const later = await sync(bob, { since: now.next_batch, timeout: UNTIL_WOKEN_MS });
    const stopped = later.rooms.join[roomId].ephemeral.events.find((e: any) => e.type === 'm.typing');
    expect(stopped.content.user_ids).toEqual([]);
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 11).
describe('a room joined since the token', () => {
  const { newUser, createRoom, join, send, sync } = clientCalls(() => server);
  it('incremental /sync gives its full state, its recent timeline and its members’ presence', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(bob, { preset: 'public_chat', name: 'Joined later', topic: 'about it' });
    for (let i = 0; i < 3; i++) await send(bob, roomId, `before ${i}`);
    await api(server, 'PUT', `${V3}/presence/${enc(bob.userId)}/status`, { token: bob.accessToken, body: { presence: 'unavailable', status_msg: 'gardening' } });
    const since = (await sync(alice)).next_batch;
    await join(alice, roomId);
    const r = await sync(alice, { since });
    const room = r.rooms.join[roomId];
    const types = [...room.state.events, ...room.timeline.events].filter((e: any) => e.state_key !== undefined).map((e: any) => `${e.type}|${e.state_key}`);
    expect(types).toEqual(expect.arrayContaining([
      'm.room.create|', 'm.room.power_levels|', 'm.room.join_rules|', 'm.room.name|', 'm.room.topic|', 'm.room.history_visibility|',
      `m.room.member|${bob.userId}`, `m.room.member|${alice.userId}`,
    ]));
    expect(room.timeline.events.at(-1)).toMatchObject({ type: 'm.room.member', state_key: alice.userId });
    expect(bodies(room.timeline.events)).toEqual(['before 0', 'before 1', 'before 2']);
    expect(r.presence.events.find((e: any) => e.sender === bob.userId)?.content).toMatchObject({ presence: 'unavailable', status_msg: 'gardening' });
  });
});

// As Synapse marks it (issue 24, client behaviour 4).
describe('the timeline of a room joined since the token', () => {
  const { newUser, createRoom, join, send, sync } = clientCalls(() => server);
  it('is limited when it does not start at the room’s creation, whatever left the rest out', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const busy = await createRoom(bob, { preset: 'public_chat' });
    for (let i = 0; i < 15; i++) await send(bob, busy, `before ${i}`);
    const small = await createRoom(bob, { preset: 'public_chat' });
    await send(bob, small, 'hello');
    const since = (await sync(alice)).next_batch;
    await join(alice, busy);
    await join(alice, small);
    await send(bob, busy, 'after the join');
    const rooms = (filter?: object) => sync(alice, { since, ...(filter ? { filter } : {}) }).then((r) => r.rooms.join);
    // More than the limit: limited.
    const crowded = (await rooms())[busy].timeline;
    expect([crowded.events[0].type, crowded.limited, bodies(crowded.events).at(-1)]).toEqual(['m.room.message', true, 'after the join']);
    expect(crowded.prev_batch).toEqual(expect.any(String));
    // All of it fits: from its creation, not limited.
    const whole = (await rooms())[small].timeline;
    expect([whole.events[0].type, whole.limited]).toEqual(['m.room.create', false]);
    // A filter left the room's beginning out: the client has not the room from its creation, so limited, as Synapse says.
    const filtered = (await rooms({ room: { timeline: { types: ['m.room.message', 'm.room.member'] } } }))[small].timeline;
    expect([filtered.events[0].type, filtered.limited]).toEqual(['m.room.member', true]);
    expect(bodies(filtered.events)).toEqual(['hello']);
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 14).
describe('display name changes in /sync', () => {
  const { newUser, createRoom, join, sync } = clientCalls(() => server);
  it('appear in incremental /sync as a member event in the timeline, not as the whole state again', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat', name: 'Renames' });
    await join(bob, roomId);
    for (const [account, name] of [[alice, 'Alice Again'], [bob, 'Bob Again']] as const) {
      const sinceAlice = (await sync(alice)).next_batch;
      const sinceBob = (await sync(bob)).next_batch;
      await api(server, 'PUT', `${V3}/profile/${enc(account.userId)}/displayname`, { token: account.accessToken, body: { displayname: name } });
      for (const [viewer, since] of [[alice, sinceAlice], [bob, sinceBob]] as const) {
        const room = (await sync(viewer, { since })).rooms.join[roomId];
        expect(room.timeline.events.map((e: any) => [e.type, e.state_key, e.content.displayname])).toEqual([['m.room.member', account.userId, name]]);
        expect(room.timeline.limited).toBe(false);
        expect(room.state.events).toEqual([]);
      }
    }
  });
});

// The conformance suites' case (issue 41): a filter that keeps member events out of both sections leaves nothing.
describe('a display name change hidden by the filter', () => {
  const { newUser, createRoom, putState, send, sync } = clientCalls(() => server);
  it('brings no room into an incremental /sync, not its whole state again', async () => {
    const alice = await newUser('alice');
    const filter = { room: { timeline: { types: [] }, state: { types: ['a.madeup.test.state'] }, ephemeral: { types: [] } }, presence: { types: [] } };
    const roomId = await createRoom(alice);
    await putState(alice, roomId, 'a.madeup.test.state', '', { my_key: 1 });
    const initial = await sync(alice, { filter });
    expect(initial.rooms.join[roomId].state.events.map((e: any) => e.type)).toEqual(['a.madeup.test.state']);
    await putState(alice, roomId, 'm.room.member', alice.userId, { membership: 'join', displayname: 'boris' });
    await send(alice, roomId, 'A message to wait on');
    const next = await sync(alice, { filter, since: initial.next_batch, timeout: 0 });
    expect(next.rooms?.join ?? {}).toEqual({});
  });
});

// What established homeservers (Synapse, Dendrite) and the spec have clients expect (issue 13, item 15).
describe('joined and left in one sync window', () => {
  const { newUser, createRoom, join, leave, send, sync } = clientCalls(() => server);
  it('the next /sync has the room under leave, with its state', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const roomId = await createRoom(alice, { preset: 'public_chat', name: 'Briefly' });
    await send(alice, roomId, 'before bob');
    const since = (await sync(bob)).next_batch;
    await join(bob, roomId);
    await send(alice, roomId, 'while bob is here');
    await leave(bob, roomId);
    await send(alice, roomId, 'after bob');
    const r = await sync(bob, { since });
    expect(r.rooms.join[roomId]).toBeUndefined();
    const left = r.rooms.leave[roomId];
    expect(left.timeline.events.at(-1)).toMatchObject({ type: 'm.room.member', state_key: bob.userId, content: { membership: 'leave' } });
    expect(bodies(left.timeline.events)).not.toContain('after bob');
    const state = [...left.state.events, ...left.timeline.events].filter((e: any) => e.state_key !== undefined).map((e: any) => `${e.type}|${e.state_key}`);
    expect(state).toEqual(expect.arrayContaining(['m.room.create|', 'm.room.name|', 'm.room.power_levels|', `m.room.member|${alice.userId}`]));
    expect(left.state.events.find((e: any) => e.type === 'm.room.name').content.name).toBe('Briefly');
  });
});

// The deprecated event stream, still in the spec and served by Synapse, for clients that poll it (issue 24, client behaviour 12).
describe('GET /events', () => {
  const { newUser, createRoom, join, leave, send, sync } = clientCalls(() => server);
  const events = (account: Account, query: string) => api(server, 'GET', `${V3}/events?${query}`, { token: account.accessToken });
  it('gives what came after `from` in the user’s rooms, long-polls with `timeout`, and its `end` leads on', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const carol = await newUser('carol');
    const roomId = await createRoom(alice, { preset: 'public_chat' });
    const elsewhere = await createRoom(carol, { preset: 'public_chat' });
    await join(bob, roomId);
    const from = (await sync(bob)).next_batch as string;
    await send(alice, roomId, 'one');
    await send(carol, elsewhere, 'not for bob');
    await send(alice, roomId, 'two');
    const first = await events(bob, `from=${enc(from)}&timeout=0`);
    expect(first.status).toBe(200);
    expect(first.body.start).toBe(from);
    expect(first.body.chunk.map((e: any) => [e.room_id, e.sender, e.content.body])).toEqual([[roomId, alice.userId, 'one'], [roomId, alice.userId, 'two']]);

    // Nothing new: the timeout passes, nothing comes, and the position stays.
    const quiet = await events(bob, `from=${enc(first.body.end)}&timeout=50`);
    expect([quiet.body.chunk, quiet.body.end]).toEqual([[], first.body.end]);

    // A waiting poll wakes when a message is sent.
    const listening = nextLongPoll(server);
    const polling = events(bob, `from=${enc(first.body.end)}&timeout=${UNTIL_WOKEN_MS}`);
    await listening;
    await send(alice, roomId, 'three');
    const woken = await polling;
    expect(bodies(woken.body.chunk)).toEqual(['three']);
    expect(woken.body.start).toBe(first.body.end);

    // Without `from`, it waits from now: what came before is not given again.
    const fromNow = nextLongPoll(server);
    const pollingNow = events(bob, `timeout=${UNTIL_WOKEN_MS}`);
    await fromNow;
    await send(alice, roomId, 'four');
    expect(bodies((await pollingNow).body.chunk)).toEqual(['four']);

    // Invites and leaves come as the member events; nothing after bob's leave.
    const other = await createRoom(alice, { preset: 'private_chat' });
    const before = (await events(bob, `from=${enc(woken.body.end)}&timeout=0`)).body.end;
    await api(server, 'POST', `${V3}/rooms/${enc(other)}/invite`, { token: alice.accessToken, body: { user_id: bob.userId } });
    await leave(bob, roomId);
    await send(alice, roomId, 'after bob left');
    const later = await events(bob, `from=${enc(before)}&timeout=0`);
    expect(later.body.chunk.map((e: any) => [e.room_id, e.type, e.state_key, e.content.membership ?? e.content.body])).toEqual([
      [other, 'm.room.member', bob.userId, 'invite'],
      [roomId, 'm.room.member', bob.userId, 'leave'],
    ]);

    const bad = await api(server, 'GET', `${V3}/events?from=nonsense&timeout=0`, { token: bob.accessToken, unchecked: true });
    expect([bad.status, bad.body.errcode]).toEqual([400, 'M_INVALID_PARAM']);
  });
});
