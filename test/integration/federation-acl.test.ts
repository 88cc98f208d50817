// Server ACLs across three real homeservers in one process: once the room's
// m.room.server_acl denies C, nothing C sends for the room is taken (PDUs refused with
// an error per event, typing ignored) and C's requests about the room are refused, while
// B, still allowed, goes on as before.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedRoom, syncUntil, threeServers, until, type Account, type FederatedServer } from '../support/federated-homeservers.ts';

let a: FederatedServer;
let b: FederatedServer;
let c: FederatedServer;
let alice: Account;
let bob: Account;
let carol: Account;
let roomId: string;
let close: () => Promise<void>;

const enc = encodeURIComponent;
const say = (server: FederatedServer, account: Account, body: string) =>
  server.api('PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/${enc(body)}`, { token: account.accessToken, body: { msgtype: 'm.text', body } });
const bodiesIn = (sync: any) => (sync.rooms?.join?.[roomId]?.timeline?.events ?? []).map((e: any) => e.content?.body).filter(Boolean);

beforeAll(async () => {
  const network = await threeServers();
  ({ a, b, c, alice, bob, carol, close } = network);
  roomId = await sharedRoom(a, alice, [[b, bob], [c, carol]]);
  const acl = await a.api('PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.server_acl/`, { token: alice.accessToken, body: { allow: ['*'], deny: [c.serverName], allow_ip_literals: false } });
  expect(acl.status).toBe(200);
  // B and C both hold the ACL before the test goes on.
  for (const server of [b, c]) await until(async () => (await server.homeserver.services.rooms.currentStateEvent(roomId, 'm.room.server_acl', '')) !== undefined);
});
afterAll(() => close());

describe('server ACLs', () => {
  it("refuses the denied server's PDUs, event by event, and keeps the allowed server's", async () => {
    const sent = c.sent.length;
    expect((await say(c, carol, 'from the denied server')).status).toBe(200);
    expect((await say(b, bob, 'from an allowed server')).status).toBe(200);
    const aliceSees = await syncUntil(a, alice, (body) => bodiesIn(body).includes('from an allowed server'));
    expect(bodiesIn(aliceSees)).not.toContain('from the denied server');
    // C's transaction to A got an answer that names the refusal.
    await until(() => c.sent.slice(sent).some((x) => x.destination === a.serverName && x.path.includes('/send/')));
    const toA = c.sent.slice(sent).find((x) => x.destination === a.serverName && x.path.includes('/send/'))!;
    expect(Object.values(toA.response.pdus)).toEqual([{ error: expect.stringContaining('server ACL') }]);
  });

  it("refuses the denied server's requests about the room with 403 M_FORBIDDEN", async () => {
    const federation = c.homeserver.federation.component.client;
    const latest = (await a.homeserver.services.rooms.currentStateEvent(roomId, 'm.room.server_acl', ''))!.event.event_id;
    await expect(federation.backfill(a.serverName, roomId, [latest], 5)).rejects.toMatchObject({ status: 403, errcode: 'M_FORBIDDEN' });
    await expect(federation.request(a.serverName, 'GET', `/_matrix/federation/v1/make_join/${enc(roomId)}/${enc(carol.userId)}`, { query: { ver: ['10', '11'] } }))
      .rejects.toMatchObject({ status: 403, errcode: 'M_FORBIDDEN' });
    // An invite into the room is refused before anything of it is checked (MembershipHandshakes.receiveInvite).
    const invite = {
      room_id: roomId, type: 'm.room.member', sender: carol.userId, state_key: alice.userId, content: { membership: 'invite' },
      origin_server_ts: Date.now(), depth: 1, prev_events: [], auth_events: [], hashes: { sha256: 'x' }, signatures: {},
    };
    await expect(federation.invite(a.serverName, roomId, '$denied-invite', { room_version: '10', event: invite as never, invite_room_state: [] }))
      .rejects.toMatchObject({ status: 403, errcode: 'M_FORBIDDEN', message: expect.stringContaining('server ACL') });
    // B is still allowed to ask.
    const { pdus } = await b.homeserver.federation.component.client.backfill(a.serverName, roomId, [latest], 5);
    expect(pdus.length).toBeGreaterThan(0);
  });

  it("ignores the denied server's typing in the room", async () => {
    const edus = a.homeserver.services.sync.typing;
    await c.homeserver.federation.component.client.sendTransaction(a.serverName, `typing-${Date.now()}`, {
      origin: c.serverName, origin_server_ts: Date.now(), pdus: [],
      edus: [{ edu_type: 'm.typing', content: { room_id: roomId, user_id: carol.userId, typing: true } }],
    });
    await b.homeserver.federation.component.client.sendTransaction(a.serverName, `typing-${Date.now()}`, {
      origin: b.serverName, origin_server_ts: Date.now(), pdus: [],
      edus: [{ edu_type: 'm.typing', content: { room_id: roomId, user_id: bob.userId, typing: true } }],
    });
    // /send answers once every EDU is applied: bob's typing is there, carol's never came in.
    expect(edus.get(roomId).userIds).toEqual([bob.userId]);
  });
});
