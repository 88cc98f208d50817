// What room members on this server and on another hear of each other as the conformance suites check it
// (issue 41): typing stopped with `typing: false`, presence set to `unavailable`, and a remote user banned.
// Two real homeservers in one process (test/support/federated-homeservers.ts); their clients sync the way
// the suites do, with `set_presence=offline` (which leaves presence alone, as Synapse reads it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { federatedServers, until, type Account, type FederatedServer } from '../support/federated-homeservers.ts';
import { longPollUntil, type SyncBody } from '../support/sync-until.ts';

let net: Awaited<ReturnType<typeof federatedServers>>;
let a: FederatedServer;
let b: FederatedServer;
let run = 0;
beforeAll(async () => {
  net = await federatedServers(2);
  [a, b] = net.servers as [FederatedServer, FederatedServer];
});
afterAll(() => net.close());

const enc = encodeURIComponent;
/** alice and ann on A, bob on B, all joined to alice's public room. */
async function room(): Promise<{ alice: Account; ann: Account; bob: Account; roomId: string }> {
  run++;
  const [alice, ann, bob] = [await a.register(`alice${run}`), await a.register(`ann${run}`), await b.register(`bob${run}`)];
  const roomId = (await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat' } })).body.room_id as string;
  for (const [server, account] of [[a, ann], [b, bob]] as const) {
    const joined = await server.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${enc(a.serverName)}`, { token: account.accessToken, body: {} });
    expect(joined.status, JSON.stringify(joined.body)).toBe(200);
  }
  await until(async () => (await a.homeserver.services.rooms.membership(roomId, bob.userId)) === 'join');
  await until(async () => (await b.homeserver.services.rooms.membership(roomId, ann.userId)) === 'join');
  return { alice, ann, bob, roomId };
}
/** Syncs as the suites do (`set_presence=offline`), from `since` (an initial sync without), until `done` holds. */
const syncUntil = (server: FederatedServer, account: Account, done: (body: SyncBody) => boolean, since?: string) =>
  longPollUntil(
    async (from) => (await server.api('GET', `/_matrix/client/v3/sync?timeout=1000&set_presence=offline${from ? `&since=${enc(from)}` : ''}`, { token: account.accessToken })).body,
    done,
    { since, rounds: 30, who: account.userId },
  );
const typingIn = (roomId: string) => (body: SyncBody): string[] | undefined =>
  body.rooms?.join?.[roomId]?.ephemeral?.events?.find((e: any) => e.type === 'm.typing')?.content.user_ids;
const presenceOf = (userId: string) => (body: SyncBody): string | undefined =>
  body.presence?.events?.filter((e: any) => e.sender === userId).at(-1)?.content.presence;

describe('typing', () => {
  it('stopped with typing: false is heard at once here and on the other server, in an initial sync too', async () => {
    const { alice, ann, bob, roomId } = await room();
    const typing = (value: boolean) =>
      a.api('PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/typing/${enc(alice.userId)}`, { token: alice.accessToken, body: value ? { typing: true, timeout: 30_000 } : { typing: false } });
    const annSince = (await syncUntil(a, ann, () => true)).next_batch;
    const bobSince = (await syncUntil(b, bob, () => true)).next_batch;
    expect((await typing(true)).status).toBe(200);
    const annTyping = await syncUntil(a, ann, (s) => typingIn(roomId)(s)?.includes(alice.userId) === true, annSince);
    const bobTyping = await syncUntil(b, bob, (s) => typingIn(roomId)(s)?.includes(alice.userId) === true, bobSince);
    expect((await typing(false)).status).toBe(200);
    // Long before the 30 s the typing was for, and the 60 s a remote notice lasts without one.
    await syncUntil(a, ann, (s) => typingIn(roomId)(s)?.length === 0, annTyping.next_batch);
    await syncUntil(b, bob, (s) => typingIn(roomId)(s)?.length === 0, bobTyping.next_batch);
    // A client that starts afresh hears that no one types, as Synapse tells it of a room where typing changed.
    for (const [server, account] of [[a, alice], [a, ann], [b, bob]] as const) {
      expect(typingIn(roomId)(await syncUntil(server, account, () => true))).toEqual([]);
    }
  });
});

describe('presence', () => {
  it('unavailable reaches the user, local members and remote members, whose syncs with set_presence=offline change nothing', async () => {
    const { alice, ann, bob } = await room();
    expect((await a.api('PUT', `/_matrix/client/v3/presence/${enc(alice.userId)}/status`, { token: alice.accessToken, body: { presence: 'unavailable' } })).status).toBe(200);
    for (const [server, account] of [[a, alice], [a, ann], [b, bob]] as const) {
      await syncUntil(server, account, (s) => presenceOf(alice.userId)(s) === 'unavailable');
    }
    // set_presence=offline means "do not mark me online", not "mark me offline".
    expect((await a.api('GET', `/_matrix/client/v3/presence/${enc(alice.userId)}/status`, { token: ann.accessToken })).body.presence).toBe('unavailable');
    expect((await b.api('GET', `/_matrix/client/v3/presence/${enc(alice.userId)}/status`, { token: bob.accessToken })).body.presence).toBe('unavailable');
  });
});

describe('a remote user banned', () => {
  it('is out on every server and can neither rejoin, be invited nor be kicked until unbanned', async () => {
    const { alice, bob, roomId } = await room();
    const since = (await syncUntil(b, bob, (s) => !!s.rooms?.join?.[roomId])).next_batch;
    expect((await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/ban`, { token: alice.accessToken, body: { user_id: bob.userId, reason: 'testing' } })).status).toBe(200);
    expect((await a.api('GET', `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.member/${enc(bob.userId)}`, { token: alice.accessToken })).body.membership).toBe('ban');
    await syncUntil(b, bob, (s) => s.rooms?.leave?.[roomId]?.timeline.events.some((e: any) => e.state_key === bob.userId && e.content.membership === 'ban'), since);
    expect(await b.homeserver.services.rooms.membership(roomId, bob.userId)).toBe('ban');
    // The banned user may no longer read the room's state on their own server, as Synapse answers.
    const state = await b.api('GET', `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.member/${enc(bob.userId)}`, { token: bob.accessToken });
    expect(state.status).toBe(403);
    expect(state.body.errcode).toBe('M_FORBIDDEN');
    const rejoin = await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${enc(a.serverName)}`, { token: bob.accessToken, body: {} });
    expect(rejoin.status).toBe(403);
    for (const action of ['invite', 'kick']) {
      const r = await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/${action}`, { token: alice.accessToken, body: { user_id: bob.userId } });
      expect(r.status, action).toBe(403);
    }
    expect((await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/unban`, { token: alice.accessToken, body: { user_id: bob.userId } })).status).toBe(200);
    await until(async () => (await b.homeserver.services.rooms.membership(roomId, bob.userId)) === 'leave');
    const back = await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${enc(a.serverName)}`, { token: bob.accessToken, body: {} });
    expect(back.status, JSON.stringify(back.body)).toBe(200);
  });
});
