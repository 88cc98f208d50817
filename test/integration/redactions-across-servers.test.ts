// A message redacted by its sender on another server, as clients read it (issue 41): in every room version,
// /messages has the redaction, and the redacted event with `unsigned.redacted_by` (its ID) beside
// `unsigned.redacted_because` (the event); on the sender's server, on the room's, and on a third server that
// joins afterwards and backfills both. Real homeservers in one process (test/support/federated-homeservers.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { federatedServers, syncUntil, type Account, type FederatedServer } from '../support/federated-homeservers.ts';

let net: Awaited<ReturnType<typeof federatedServers>>;
let a: FederatedServer;
let b: FederatedServer;
let c: FederatedServer;
let alice: Account;
let bob: Account;
let carol: Account;
beforeAll(async () => {
  net = await federatedServers(3);
  [a, b, c] = net.servers as [FederatedServer, FederatedServer, FederatedServer];
  [alice, bob, carol] = [await a.register('alice'), await b.register('bob'), await c.register('carol')];
});
afterAll(() => net.close());

const enc = encodeURIComponent;
const versions = ['1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12'];

/** alice's room in `version`, which bob (on B) joins, says something in and redacts it; A has it all. */
async function redactedOnB(version: string): Promise<{ roomId: string; messageId: string; redactionId: string }> {
  const created = await a.api('POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { room_version: version, preset: 'public_chat' } });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const roomId = created.body.room_id as string;
  expect((await b.api('POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${enc(a.serverName)}`, { token: bob.accessToken, body: {} })).status).toBe(200);
  const sent = await b.api('PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/m${version}`, { token: bob.accessToken, body: { msgtype: 'm.text', body: 'Message' } });
  const messageId = sent.body.event_id as string;
  const redacted = await b.api('PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/redact/${enc(messageId)}/r${version}`, { token: bob.accessToken, body: {} });
  expect(redacted.status).toBe(200);
  const redactionId = redacted.body.event_id as string;
  await syncUntil(a, alice, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.event_id === redactionId));
  return { roomId, messageId, redactionId };
}

/** What `account` pages back to: the redaction first, then the message, redacted, with both unsigned fields. */
async function expectRedactedInMessages(server: FederatedServer, account: Account, room: { roomId: string; messageId: string; redactionId: string }, where: string) {
  const page = await server.api('GET', `/_matrix/client/v3/rooms/${enc(room.roomId)}/messages?dir=b&limit=50`, { token: account.accessToken });
  expect(page.status).toBe(200);
  const events: any[] = page.body.chunk;
  const redaction = events.find((e) => e.event_id === room.redactionId);
  const message = events.find((e) => e.event_id === room.messageId);
  expect(redaction, where).toBeDefined();
  expect(redaction.redacts ?? redaction.content.redacts, where).toBe(room.messageId);
  expect(message, where).toBeDefined();
  expect(message.content, where).toEqual({});
  expect(message.unsigned.redacted_by, where).toBe(room.redactionId);
  expect(message.unsigned.redacted_because.event_id, where).toBe(room.redactionId);
  // Newest first: the redaction before the message it redacts.
  expect(events.indexOf(redaction), where).toBeLessThan(events.indexOf(message));
}

describe.each(versions)('a redaction from another server in room version %s', (version) => {
  it('shows as unsigned.redacted_by beside redacted_because on both servers', async () => {
    const room = await redactedOnB(version);
    await expectRedactedInMessages(a, alice, room, 'on A, the room’s server');
    await expectRedactedInMessages(b, bob, room, 'on B, the redacter’s');
  });

  it('shows so on a third server that joins afterwards and backfills both', async () => {
    const room = await redactedOnB(version);
    expect((await c.api('POST', `/_matrix/client/v3/join/${enc(room.roomId)}?server_name=${enc(a.serverName)}`, { token: carol.accessToken, body: {} })).status).toBe(200);
    await expectRedactedInMessages(c, carol, room, 'on C, after a backfill');
  });
});
