// Deactivation with `erase: true`: the account leaves its rooms and loses its profile, and
// members who were not in the room when it spoke are served redacted copies of what it said
// (the spec: those who join after the erasure; Synapse, whom we follow: anyone not joined at the
// event, so also who joined between the event and the erasure), while those who were there still
// see it whole. Raw HTTP, checked against the spec.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, register, startTestServer, type Account, type TestServer } from './harness.ts';

let server: TestServer;
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;
const PASSWORD = 'correct horse battery staple';

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

async function deactivate(account: Account, erase: boolean): Promise<void> {
  const challenge = await api(server, 'POST', `${V3}/account/deactivate`, { token: account.accessToken, body: { erase } });
  expect(challenge.status).toBe(401);
  const auth = { type: 'm.login.password', identifier: { type: 'm.id.user', user: account.userId }, password: PASSWORD, session: challenge.body.session };
  const done = await api(server, 'POST', `${V3}/account/deactivate`, { token: account.accessToken, body: { erase, auth } });
  expect(done.status).toBe(200);
}

/** The messages the reader is shown, newest first: their bodies, or null for a redacted copy. */
const said = async (reader: Account, roomId: string) =>
  (await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/messages?dir=b&limit=50`, { token: reader.accessToken })).body.chunk
    .filter((e: any) => e.type === 'm.room.message').map((e: any) => e.content.body ?? null);

describe('account erasure', () => {
  it("serves an erased account's messages redacted to members who join afterwards, whole to those who were there", async () => {
    const [owner, gone, later] = [await register(server, 'owner'), await register(server, 'gone', PASSWORD), await register(server, 'later')];
    await api(server, 'PUT', `${V3}/profile/${enc(gone.userId)}/displayname`, { token: gone.accessToken, body: { displayname: 'Soon Gone' } });
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: owner.accessToken, body: { preset: 'public_chat' } })).body.room_id;
    expect((await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: gone.accessToken, body: {} })).status).toBe(200);
    await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/a`, { token: gone.accessToken, body: { msgtype: 'm.text', body: 'my words' } });
    await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/b`, { token: owner.accessToken, body: { msgtype: 'm.text', body: 'the owner speaks' } });

    await deactivate(gone, true);
    expect((await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/state/m.room.member/${enc(gone.userId)}`, { token: owner.accessToken })).body.membership).toBe('leave');
    expect((await api(server, 'GET', `${V3}/profile/${enc(gone.userId)}`, { token: owner.accessToken, unchecked: true })).status).toBe(404);

    expect((await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: later.accessToken, body: {} })).status).toBe(200);
    expect(await said(later, roomId)).toEqual(['the owner speaks', null]);
    expect(await said(owner, roomId)).toEqual(['the owner speaks', 'my words']);
  });

  it('a member who joined after the message but before the erasure is served it redacted once the account is erased, in /sync too', async () => {
    const [gone, member, joiner] = [await register(server, 'gone4', PASSWORD), await register(server, 'member4'), await register(server, 'joiner4')];
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: gone.accessToken, body: { preset: 'public_chat' } })).body.room_id;
    expect((await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: member.accessToken, body: {} })).status).toBe(200);
    const message = (await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/s1`, { token: gone.accessToken, body: { msgtype: 'm.text', body: 'body1' } })).body.event_id;
    expect((await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: joiner.accessToken, body: {} })).status).toBe(200);
    const inSync = async (reader: Account) => {
      const body = (await api(server, 'GET', `${V3}/sync`, { token: reader.accessToken })).body;
      return body.rooms.join[roomId].timeline.events.find((e: any) => e.event_id === message);
    };
    expect((await inSync(joiner)).content.body).toBe('body1');
    await deactivate(gone, true);
    expect((await inSync(member)).content.body).toBe('body1');
    expect((await inSync(joiner)).content).toEqual({});
  });

  it('after an upgrade, members who join the new room after the erasure are served only redacted copies of what the account said in the old one (issue 24, client behaviour 7)', async () => {
    const [owner, gone, later] = [await register(server, 'owner3'), await register(server, 'gone3', PASSWORD), await register(server, 'later3')];
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, {
      token: owner.accessToken, body: { preset: 'public_chat', initial_state: [{ type: 'm.room.history_visibility', content: { history_visibility: 'world_readable' } }] },
    })).body.room_id;
    expect((await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: gone.accessToken, body: {} })).status).toBe(200);
    const words = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/u1`, { token: gone.accessToken, body: { msgtype: 'm.text', body: 'my old words' } });
    await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/u2`, { token: owner.accessToken, body: { msgtype: 'm.text', body: 'the owner spoke' } });
    await deactivate(gone, true);
    const upgraded = await api(server, 'POST', `${V3}/rooms/${enc(roomId)}/upgrade`, { token: owner.accessToken, body: { new_version: '11' } });
    expect(upgraded.status).toBe(200);
    expect((await api(server, 'POST', `${V3}/join/${enc(upgraded.body.replacement_room)}`, { token: later.accessToken, body: {} })).status).toBe(200);
    // Following the predecessor back, the old room reads as world_readable, with the erased words redacted.
    expect(await said(later, roomId)).toEqual(['the owner spoke', null]);
    const event = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/event/${enc(words.body.event_id)}`, { token: later.accessToken });
    expect(event.status).toBe(200);
    expect(event.body.content).toEqual({});
    const context = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/context/${enc(words.body.event_id)}`, { token: later.accessToken });
    expect(context.status).toBe(200);
    expect(context.body.event.content).toEqual({});
    // The owner was there: still sees them.
    expect(await said(owner, roomId)).toEqual(['the owner spoke', 'my old words']);
    expect((await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/event/${enc(words.body.event_id)}`, { token: owner.accessToken })).body.content.body).toBe('my old words');
  });

  it('without erase, what the account said stays visible to everyone', async () => {
    const [owner, left, later] = [await register(server, 'owner2'), await register(server, 'left2', PASSWORD), await register(server, 'later2')];
    const roomId = (await api(server, 'POST', `${V3}/createRoom`, { token: owner.accessToken, body: { preset: 'public_chat' } })).body.room_id;
    await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: left.accessToken, body: {} });
    await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/c`, { token: left.accessToken, body: { msgtype: 'm.text', body: 'still here' } });
    await deactivate(left, false);
    await api(server, 'POST', `${V3}/join/${enc(roomId)}`, { token: later.accessToken, body: {} });
    expect(await said(later, roomId)).toEqual(['still here']);
  });
});
