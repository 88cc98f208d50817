// Deactivation with `erase: true`: the account leaves its rooms and loses its profile, and
// members who join after the erasure no longer see what it said, while those who were there
// still do. Raw HTTP, checked against the spec.
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

const said = async (reader: Account, roomId: string) =>
  (await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/messages?dir=b&limit=50`, { token: reader.accessToken })).body.chunk
    .filter((e: any) => e.type === 'm.room.message').map((e: any) => e.content.body);

describe('account erasure', () => {
  it("hides an erased account's messages from members who join afterwards, not from those who were there", async () => {
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
    expect(await said(later, roomId)).toEqual(['the owner speaks']);
    expect(await said(owner, roomId)).toEqual(['the owner speaks', 'my words']);
  });

  it('after an upgrade, members who join the new room after the erasure see nothing the account said in the old one (issue 24, client behaviour 7)', async () => {
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
    // Following the predecessor back, the old room reads as world_readable, without the erased words.
    expect(await said(later, roomId)).toEqual(['the owner spoke']);
    const event = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/event/${enc(words.body.event_id)}`, { token: later.accessToken, unchecked: true });
    expect(event.status).toBe(404);
    const context = await api(server, 'GET', `${V3}/rooms/${enc(roomId)}/context/${enc(words.body.event_id)}`, { token: later.accessToken, unchecked: true });
    expect(context.status).toBe(403);
    // The owner was there: still sees them.
    expect(await said(owner, roomId)).toEqual(['the owner spoke', 'my old words']);
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
