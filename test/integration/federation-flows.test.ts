import { afterEach, describe, expect, it } from 'vitest';
import { federatedServers, syncUntil as syncUntilOn, type Account, type FederatedServer } from '../support/federated-homeservers.ts';

// Real homeservers federating in one process (test/support/federated-homeservers.ts),
// for the logic of rooms shared across servers; three-peers.test.ts runs the same
// over libp2p between processes.

let net: Awaited<ReturnType<typeof federatedServers>> | undefined;
async function servers(count: 2): Promise<[FederatedServer, FederatedServer]>;
async function servers(count: 3): Promise<[FederatedServer, FederatedServer, FederatedServer]>;
async function servers(count: number): Promise<FederatedServer[]> {
  net = await federatedServers(count);
  return net.servers;
}
afterEach(async () => {
  await net?.close();
  net = undefined;
});

/** Syncs until the predicate holds, with more patience than the default: these flows wait out backoff. */
const syncUntil = (server: FederatedServer, account: Account, predicate: (body: any) => boolean, since?: string) =>
  syncUntilOn(server, account, predicate, since, { rounds: 60, pollMs: 1000 });

describe('federation between homeservers (in process)', () => {
  it('invites a remote user, who joins; messages cross both ways', async () => {
    const [a, b] = await servers(2);
    const alice = await a.register('alice');
    const bob = await b.register('bob');
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { name: 'Cross' } });
    const roomId = created.room_id as string;
    const invite = await a.api('POST', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/invite`, { token: alice.accessToken, body: { user_id: bob.userId } });
    expect(invite.status, JSON.stringify(invite.body)).toBe(200);
    await syncUntil(b, bob, (s) => !!s.rooms?.invite?.[roomId]);
    const join = await b.api('POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}`, { token: bob.accessToken, body: {} });
    expect(join.status, JSON.stringify(join.body)).toBe(200);
    await syncUntil(a, alice, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.type === 'm.room.member' && e.state_key === bob.userId && e.content.membership === 'join'));
    const sent = await a.api('PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/t1`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'hello bob' } });
    expect(sent.status).toBe(200);
    await syncUntil(b, bob, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.content?.body === 'hello bob'));
    await b.api('PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/t1`, { token: bob.accessToken, body: { msgtype: 'm.text', body: 'hello alice' } });
    await syncUntil(a, alice, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.content?.body === 'hello alice'));
  });

  it('a third server joins by alias and paginates the whole history in order, backfilled', async () => {
    const [a, c] = await servers(2);
    const alice = await a.register('alice');
    const carol = await c.register('carol');
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', {
      token: alice.accessToken, body: { preset: 'public_chat', room_alias_name: 'history', name: 'History' },
    });
    const roomId = created.room_id as string;
    const sent: string[] = [];
    for (let i = 0; i < 30; i++) {
      await a.api('PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/h${i}`, { token: alice.accessToken, body: { msgtype: 'm.text', body: `message ${i}` } });
      sent.push(`message ${i}`);
    }
    const alias = `#history:${a.homeserver.serverName}`;
    const join = await c.api('POST', `/_matrix/client/v3/join/${encodeURIComponent(alias)}`, { token: carol.accessToken, body: {} });
    expect(join.status, JSON.stringify(join.body)).toBe(200);
    expect(join.body.room_id).toBe(roomId);
    const seen: string[] = [];
    let from: string | undefined;
    for (let page = 0; page < 20; page++) {
      const { status, body } = await c.api('GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=7${from ? `&from=${from}` : ''}`, { token: carol.accessToken });
      expect(status, JSON.stringify(body)).toBe(200);
      for (const e of body.chunk) if (e.type === 'm.room.message') seen.unshift(e.content.body);
      if (!body.end) break;
      from = body.end;
    }
    expect(seen).toEqual(sent);
  });

  /** A room on A with a user of B joined to it. */
  async function sharedRoom(a: FederatedServer, b: FederatedServer, alice: Account, bob: Account): Promise<string> {
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat' } });
    const roomId = created.room_id as string;
    const join = await b.api('POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}?via=${a.homeserver.serverName}`, { token: bob.accessToken, body: {} });
    expect(join.status, JSON.stringify(join.body)).toBe(200);
    return roomId;
  }

  const said = (body: string) => (s: any) => Object.values(s.rooms?.join ?? {}).some((r: any) => r.timeline.events.some((e: any) => e.content?.body === body));
  const send = (server: FederatedServer, account: Account, roomId: string, body: string) =>
    server.api('PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/${crypto.randomUUID()}`, { token: account.accessToken, body: { msgtype: 'm.text', body } });

  it('a server that was away catches up, in order, when it is back', async () => {
    const [a, b] = await servers(2);
    const alice = await a.register('alice');
    const bob = await b.register('bob');
    const roomId = await sharedRoom(a, b, alice, bob);
    await syncUntil(a, alice, (s) => JSON.stringify(s).includes(bob.userId));
    net!.network.down.add(b.homeserver.serverName);
    for (let i = 0; i < 5; i++) expect((await send(a, alice, roomId, `while away ${i}`)).status).toBe(200);
    net!.network.down.delete(b.homeserver.serverName);
    b.homeserver.federation.peerConnected(a.homeserver.serverName);
    a.homeserver.federation.peerConnected(b.homeserver.serverName);
    await syncUntil(b, bob, said('while away 4'));
    const { body } = await b.api('GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=5`, { token: bob.accessToken });
    expect(body.chunk.map((e: any) => e.content.body).reverse()).toEqual([0, 1, 2, 3, 4].map((i) => `while away ${i}`));
  });

  it('rejects a remote invite, and kicks and bans a remote user', async () => {
    const [a, b] = await servers(2);
    const alice = await a.register('alice');
    const bob = await b.register('bob');
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { invite: [bob.userId] } });
    const roomId = created.room_id as string;
    const invited = await syncUntil(b, bob, (s) => !!s.rooms?.invite?.[roomId]);
    const reject = await b.api('POST', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/leave`, { token: bob.accessToken, body: {} });
    expect(reject.status, JSON.stringify(reject.body)).toBe(200);
    await syncUntil(b, bob, (s) => !!s.rooms?.leave?.[roomId], invited.next_batch);
    await syncUntil(a, alice, (s) => s.rooms?.join?.[roomId]?.timeline.events.some((e: any) => e.state_key === bob.userId && e.content.membership === 'leave'));

    const open = await sharedRoom(a, b, alice, bob);
    const joined = await syncUntil(b, bob, (s) => !!s.rooms?.join?.[open]);
    const kick = await a.api('POST', `/_matrix/client/v3/rooms/${encodeURIComponent(open)}/kick`, { token: alice.accessToken, body: { user_id: bob.userId, reason: 'out' } });
    expect(kick.status).toBe(200);
    const kicked = await syncUntil(b, bob, (s) => !!s.rooms?.leave?.[open], joined.next_batch);
    const rejoin = await b.api('POST', `/_matrix/client/v3/join/${encodeURIComponent(open)}?via=${a.homeserver.serverName}`, { token: bob.accessToken, body: {} });
    expect(rejoin.status, JSON.stringify(rejoin.body)).toBe(200);
    const ban = await a.api('POST', `/_matrix/client/v3/rooms/${encodeURIComponent(open)}/ban`, { token: alice.accessToken, body: { user_id: bob.userId } });
    expect(ban.status).toBe(200);
    await syncUntil(b, bob, (s) => s.rooms?.leave?.[open]?.timeline.events.some((e: any) => e.content.membership === 'ban'), kicked.next_batch);
    const banned = await b.api('POST', `/_matrix/client/v3/join/${encodeURIComponent(open)}?via=${a.homeserver.serverName}`, { token: bob.accessToken, body: {} });
    expect(banned.status).toBe(403);
    expect(banned.body.errcode).toBe('M_FORBIDDEN');
  });

  it('fills a gap from the server that sent an event whose history it lacks (get_missing_events, then /state)', async () => {
    const [a, b, c] = await servers(3);
    const [alice, bob, carol] = [await a.register('alice'), await b.register('bob'), await c.register('carol')];
    const roomId = await sharedRoom(a, b, alice, bob);
    const join = await c.api('POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}?via=${a.homeserver.serverName}`, { token: carol.accessToken, body: {} });
    expect(join.status).toBe(200);
    await syncUntil(b, bob, (s) => JSON.stringify(s).includes(carol.userId));
    await syncUntil(c, carol, (s) => JSON.stringify(s).includes(bob.userId));
    // A's mail to B is lost; C hears everything.
    net!.network.dropped.add(`${a.homeserver.serverName}>${b.homeserver.serverName}`);
    for (let i = 0; i < 30; i++) expect((await send(a, alice, roomId, `unheard ${i}`)).status).toBe(200);
    await syncUntil(c, carol, said('unheard 29'));
    expect((await send(c, carol, roomId, 'after the gap')).status).toBe(200);
    await syncUntil(b, bob, said('after the gap'));
    const { body } = await b.api('GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=30`, { token: bob.accessToken });
    const bodies = body.chunk.map((e: any) => e.content?.body).filter(Boolean).reverse();
    // The newest part of the gap came by get_missing_events, in order, ending with C's message.
    expect(bodies.at(-1)).toBe('after the gap');
    expect(bodies.slice(-21, -1)).toEqual(Array.from({ length: 20 }, (_, i) => `unheard ${i + 10}`));
  });

  it("gives a server that joins the room's state in /sync, with a timeline marked limited for the history it lacks", async () => {
    const [a, b] = await servers(2);
    const alice = await a.register('alice');
    const bob = await b.register('bob');
    const { body: created } = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat', name: 'Named', topic: 'on A' } });
    const roomId = created.room_id as string;
    for (let i = 0; i < 3; i++) expect((await send(a, alice, roomId, `before ${i}`)).status).toBe(200);
    const before = (await b.api('GET', '/_matrix/client/v3/sync', { token: bob.accessToken })).body.next_batch;
    expect((await b.api('POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}?via=${a.serverName}`, { token: bob.accessToken, body: {} })).status).toBe(200);
    for (const since of [before, undefined]) {
      const { body } = await b.api('GET', `/_matrix/client/v3/sync${since ? `?since=${since}` : ''}`, { token: bob.accessToken });
      const room = body.rooms.join[roomId];
      const state = new Map(room.state.events.map((e: any) => [e.type, e.content]));
      expect(state.get('m.room.name'), since ? 'incremental' : 'initial').toEqual({ name: 'Named' });
      expect(state.get('m.room.topic')).toMatchObject({ topic: 'on A' });
      expect(state.has('m.room.power_levels') && state.has('m.room.create')).toBe(true);
      expect(room.timeline.limited).toBe(true);
      const { body: page } = await b.api('GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=3&from=${room.timeline.prev_batch}`, { token: bob.accessToken });
      expect(page.chunk.map((e: any) => e.content.body)).toEqual(['before 2', 'before 1', 'before 0']);
    }
  });
});
