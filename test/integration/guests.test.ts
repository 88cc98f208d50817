// Guest access (client-server §Guest access), as Synapse serves it and clients expect: a guest
// account from POST /register?kind=guest, whose token only the endpoints open to guests accept;
// guests read world_readable rooms, join rooms whose m.room.guest_access is can_join, talk and
// sync there, and do nothing else. Off unless the host allows guests. Raw HTTP, checked against the spec.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;
let server: TestServer;
let alice: Account;

beforeAll(async () => {
  server = await startTestServer({ allowGuests: true });
  alice = await register(server, 'alice');
});
afterAll(() => server.close());

async function newGuest(): Promise<Account> {
  const answer = await api(server, 'POST', `${V3}/register?kind=guest`, { body: {} });
  expect(answer.status).toBe(200);
  return { userId: answer.body.user_id, accessToken: answer.body.access_token, deviceId: answer.body.device_id };
}

/** A public room of alice's, which guests may join unless `guests: false`. */
async function aliceRoom(options: { visibility?: string; guests?: boolean } = {}): Promise<string> {
  const initial_state = [
    ...(options.visibility ? [{ type: 'm.room.history_visibility', content: { history_visibility: options.visibility } }] : []),
    { type: 'm.room.guest_access', content: { guest_access: options.guests === false ? 'forbidden' : 'can_join' } },
  ];
  const answer = await api(server, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: { preset: 'public_chat', initial_state } });
  return answer.body.room_id;
}

let txn = 0;
const say = (who: Account, roomId: string, body: string) =>
  api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/g${++txn}`, { token: who.accessToken, body: { msgtype: 'm.text', body } });

describe('guest accounts', () => {
  it('are refused with M_GUEST_ACCESS_FORBIDDEN by a homeserver that does not allow them (the default)', async () => {
    const closed = await startTestServer();
    try {
      const answer = await api(closed, 'POST', `${V3}/register?kind=guest`, { body: {} });
      expect([answer.status, answer.body.errcode]).toEqual([403, 'M_GUEST_ACCESS_FORBIDDEN']);
    } finally {
      await closed.close();
    }
  });

  it('register with no password: a numeric user ID, a device and a token that whoami says is a guest’s', async () => {
    const guest = await newGuest();
    expect(guest.userId).toMatch(new RegExp(`^@\\d+:${server.homeserver.serverName}$`));
    expect(guest.deviceId).toEqual(expect.any(String));
    const whoami = await api(server, 'GET', `${V3}/account/whoami`, { token: guest.accessToken });
    expect(whoami.body).toEqual({ user_id: guest.userId, device_id: guest.deviceId, is_guest: true });
    expect((await newGuest()).userId).not.toBe(guest.userId);
    // No password: no way to log in as it.
    const login = await api(server, 'POST', `${V3}/login`, { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: guest.userId }, password: '' } });
    expect(login.status).toBe(403);
  });

  it('are refused on every endpoint not open to guests', async () => {
    const guest = await newGuest();
    const roomId = await aliceRoom();
    const refused = [
      await api(server, 'POST', `${V3}/createRoom`, { token: guest.accessToken, body: {} }),
      await api(server, 'GET', `${V3}/pushrules/`, { token: guest.accessToken }),
      await api(server, 'PUT', `${V3}/user/${enc(guest.userId)}/account_data/org.example`, { token: guest.accessToken, body: {} }),
      await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/invite`, { token: guest.accessToken, body: { user_id: alice.userId } }),
      await api(server, 'POST', `${V3}/user/${enc(guest.userId)}/filter`, { token: guest.accessToken, body: {} }),
      await api(server, 'POST', `${V3}/pushers/set`, { token: guest.accessToken, body: { kind: null, app_id: 'a', pushkey: 'k' } }),
    ];
    for (const answer of refused) expect([answer.status, answer.body.errcode]).toEqual([403, 'M_GUEST_ACCESS_FORBIDDEN']);
  });

  it('read a world_readable room without joining: its state, one state event, its messages and its initialSync; not a shared one', async () => {
    const guest = await newGuest();
    const open = await aliceRoom({ visibility: 'world_readable' });
    await say(alice, open, 'for anyone');
    const state = await api(server, 'GET', `${V3}/rooms/${enc(open)}/state`, { token: guest.accessToken });
    expect(state.status).toBe(200);
    const member = await api(server, 'GET', `${V3}/rooms/${enc(open)}/state/m.room.member/${enc(alice.userId)}`, { token: guest.accessToken });
    expect([member.status, member.body.membership]).toEqual([200, 'join']);
    const messages = await api(server, 'GET', `${V3}/rooms/${enc(open)}/messages?dir=b&limit=5`, { token: guest.accessToken });
    expect(messages.body.chunk.map((e: any) => e.content.body)).toContain('for anyone');
    const initial = await api(server, 'GET', `${V3}/rooms/${enc(open)}/initialSync`, { token: guest.accessToken, unchecked: true });
    expect(initial.status).toBe(200);
    expect(initial.body.messages.chunk.at(-1).content.body).toBe('for anyone');

    const shared = await aliceRoom({ visibility: 'shared' });
    for (const path of [`/rooms/${enc(shared)}/state`, `/rooms/${enc(shared)}/messages?dir=b`, `/rooms/${enc(shared)}/initialSync`]) {
      const answer = await api(server, 'GET', `${V3}${path}`, { token: guest.accessToken, unchecked: true });
      expect([answer.status, answer.body.errcode], path).toEqual([403, 'M_FORBIDDEN']);
    }
  });

  it('never send to a room they have not joined', async () => {
    const guest = await newGuest();
    const open = await aliceRoom({ visibility: 'world_readable' });
    const answer = await say(guest, open, 'let me in');
    expect(answer.status).toBe(403);
  });

  it('join a can_join room, talk and sync there; a room without guest access refuses them', async () => {
    const guest = await newGuest();
    const roomId = await aliceRoom({ visibility: 'joined' });
    await say(alice, roomId, 'before the guest');
    expect((await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: guest.accessToken, body: {} })).status).toBe(200);
    await say(alice, roomId, 'after the guest joined');
    expect((await say(guest, roomId, 'sup')).status).toBe(200);
    const seen = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/messages?dir=b&limit=1`, { token: alice.accessToken });
    expect(seen.body.chunk[0]).toMatchObject({ sender: guest.userId, content: { body: 'sup' } });

    const sync = await api(server, 'GET', `${V3}/sync`, { token: guest.accessToken });
    expect(sync.status).toBe(200);
    const bodies = sync.body.rooms.join[roomId].timeline.events.map((e: any) => e.content.body).filter(Boolean);
    // `joined` history: nothing from before the join.
    expect(bodies).toEqual(['after the guest joined', 'sup']);

    const closed = await aliceRoom({ guests: false });
    const refused = await api(server, 'POST', `${V3}/rooms/${enc(closed)}/join`, { token: guest.accessToken, body: {} });
    expect([refused.status, refused.body.errcode]).toEqual([403, 'M_FORBIDDEN']);
    // Joining and leaving are all the membership a guest has.
    const kick = await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/kick`, { token: guest.accessToken, body: { user_id: alice.userId } });
    expect([kick.status, kick.body.errcode]).toEqual([403, 'M_GUEST_ACCESS_FORBIDDEN']);
  });

  it('read a world_readable room’s state events after leaving it', async () => {
    const guest = await newGuest();
    const open = await aliceRoom({ visibility: 'world_readable' });
    expect((await api(server, 'POST', `${V3}/rooms/${enc(open)}/join`, { token: guest.accessToken, body: {} })).status).toBe(200);
    expect((await api(server, 'POST', `${V3}/rooms/${enc(open)}/leave`, { token: guest.accessToken, body: {} })).status).toBe(200);
    await api(server, 'PUT', `${V3}/rooms/${enc(open)}/state/m.room.topic`, { token: alice.accessToken, body: { topic: 'after the guest left' } });
    const topic = await api(server, 'GET', `${V3}/rooms/${enc(open)}/state/m.room.topic`, { token: guest.accessToken });
    expect([topic.status, topic.body.topic]).toEqual([200, 'after the guest left']);
  });

  it('set their display name', async () => {
    const guest = await newGuest();
    expect((await api(server, 'PUT', `${V3}/profile/${enc(guest.userId)}/displayname`, { token: guest.accessToken, body: { displayname: 'creeper' } })).status).toBe(200);
    expect((await api(server, 'GET', `${V3}/profile/${enc(guest.userId)}/displayname`, { token: guest.accessToken })).body).toEqual({ displayname: 'creeper' });
  });

  it('poll /events for one room only', async () => {
    const guest = await newGuest();
    const everything = await api(server, 'GET', `${V3}/events?timeout=0`, { token: guest.accessToken, unchecked: true });
    expect([everything.status, everything.body.errcode]).toEqual([400, 'M_MISSING_PARAM']);
    const open = await aliceRoom({ visibility: 'world_readable' });
    const initial = await api(server, 'GET', `${V3}/rooms/${enc(open)}/initialSync`, { token: guest.accessToken, unchecked: true });
    await say(alice, open, 'news');
    const events = await api(server, 'GET', `${V3}/events?room_id=${enc(open)}&from=${initial.body.messages.end}&timeout=0`, { token: guest.accessToken, unchecked: true });
    expect(events.status).toBe(200);
    expect(events.body.chunk.map((e: any) => e.content.body)).toEqual(['news']);
  });

  it('become full accounts with their user ID through /register with their guest_access_token; another guest cannot take it', async () => {
    const guest = await newGuest();
    const other = await newGuest();
    const localpart = guest.userId.slice(1, guest.userId.indexOf(':'));
    const hijack = await api(server, 'POST', `${V3}/register`, { body: { username: localpart, password: 'p4ssword!', guest_access_token: other.accessToken, auth: { type: 'm.login.dummy' } } });
    expect([hijack.status, hijack.body.errcode]).toEqual([400, 'M_USER_IN_USE']);
    const upgraded = await api(server, 'POST', `${V3}/register`, { body: { username: localpart, password: 'p4ssword!', guest_access_token: guest.accessToken, auth: { type: 'm.login.dummy' } } });
    expect(upgraded.status).toBe(200);
    expect(upgraded.body.user_id).toBe(guest.userId);
    expect((await api(server, 'GET', `${V3}/account/whoami`, { token: upgraded.body.access_token })).body.is_guest).toBe(false);
    // The old token is the full account's now too.
    expect((await api(server, 'POST', `${V3}/createRoom`, { token: guest.accessToken, body: {} })).status).toBe(200);
  });
});
