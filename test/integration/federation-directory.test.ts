// A client browses another server's public room directory through its own server
// (`/publicRooms?server=`), which asks over federation; both legs checked against the spec.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { federatedServers, type Account, type FederatedServer } from '../support/federated-homeservers.ts';
import { validateFederationRequest, validateFederationResponse } from '../support/spec-schema.ts';

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
  for (const name of ['Hearth lounge', 'P2P demo', 'Knitting']) {
    const created = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { name, preset: 'public_chat', visibility: 'public' } });
    expect(created.status).toBe(200);
  }
  // Not published: never listed.
  await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { name: 'Private corner' } });
});
afterAll(() => close());

describe("another server's room directory", () => {
  it('lists its published rooms, page by page both ways', async () => {
    const first = await b.api('GET', `/_matrix/client/v3/publicRooms?server=${enc(a.serverName)}&limit=2`, { token: bob.accessToken });
    expect(first.status).toBe(200);
    expect(first.body.total_room_count_estimate).toBe(3);
    expect(first.body.chunk).toHaveLength(2);
    const second = await b.api('GET', `/_matrix/client/v3/publicRooms?server=${enc(a.serverName)}&limit=2&since=${enc(first.body.next_batch)}`, { token: bob.accessToken });
    expect(second.body.chunk).toHaveLength(1);
    expect(second.body.next_batch).toBeUndefined();
    const names = [...first.body.chunk, ...second.body.chunk].map((room: any) => room.name).sort();
    expect(names).toEqual(['Hearth lounge', 'Knitting', 'P2P demo']);
    const back = await b.api('GET', `/_matrix/client/v3/publicRooms?server=${enc(a.serverName)}&limit=2&since=${enc(second.body.prev_batch)}`, { token: bob.accessToken });
    expect(back.body.chunk).toEqual(first.body.chunk);
  });

  it('searches it with POST, accepting since: null', async () => {
    const found = await b.api('POST', `/_matrix/client/v3/publicRooms?server=${enc(a.serverName)}`, { token: bob.accessToken, body: { filter: { generic_search_term: 'p2p' } } });
    expect(found.status).toBe(200);
    expect(found.body.chunk.map((room: any) => room.name)).toEqual(['P2P demo']);
    // The spec types `since` as a string, yet clients send null for the first page: taken as absent.
    const withNull = await b.api('POST', `/_matrix/client/v3/publicRooms?server=${enc(a.serverName)}`, { token: bob.accessToken, body: { since: null, filter: { generic_search_term: 'p2p' } }, unchecked: true });
    expect(withNull.body.chunk).toEqual(found.body.chunk);
    const exchange = b.sent.findLast((x) => x.path.startsWith('/_matrix/federation/v1/publicRooms'))!;
    expect(exchange.method).toBe('POST');
    validateFederationRequest(exchange.method, exchange.path, exchange.request);
    validateFederationResponse(exchange.method, exchange.path, exchange.status, exchange.response);
  });

  it('answers 502 with the Matrix error shape when the server cannot be reached', async () => {
    const nowhere = 'f'.repeat(64);
    const answer = await b.api('GET', `/_matrix/client/v3/publicRooms?server=${nowhere}`, { token: bob.accessToken, unchecked: true });
    expect(answer.status).toBe(502);
    expect(answer.body).toMatchObject({ errcode: 'M_UNKNOWN', error: expect.stringContaining(nowhere) });
  });
});
