// Relations, threads and read markers through the real API: matrix-js-sdk (two users on one
// server) reacting, editing and replying in a thread, and what the other client sees; raw
// HTTP, checked against the spec's OpenAPI, for /relations pagination, /threads, duplicate
// annotations, threaded receipts and read markers (a private receipt nobody else sees).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';
import { sdk, startClient, waitFor } from './sdk.ts';
import { federatedServers, sharedRoom, syncUntil } from '../support/federated-homeservers.ts';

let server: TestServer;
let alice: Account;
let bob: Account;
let roomId: string;
const V3 = '/_matrix/client/v3';
const V1 = '/_matrix/client/v1';
const enc = encodeURIComponent;

beforeAll(async () => {
  server = await startTestServer();
  [alice, bob] = [await register(server, 'alice'), await register(server, 'bob')];
  roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: { preset: 'public_chat' } })).body.room_id;
  expect((await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: bob.accessToken, body: {} })).status).toBe(200);
});
afterAll(() => server.close());

let txn = 0;
async function send(account: Account, type: string, content: Record<string, unknown>, room = roomId): Promise<string> {
  const response = await api(server, 'PUT', `${V3}/rooms/${enc(room)}/send/${enc(type)}/r${++txn}`, { token: account.accessToken, body: content });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.event_id;
}
const say = (account: Account, body: string, extra: Record<string, unknown> = {}, room = roomId) => send(account, 'm.room.message', { msgtype: 'm.text', body, ...extra }, room);
const react = (account: Account, parent: string, key: string) => send(account, 'm.reaction', { 'm.relates_to': { rel_type: 'm.annotation', event_id: parent, key } });
const inThread = (root: string) => ({ 'm.relates_to': { rel_type: 'm.thread', event_id: root, is_falling_back: true, 'm.in_reply_to': { event_id: root } } });
const relations = (account: Account, parent: string, query = '', path = '', room = roomId) =>
  api(server, 'GET', `${V1}/rooms/${enc(room)}/relations/${enc(parent)}${path}${query ? `?${query}` : ''}`, { token: account.accessToken });

describe('/relations', () => {
  it('pages through children newest first, by type and event type, both ways, and `to` stops', async () => {
    const parent = await say(alice, 'parent');
    const children: string[] = [];
    for (let i = 0; i < 5; i++) children.push(await send(bob, 'org.example.child', { 'm.relates_to': { rel_type: 'org.example.rel', event_id: parent }, i }));
    const reaction = await react(bob, parent, '👍');
    const reference = await say(alice, 'see above', { 'm.relates_to': { rel_type: 'm.reference', event_id: parent } });
    // Not related: a reply (m.in_reply_to is no rel_type) and an event relating to another event.
    await say(alice, 'a reply', { 'm.relates_to': { 'm.in_reply_to': { event_id: parent } } });

    const all = await relations(alice, parent);
    expect(all.status).toBe(200);
    expect(all.body.chunk.map((e: any) => e.event_id)).toEqual([reference, reaction, ...[...children].reverse()]);
    expect(all.body.next_batch).toBeUndefined();
    expect(all.body.recursion_depth).toBeUndefined();

    const first = await relations(alice, parent, 'limit=2', '/org.example.rel');
    expect(first.body.chunk.map((e: any) => e.event_id)).toEqual([children[4], children[3]]);
    const second = await relations(alice, parent, `limit=2&from=${enc(first.body.next_batch)}`, '/org.example.rel');
    expect(second.body.chunk.map((e: any) => e.event_id)).toEqual([children[2], children[1]]);
    expect(second.body.prev_batch).toBe(first.body.next_batch);
    const third = await relations(alice, parent, `limit=2&from=${enc(second.body.next_batch)}`, '/org.example.rel');
    expect(third.body.chunk.map((e: any) => e.event_id)).toEqual([children[0]]);
    expect(third.body.next_batch).toBeUndefined();

    const forward = await relations(alice, parent, 'dir=f&limit=3', '/org.example.rel/org.example.child');
    expect(forward.body.chunk.map((e: any) => e.event_id)).toEqual(children.slice(0, 3));
    const rest = await relations(alice, parent, `dir=f&from=${enc(forward.body.next_batch)}`, '/org.example.rel/org.example.child');
    expect(rest.body.chunk.map((e: any) => e.event_id)).toEqual(children.slice(3));
    // `to` from an earlier page's token bounds the walk.
    const bounded = await relations(alice, parent, `to=${enc(second.body.next_batch)}`, '/org.example.rel');
    expect(bounded.body.chunk.map((e: any) => e.event_id)).toEqual([children[4], children[3], children[2], children[1]]);

    expect((await relations(alice, parent, '', '/m.annotation/m.reaction')).body.chunk.map((e: any) => e.content['m.relates_to'].key)).toEqual(['👍']);
    expect((await relations(alice, parent, '', '/m.annotation/m.room.message')).body.chunk).toEqual([]);
    // A /sync token is a valid `from`.
    const next = (await api(server, 'GET', `${V3}/sync?timeout=0`, { token: alice.accessToken })).body.next_batch;
    expect((await relations(alice, parent, `from=${enc(next)}&limit=1`)).body.chunk.map((e: any) => e.event_id)).toEqual([reference]);

    // The parent carries its reference as a bundled aggregation.
    const served = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/event/${enc(parent)}`, { token: bob.accessToken });
    expect(served.body.unsigned['m.relations']).toEqual({ 'm.reference': { chunk: [{ event_id: reference }] } });
  });

  it('follows relations of relations with recurse, and says how deep', async () => {
    const parent = await say(alice, 'root of a chain');
    const child = await say(bob, 'child', { 'm.relates_to': { rel_type: 'm.reference', event_id: parent } });
    const grandchild = await react(alice, child, '🎉');
    expect((await relations(alice, parent)).body.chunk.map((e: any) => e.event_id)).toEqual([child]);
    const deep = await relations(alice, parent, 'recurse=true');
    expect(deep.body.chunk.map((e: any) => e.event_id)).toEqual([grandchild, child]);
    expect(deep.body.recursion_depth).toBe(3);
    expect((await relations(alice, parent, 'recurse=false')).body.recursion_depth).toBe(1);
  });

  it('answers 404 for an unknown parent or one in another room, and refuses bad parameters', async () => {
    const parent = await say(alice, 'here');
    expect((await relations(alice, '$unknown:example.org')).status).toBe(404);
    const other = (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: {} })).body.room_id;
    expect((await relations(alice, parent, '', '', other)).status).toBe(404);
    for (const query of ['dir=x', 'limit=-1', 'recurse=yes', 'from=nonsense']) {
      const response = await relations(alice, parent, query);
      expect(response.status, query).toBe(400);
      expect(response.body.errcode, query).toMatch(/^M_/);
    }
  });

  it('hides children and parents the user may not see (history visibility)', async () => {
    const room = (await api(server, 'POST', `${V3}/createRoom`, {
      token: alice.accessToken,
      body: { preset: 'public_chat', initial_state: [{ type: 'm.room.history_visibility', content: { history_visibility: 'joined' } }] },
    })).body.room_id;
    const early = await say(alice, 'before bob', {}, room);
    const earlyChild = await send(alice, 'org.example.child', { 'm.relates_to': { rel_type: 'org.example.rel', event_id: early } }, room);
    expect((await api(server, 'POST', `${V3}/join/${enc(room)}`, { token: bob.accessToken, body: {} })).status).toBe(200);
    const lateChild = await send(alice, 'org.example.child', { 'm.relates_to': { rel_type: 'org.example.rel', event_id: early } }, room);
    expect((await relations(bob, early, '', '', room)).status).toBe(404);
    expect((await relations(alice, early, '', '', room)).body.chunk.map((e: any) => e.event_id)).toEqual([lateChild, earlyChild]);
    const visibleParent = await say(alice, 'after bob joined', {}, room);
    const hiddenFromNoOne = await send(alice, 'org.example.child', { 'm.relates_to': { rel_type: 'org.example.rel', event_id: visibleParent } }, room);
    expect((await relations(bob, visibleParent, '', '', room)).body.chunk.map((e: any) => e.event_id)).toEqual([hiddenFromNoOne]);
  });

  it('drops a redacted child from /relations and from the bundle', async () => {
    const parent = await say(alice, 'to be referenced');
    const reference = await say(bob, 'ref', { 'm.relates_to': { rel_type: 'm.reference', event_id: parent } });
    expect((await relations(alice, parent)).body.chunk).toHaveLength(1);
    expect((await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/redact/${enc(reference)}/x${++txn}`, { token: bob.accessToken, body: {} })).status).toBe(200);
    expect((await relations(alice, parent)).body.chunk).toEqual([]);
    const served = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/event/${enc(parent)}`, { token: alice.accessToken });
    expect(served.body.unsigned['m.relations']).toBeUndefined();
  });
});

describe('bundled aggregations', () => {
  it("bundles the newest edit by the original sender wherever the event is served, not another user's", async () => {
    const original = await say(alice, 'frist');
    const edit = (account: Account, body: string) => say(account, `* ${body}`, { 'm.new_content': { msgtype: 'm.text', body }, 'm.relates_to': { rel_type: 'm.replace', event_id: original } });
    await edit(alice, 'first?');
    const latest = await edit(alice, 'first');
    await edit(bob, 'hijacked');
    const check = (event: any) => {
      expect(event.event_id).toBe(original);
      expect(event.content.body).toBe('frist');
      expect(event.unsigned['m.relations']['m.replace'].event_id).toBe(latest);
      expect(event.unsigned['m.relations']['m.replace'].content['m.new_content'].body).toBe('first');
    };
    const messages = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/messages?dir=b&limit=10`, { token: bob.accessToken });
    check(messages.body.chunk.find((e: any) => e.event_id === original));
    check((await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/context/${enc(original)}?limit=2`, { token: bob.accessToken })).body.event);
    check((await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/event/${enc(original)}`, { token: bob.accessToken })).body);
    const synced = await api(server, 'GET', `${V3}/sync?timeout=0&filter=${enc(JSON.stringify({ room: { timeline: { limit: 10 } } }))}`, { token: bob.accessToken });
    check(synced.body.rooms.join[roomId].timeline.events.find((e: any) => e.event_id === original));
    // The edits themselves carry no bundle; a redacted original none either.
    expect(messages.body.chunk.find((e: any) => e.event_id === latest).unsigned['m.relations']).toBeUndefined();
    expect((await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/redact/${enc(original)}/x${++txn}`, { token: alice.accessToken, body: {} })).status).toBe(200);
    const redacted = (await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/event/${enc(original)}`, { token: bob.accessToken })).body;
    expect(redacted.unsigned['m.relations']?.['m.replace']).toBeUndefined();
  });
});

describe('relations a client may not form', () => {
  it('refuses a parent in another room, a thread started from a child, and an annotation without a key', async () => {
    const other = (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: {} })).body.room_id;
    const elsewhere = await say(alice, 'in another room', {}, other);
    const root = await say(alice, 'a root');
    const reply = await say(alice, 'a reply', inThread(root));
    for (const [type, content] of [
      ['m.reaction', { 'm.relates_to': { rel_type: 'm.annotation', event_id: elsewhere, key: 'x' } }],
      ['m.room.message', { msgtype: 'm.text', body: 'thread off a reply', ...inThread(reply) }],
      ['m.reaction', { 'm.relates_to': { rel_type: 'm.annotation', event_id: root } }],
      ['m.reaction', { 'm.relates_to': { rel_type: 'm.annotation', event_id: root, key: 'x'.repeat(501) } }],
    ] as const) {
      const response = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/${type}/bad${++txn}`, { token: alice.accessToken, body: content });
      expect(response.status, JSON.stringify(content).slice(0, 80)).toBe(400);
      expect(response.body.errcode).toMatch(/^M_/);
    }
    // A parent we do not hold (yet) is fine: it may come from another server later.
    await react(alice, '$not-here-yet:example.org', 'x');
  });
});

describe('annotations', () => {
  it('refuses a second reaction with the same sender, parent and key (M_DUPLICATE_ANNOTATION), and allows it again once redacted', async () => {
    const parent = await say(alice, 'react to me');
    const first = await react(bob, parent, '👍');
    const again = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.reaction/dup${++txn}`, {
      token: bob.accessToken,
      body: { 'm.relates_to': { rel_type: 'm.annotation', event_id: parent, key: '👍' } },
    });
    expect(again.status).toBe(400);
    expect(again.body.errcode).toBe('M_DUPLICATE_ANNOTATION');
    // Another key, or another sender, is fine; a retried transaction answers with the first event.
    await react(bob, parent, '❤️');
    await react(alice, parent, '👍');
    const retried = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.reaction/r${txn}`, {
      token: alice.accessToken,
      body: { 'm.relates_to': { rel_type: 'm.annotation', event_id: parent, key: '👍' } },
    });
    expect(retried.status).toBe(200);
    expect((await relations(alice, parent, '', '/m.annotation')).body.chunk).toHaveLength(3);
    expect((await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/redact/${enc(first)}/x${++txn}`, { token: bob.accessToken, body: {} })).status).toBe(200);
    await react(bob, parent, '👍');
  });
});

describe('/threads', () => {
  it('lists thread roots by latest activity, newest first, with include=participated and pagination', async () => {
    const room = (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: { preset: 'public_chat' } })).body.room_id;
    expect((await api(server, 'POST', `${V3}/join/${enc(room)}`, { token: bob.accessToken, body: {} })).status).toBe(200);
    const aliceRoot = await say(alice, 'alice starts a thread', {}, room);
    const bobRoot = await say(bob, 'bob starts a thread', {}, room);
    const quiet = await say(bob, 'a thread nobody else joins', {}, room);
    await say(bob, 'bob replies to himself', inThread(quiet), room);
    await say(bob, 'bob replies to alice', inThread(aliceRoot), room);
    await say(bob, 'bob replies to bob', inThread(bobRoot), room);
    const latest = await say(alice, 'alice replies to bob', inThread(bobRoot), room);
    const threads = (query: string, account = alice) => api(server, 'GET', `${V1}/rooms/${enc(room)}/threads${query}`, { token: account.accessToken });

    const all = await threads('');
    expect(all.status).toBe(200);
    expect(all.body.chunk.map((e: any) => e.event_id)).toEqual([bobRoot, aliceRoot, quiet]);
    const summary = all.body.chunk[0].unsigned['m.relations']['m.thread'];
    expect(summary.count).toBe(2);
    expect(summary.latest_event.event_id).toBe(latest);
    expect(summary.current_user_participated).toBe(true);
    expect(summary.latest_event.unsigned['m.relations']).toBeUndefined();
    expect(all.body.chunk[2].unsigned['m.relations']['m.thread'].current_user_participated).toBe(false);

    // An edit of the latest event shows in the summary.
    const edit = await say(alice, '* alice replies to bob, edited', { 'm.new_content': { msgtype: 'm.text', body: 'alice replies to bob, edited' }, 'm.relates_to': { rel_type: 'm.replace', event_id: latest } }, room);
    const edited = (await threads('?limit=1')).body.chunk[0].unsigned['m.relations']['m.thread'].latest_event;
    expect(edited.event_id).toBe(latest);
    expect(edited.unsigned['m.relations']['m.replace'].event_id).toBe(edit);

    const participated = await threads('?include=participated');
    expect(participated.body.chunk.map((e: any) => e.event_id)).toEqual([bobRoot, aliceRoot]);
    expect((await threads('?include=participated', bob)).body.chunk.map((e: any) => e.event_id)).toEqual([bobRoot, aliceRoot, quiet]);

    const first = await threads('?limit=2');
    expect(first.body.chunk.map((e: any) => e.event_id)).toEqual([bobRoot, aliceRoot]);
    const second = await threads(`?limit=2&from=${enc(first.body.next_batch)}`);
    expect(second.body.chunk.map((e: any) => e.event_id)).toEqual([quiet]);
    expect(second.body.next_batch).toBeUndefined();

    // The root in /relations' view, and the thread's events by rel type.
    expect((await relations(alice, bobRoot, '', '/m.thread', room)).body.chunk.map((e: any) => e.event_id)[0]).toBe(latest);
    for (const query of ['?include=mine', '?limit=0', '?from=x']) {
      const response = await threads(query);
      expect(response.status, query).toBe(400);
      expect(response.body.errcode, query).toMatch(/^M_/);
    }
    const outsider = await register(server, 'outsider');
    expect((await threads('', outsider)).status).toBe(403);
  });
});

describe('threaded receipts and read markers', () => {
  const receipt = (account: Account, type: string, eventId: string, body: Record<string, unknown>, room = roomId) =>
    api(server, 'POST', `${V3}/rooms/${enc(room)}/receipt/${type}/${enc(eventId)}`, { token: account.accessToken, body, unchecked: typeof body['thread_id'] !== 'string' && body['thread_id'] !== undefined });
  const syncOf = (account: Account, query: string) => api(server, 'GET', `${V3}/sync?timeout=0${query}`, { token: account.accessToken });
  const threadFilter = enc(JSON.stringify({ room: { timeline: { unread_thread_notifications: true } } }));

  it('validates thread_id and counts unread notifications per thread', async () => {
    const room = (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: { preset: 'public_chat' } })).body.room_id;
    expect((await api(server, 'POST', `${V3}/join/${enc(room)}`, { token: bob.accessToken, body: {} })).status).toBe(200);
    const root = await say(alice, 'root', {}, room);
    const reply1 = await say(alice, 'in the thread 1', inThread(root), room);
    await say(alice, 'in the thread 2', inThread(root), room);
    const main = await say(alice, 'in the main timeline', {}, room);

    for (const [type, eventId, body] of [
      ['m.read', main, { thread_id: '' }],
      ['m.read', main, { thread_id: 42 }],
      ['m.read', main, { thread_id: 'elsewhere' }],
      ['m.fully_read', main, { thread_id: 'main' }],
      ['m.read', reply1, { thread_id: 'main' }],
      ['m.read', main, { thread_id: root }],
    ] as const) {
      const response = await receipt(bob, type, eventId, body, room);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.body.errcode).toBe('M_INVALID_PARAM');
    }

    // Bob has read nothing: two in the thread, the root and one in the main timeline.
    let synced = await syncOf(bob, `&filter=${threadFilter}`);
    let joined = synced.body.rooms.join[room];
    expect(joined.unread_notifications.notification_count).toBe(2);
    expect(joined.unread_thread_notifications).toEqual({ [root]: { notification_count: 2, highlight_count: 0, 'org.matrix.msc2625.unread_count': 2 } });
    // Without the filter flag, one count for the room.
    expect((await syncOf(bob, '')).body.rooms.join[room].unread_notifications.notification_count).toBe(4);

    // A reaction to an event in the thread is read in the thread.
    const reaction = await send(alice, 'm.reaction', { 'm.relates_to': { rel_type: 'm.annotation', event_id: reply1, key: '👀' } }, room);
    expect((await receipt(bob, 'm.read', reaction, { thread_id: 'main' }, room)).status).toBe(400);
    expect((await receipt(bob, 'm.read', reaction, { thread_id: root }, room)).status).toBe(200);
    expect((await receipt(bob, 'm.read', reply1, { thread_id: root }, room)).status).toBe(200);
    expect((await receipt(bob, 'm.read', main, { thread_id: 'main' }, room)).status).toBe(200);
    synced = await syncOf(bob, `&filter=${threadFilter}`);
    joined = synced.body.rooms.join[room];
    expect(joined.unread_notifications.notification_count).toBe(0);
    expect(joined.unread_thread_notifications).toEqual({ [root]: { notification_count: 1, highlight_count: 0, 'org.matrix.msc2625.unread_count': 1 } });
    const receipts = joined.ephemeral.events.find((e: any) => e.type === 'm.receipt').content;
    expect(receipts[reply1]['m.read'][bob.userId].thread_id).toBe(root);
    expect(receipts[main]['m.read'][bob.userId].thread_id).toBe('main');
  });

  it('POST /read_markers sets m.fully_read and both receipts; the private one reaches no one else', async () => {
    const event = await say(alice, 'read me');
    const aliceSince = (await syncOf(alice, '')).body.next_batch;
    const marked = await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/read_markers`, {
      token: bob.accessToken,
      body: { 'm.fully_read': event, 'm.read.private': event },
    });
    expect(marked.status).toBe(200);
    const bobs = (await syncOf(bob, '')).body.rooms.join[roomId];
    expect(bobs.account_data.events.find((e: any) => e.type === 'm.fully_read')?.content).toEqual({ event_id: event });
    const own = bobs.ephemeral.events.find((e: any) => e.type === 'm.receipt')?.content;
    expect(own[event]['m.read.private'][bob.userId]).toBeDefined();

    const alices = (await syncOf(alice, `&since=${aliceSince}`)).body.rooms?.join?.[roomId];
    const seen = JSON.stringify(alices?.ephemeral?.events ?? []);
    expect(seen).not.toContain('m.read.private');
    expect(seen).not.toContain(bob.userId);
    const initial = JSON.stringify((await syncOf(alice, '')).body.rooms.join[roomId].ephemeral.events);
    expect(initial).not.toContain('m.read.private');

    // A public receipt by the same call is seen.
    const since = (await syncOf(alice, '')).body.next_batch;
    expect((await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/read_markers`, { token: bob.accessToken, body: { 'm.read': event } })).status).toBe(200);
    const after = (await syncOf(alice, `&since=${since}`)).body.rooms.join[roomId];
    expect(after.ephemeral.events.find((e: any) => e.type === 'm.receipt').content[event]['m.read'][bob.userId]).toBeDefined();

    const bad = await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/read_markers`, { token: bob.accessToken, body: { 'm.read': 42 }, unchecked: true });
    expect(bad.status).toBe(400);
    expect(bad.body.errcode).toMatch(/^M_/);
    expect((await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/read_markers`, { token: bob.accessToken, body: { 'm.read': '$nope:example.org' } })).status).toBe(404);
  });
});

describe('matrix-js-sdk: react, edit and reply in a thread', () => {
  it("shows the other client the edit applied, the thread's summary and the reactions", async () => {
    // Two users of their own: a client with thread support loads every thread of every room it is in.
    const [alice, bob] = [await register(server, 'sdk-alice'), await register(server, 'sdk-bob')];
    const room = (await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: { preset: 'public_chat' } })).body.room_id;
    expect((await api(server, 'POST', `${V3}/join/${enc(room)}`, { token: bob.accessToken, body: {} })).status).toBe(200);
    const a = await startClient(server.url, alice);
    const b = await startClient(server.url, bob);
    try {
      const { event_id: original } = await a.sendMessage(room, { msgtype: sdk.MsgType.Text, body: 'helo' });
      await waitFor(b, () => b.getRoom(room)?.findEventById(original), 10_000, 'the message on bob');
      await b.sendEvent(room, 'm.reaction' as any, { 'm.relates_to': { rel_type: 'm.annotation', event_id: original, key: '👍' } } as any);
      await a.sendEvent(room, 'm.reaction' as any, { 'm.relates_to': { rel_type: 'm.annotation', event_id: original, key: '👍' } } as any);
      await expect(b.sendEvent(room, 'm.reaction' as any, { 'm.relates_to': { rel_type: 'm.annotation', event_id: original, key: '👍' } } as any)).rejects.toMatchObject({ errcode: 'M_DUPLICATE_ANNOTATION' });
      await a.sendMessage(room, {
        msgtype: 'm.text',
        body: '* hello',
        'm.new_content': { msgtype: 'm.text', body: 'hello' },
        'm.relates_to': { rel_type: 'm.replace', event_id: original },
      } as any);
      const { event_id: reply } = await b.sendMessage(room, original, { msgtype: 'm.text', body: 'a reply in the thread', ...inThread(original) } as any);
      await waitFor(a, () => a.getRoom(room)?.findEventById(reply), 10_000, 'the thread reply on alice');

      // A client that starts now gets it all from the server: the edit bundled with the original
      // (and applied by the SDK), the thread's summary, and the reactions from /relations.
      const fresh = await startClient(server.url, bob);
      try {
        const seen = await waitFor(fresh, () => fresh.getRoom(room)?.findEventById(original), 10_000, 'the original on a fresh client');
        expect(seen.getContent().body).toBe('hello');
        expect(seen.replacingEventId()).toBeTruthy();
        const thread = seen.getServerAggregatedRelation<{ count: number; latest_event: { event_id: string }; current_user_participated: boolean }>('m.thread');
        expect(thread?.count).toBe(1);
        expect(thread?.latest_event.event_id).toBe(reply);
        expect(thread?.current_user_participated).toBe(true);
        const reactions = await fresh.relations(room, original, 'm.annotation', 'm.reaction');
        expect(reactions.events.map((e) => e.getSender()).sort()).toEqual([alice.userId, bob.userId].sort());
        expect(new Set(reactions.events.map((e) => e.getRelation()?.key))).toEqual(new Set(['👍']));
        const edits = await fresh.relations(room, original, 'm.replace', 'm.room.message');
        expect(edits.events.map((e) => e.getContent()['m.new_content']?.body)).toEqual(['hello']);
      } finally {
        fresh.stopClient();
      }

      // A client with thread support lists the thread from /threads and reads it through /relations.
      const threaded = sdk.createClient({ baseUrl: server.url, userId: alice.userId, accessToken: alice.accessToken, deviceId: alice.deviceId });
      try {
        await threaded.startClient({ initialSyncLimit: 20, threadSupport: true });
        await waitFor(threaded, () => threaded.isInitialSyncComplete() && threaded.getRoom(room), 10_000, 'a threaded client synced');
        const r = threaded.getRoom(room)!;
        await r.fetchRoomThreads();
        const found = await waitFor(threaded, () => r.getThread(original) ?? undefined, 10_000, 'the thread on a threaded client');
        // Its timeline holds the root (edited) and the reply, read from /relations.
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error('timed out waiting for the thread to load')), 10_000);
          const check = () => {
            if (!found.initialEventsFetched || !found.events.some((e) => e.getId() === reply)) return;
            clearTimeout(timer);
            found.off(sdk.ThreadEvent.Update, check);
            resolve();
          };
          found.on(sdk.ThreadEvent.Update, check);
          check();
        });
        expect(found.events.map((e) => e.getId())).toEqual([original, reply]);
        expect(found.rootEvent?.getContent().body).toBe('hello');
      } finally {
        threaded.stopClient();
      }
    } finally {
      a.stopClient();
      b.stopClient();
    }
  });
});

describe('relations across servers', () => {
  it("indexes what another server's users send: /relations, /threads and the bundle on the receiving server", async () => {
    const { servers, close } = await federatedServers(2);
    try {
      const [a, b] = servers as [typeof servers[0], typeof servers[0]];
      const [anna, ben] = [await a.register('anna'), await b.register('ben')];
      const room = await sharedRoom(a, anna, [[b, ben]]);
      const sent = await a.api('PUT', `${V3}/rooms/${enc(room)}/send/m.room.message/f1`, { token: anna.accessToken, body: { msgtype: 'm.text', body: 'from a' } });
      const root = sent.body.event_id as string;
      await syncUntil(b, ben, (body) => (body.rooms?.join?.[room]?.timeline?.events ?? []).some((e: any) => e.event_id === root));
      const reply = (await b.api('PUT', `${V3}/rooms/${enc(room)}/send/m.room.message/f2`, { token: ben.accessToken, body: { msgtype: 'm.text', body: 'from b, in the thread', ...inThread(root) } })).body.event_id;
      const reaction = (await b.api('PUT', `${V3}/rooms/${enc(room)}/send/m.reaction/f3`, { token: ben.accessToken, body: { 'm.relates_to': { rel_type: 'm.annotation', event_id: root, key: '👋' } } })).body.event_id;
      await syncUntil(a, anna, (body) => (body.rooms?.join?.[room]?.timeline?.events ?? []).some((e: any) => e.event_id === reaction));

      const children = await a.api('GET', `${V1}/rooms/${enc(room)}/relations/${enc(root)}`, { token: anna.accessToken });
      expect(children.body.chunk.map((e: any) => e.event_id)).toEqual([reaction, reply]);
      const threads = await a.api('GET', `${V1}/rooms/${enc(room)}/threads?include=participated`, { token: anna.accessToken });
      expect(threads.body.chunk.map((e: any) => e.event_id)).toEqual([root]);
      const thread = threads.body.chunk[0].unsigned['m.relations']['m.thread'];
      expect(thread).toMatchObject({ count: 1, current_user_participated: true });
      expect(thread.latest_event.event_id).toBe(reply);

      // Anna's private receipt stays on her server; her public one (sent after it) reaches Ben's.
      const since = (await b.api('GET', `${V3}/sync?timeout=0`, { token: ben.accessToken })).body.next_batch;
      expect((await a.api('POST', `${V3}/rooms/${enc(room)}/read_markers`, { token: anna.accessToken, body: { 'm.read.private': reaction } })).status).toBe(200);
      expect((await a.api('POST', `${V3}/rooms/${enc(room)}/receipt/m.read/${enc(reply)}`, { token: anna.accessToken, body: { thread_id: root } })).status).toBe(200);
      const seen = await syncUntil(b, ben, (body) => (body.rooms?.join?.[room]?.ephemeral?.events ?? []).some((e: any) => e.type === 'm.receipt' && e.content[reply]), since);
      expect(seen.rooms.join[room].ephemeral.events.find((e: any) => e.type === 'm.receipt').content[reply]['m.read'][anna.userId].thread_id).toBe(root);
      expect(JSON.stringify(seen.rooms.join[room].ephemeral.events)).not.toContain('m.read.private');
      const edus = a.sent.filter((x) => x.path.includes('/send/')).flatMap((x) => x.request?.edus ?? []);
      expect(edus.some((edu: any) => edu.edu_type === 'm.receipt')).toBe(true);
      expect(JSON.stringify(edus)).not.toContain('m.read.private');
      expect(JSON.stringify(edus)).not.toContain(reaction);

      // Ben's server refuses his second identical reaction.
      const duplicate = await b.api('PUT', `${V3}/rooms/${enc(room)}/send/m.reaction/f4`, { token: ben.accessToken, body: { 'm.relates_to': { rel_type: 'm.annotation', event_id: root, key: '👋' } } });
      expect(duplicate.body.errcode).toBe('M_DUPLICATE_ANNOTATION');
    } finally {
      await close();
    }
  });
});
