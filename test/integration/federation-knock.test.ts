// Knocking on a room held by another server: B's user knocks through A (make_knock and
// send_knock), A's members see the knock, and B's /sync lists the room under `knock` with the
// stripped state A handed back (the room's join rule, name, and the knock itself).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { federatedServers, syncUntil, type Account, type FederatedServer } from '../support/federated-homeservers.ts';

let a: FederatedServer;
let b: FederatedServer;
let alice: Account;
let bob: Account;
let close: () => Promise<void>;
const enc = encodeURIComponent;

beforeAll(async () => {
  const network = await federatedServers(2);
  [a, b] = network.servers as [FederatedServer, FederatedServer];
  close = network.close;
  [alice, bob] = await Promise.all([a.register('alice'), b.register('bob')]);
});
afterAll(() => close());

describe('knocking across servers', () => {
  it("shows the knocked room under /sync's knock section with the state its server handed back", async () => {
    const created = await a.api('POST', '/_matrix/client/v3/createRoom', {
      token: alice.accessToken,
      body: { name: 'Knock here', initial_state: [{ type: 'm.room.join_rules', state_key: '', content: { join_rule: 'knock' } }] },
    });
    expect(created.status).toBe(200);
    const roomId = created.body.room_id as string;

    const knocked = await b.api('POST', `/_matrix/client/v3/knock/${enc(roomId)}?server_name=${enc(a.serverName)}`, { token: bob.accessToken, body: { reason: 'let me in' } });
    expect(knocked.status, JSON.stringify(knocked.body)).toBe(200);
    expect(knocked.body.room_id).toBe(roomId);

    const bobSync = await syncUntil(b, bob, (body) => !!body.rooms?.knock?.[roomId]);
    const state = bobSync.rooms.knock[roomId].knock_state.events as any[];
    expect(state.find((e) => e.type === 'm.room.join_rules')?.content).toEqual({ join_rule: 'knock' });
    expect(state.find((e) => e.type === 'm.room.name')?.content).toEqual({ name: 'Knock here' });
    expect(state.find((e) => e.type === 'm.room.member' && e.state_key === bob.userId)?.content).toMatchObject({ membership: 'knock' });

    await syncUntil(a, alice, (body) => (body.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.type === 'm.room.member' && e.state_key === bob.userId && e.content.membership === 'knock'));
  });
});
