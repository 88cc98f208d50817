// History visibility applies to servers too: what /backfill, /get_missing_events and
// /event serve another server is redacted where none of its users could see it.
// Two real homeservers federating in one process; B asks A directly with its own
// (signed) federation client, as its backfill would.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { federatedServers, sharedRoom, type Account, type FederatedServer } from '../support/federated-homeservers.ts';

let a: FederatedServer;
let b: FederatedServer;
let alice: Account;
let bob: Account;
let close: () => Promise<void>;

beforeAll(async () => {
  const network = await federatedServers(2);
  [a, b] = network.servers as [FederatedServer, FederatedServer];
  close = network.close;
  alice = await a.register('alice');
  bob = await b.register('bob');
});
afterAll(() => close());

const enc = encodeURIComponent;

/** A room where alice says `before` under `visibility`, then bob (of B) joins and alice says `after`. */
async function roomWith(visibility: string): Promise<{ roomId: string; before: string; after: string }> {
  const roomId = await sharedRoom(a, alice, []);
  const put = (type: string, content: object) => a.api('PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/state/${type}/`, { token: alice.accessToken, body: content });
  expect((await put('m.room.history_visibility', { history_visibility: visibility })).status).toBe(200);
  const say = async (body: string) =>
    (await a.api('PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/${enc(body)}-${visibility}`, { token: alice.accessToken, body: { msgtype: 'm.text', body } })).body.event_id as string;
  const before = await say('before bob');
  expect((await a.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/invite`, { token: alice.accessToken, body: { user_id: bob.userId } })).status).toBe(200);
  expect((await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: bob.accessToken, body: {} })).status).toBe(200);
  const after = await say('after bob');
  return { roomId, before, after };
}

describe('history visibility for servers', () => {
  it('under `joined`, history from before any of its users joined comes back redacted, later history in full', async () => {
    const { roomId, before, after } = await roomWith('joined');
    const { pdus } = await b.homeserver.federation.component.client.backfill(a.serverName, roomId, [after], 20);
    const bodies = pdus.filter((p) => p.type === 'm.room.message').map((p) => p.content['body'] ?? null);
    // Newest first: "after bob" in full, "before bob" with its content gone but its place (hashes, signatures) kept.
    expect(bodies).toEqual(['after bob', null]);
    const redacted = pdus.find((p) => p.type === 'm.room.message' && p.content['body'] === undefined)!;
    expect(redacted.content).toEqual({});
    expect(redacted.hashes).toBeDefined();
    expect(redacted.signatures[a.serverName]).toBeDefined();

    const single = await b.homeserver.federation.component.client.request<{ pdus: any[] }>(a.serverName, 'GET', `/_matrix/federation/v1/event/${enc(before)}`);
    expect(single.pdus[0].content).toEqual({});
    // State events keep what redaction keeps: the room stays usable for B.
    const visibilityEvent = pdus.find((p) => p.type === 'm.room.history_visibility')!;
    expect(visibilityEvent.content).toEqual({ history_visibility: 'joined' });
  });

  it('under `shared`, the same history comes back in full', async () => {
    const { roomId, after } = await roomWith('shared');
    const { pdus } = await b.homeserver.federation.component.client.backfill(a.serverName, roomId, [after], 20);
    const bodies = pdus.filter((p) => p.type === 'm.room.message').map((p) => p.content['body'] ?? null);
    expect(bodies).toEqual(['after bob', 'before bob']);
  });
});
