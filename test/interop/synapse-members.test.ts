// Members of a room on Hearth and on a real Synapse, as the conformance suites check what crosses between two
// servers (issue 41): a remote user banned is out on both servers and cannot come back until unbanned, presence
// set to `unavailable` reaches the other server's members (whose syncs with set_presence=offline change
// nothing), and a message redacted by its sender reads with `unsigned.redacted_by` on the other server, also
// once a server that joins afterwards backfills it. Hearth runs in this process as a DNS-named host over
// HTTPS (as `npm run serve -- --server-name` runs), Synapse as a child; both trust the test's CA.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { api, register, type Account } from '../integration/harness.ts';
import { createTestTls, type TestTls } from '../support/https-hosts.ts';
import { freePort, startNodePeer, type NodePeer } from '../support/node-peer.ts';
import { startSynapse, stopAllSynapses, type SynapseServer } from '../support/synapse.ts';
import { longPollUntil, type SyncBody } from '../support/sync-until.ts';

const PASSWORD = 'correct horse battery staple';
const V3 = '/_matrix/client/v3';
const enc = encodeURIComponent;

let tls: TestTls;
let synapse: SynapseServer;
let hearthHost: NodePeer;
let hearth: Server;
const hearthLog: string[] = [];

interface Server {
  label: string;
  name: string;
  url: string;
  fetch: typeof fetch;
}

beforeAll(async () => {
  tls = await createTestTls();
  const port = await freePort();
  [synapse, hearthHost] = await Promise.all([
    startSynapse({ tls }),
    startNodePeer({ port, listen: [], serverName: `localhost:${port}`, tls: tls.leaf, https: { extraCa: [tls.ca.cert] }, log: (message, error) => hearthLog.push(`${message} ${error ?? ''}`) }),
  ]);
  hearth = { label: 'Hearth', name: hearthHost.homeserver.serverName, url: hearthHost.url, fetch: tls.fetch };
});

beforeEach(({ onTestFailed }) => {
  const from = { synapse: synapse.log().length, hearth: hearthLog.length };
  onTestFailed(() => {
    console.log(`--- Synapse's log during the test (last 150 lines):\n${synapse.log().slice(from.synapse).split('\n').slice(-150).join('\n')}`);
    console.log(`--- Hearth's log during the test:\n${hearthLog.slice(from.hearth).join('\n')}`);
  });
});

afterAll(async () => {
  await stopAllSynapses();
  await hearthHost?.close();
  await tls?.dispose();
});

const synapseServer = (): Server => ({ label: 'Synapse', name: synapse.name, url: synapse.url, fetch: synapse.fetch });
let count = 0;
const user = async (server: Server, name: string) => register(server, `${name}${++count}`, PASSWORD);
const call = async (server: Server, account: Account, method: string, path: string, body?: unknown) =>
  api(server, method, path, { token: account.accessToken, ...(body === undefined ? {} : { body }), unchecked: true });
/** Syncs as the suites do (`set_presence=offline`) until `done` holds. */
const syncUntil = (server: Server, account: Account, done: (body: SyncBody) => boolean, since?: string) =>
  longPollUntil(async (from) => {
    const r = await call(server, account, 'GET', `${V3}/sync?timeout=2000&set_presence=offline${from ? `&since=${enc(from)}` : ''}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body;
  }, done, { since, timeoutMs: 30_000, who: `${account.userId} on ${server.label}` });
const memberIs = (roomId: string, userId: string, membership: string) => (s: SyncBody) =>
  ['join', 'leave'].some((section) => (s.rooms?.[section]?.[roomId]?.timeline?.events ?? []).some((e: any) => e.type === 'm.room.member' && e.state_key === userId && e.content.membership === membership));

/** A public room made on `home` by `owner`, which `guest` of `away` joins. */
async function sharedRoom(home: Server, owner: Account, away: Server, guest: Account, body: object = {}): Promise<string> {
  const created = await call(home, owner, 'POST', `${V3}/createRoom`, { preset: 'public_chat', ...body });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const roomId = created.body.room_id as string;
  const joined = await call(away, guest, 'POST', `${V3}/join/${enc(roomId)}?server_name=${enc(home.name)}`, {});
  expect(joined.status, JSON.stringify(joined.body)).toBe(200);
  await syncUntil(home, owner, memberIs(roomId, guest.userId, 'join'));
  return roomId;
}

const directions = [
  { direction: 'a Hearth room bans a Synapse user', home: () => hearth, away: synapseServer },
  { direction: 'a Synapse room bans a Hearth user', home: synapseServer, away: () => hearth },
];

describe.each(directions)('$direction', ({ home: homeOf, away: awayOf }) => {
  it('is out on both servers, and can neither rejoin, be invited nor be kicked until unbanned', async () => {
    const [home, away] = [homeOf(), awayOf()];
    const [owner, guest] = [await user(home, 'owner'), await user(away, 'guest')];
    const roomId = await sharedRoom(home, owner, away, guest);
    const since = (await syncUntil(away, guest, (s) => !!s.rooms?.join?.[roomId])).next_batch;
    expect((await call(home, owner, 'POST', `${V3}/rooms/${enc(roomId)}/ban`, { user_id: guest.userId, reason: 'testing' })).status).toBe(200);
    expect((await call(home, owner, 'GET', `${V3}/rooms/${enc(roomId)}/state/m.room.member/${enc(guest.userId)}`)).body.membership).toBe('ban');
    await syncUntil(away, guest, memberIs(roomId, guest.userId, 'ban'), since);
    const state = await call(away, guest, 'GET', `${V3}/rooms/${enc(roomId)}/state/m.room.member/${enc(guest.userId)}`);
    expect(state.status, `${away.label}: ${JSON.stringify(state.body)}`).toBe(403);
    expect((await call(away, guest, 'POST', `${V3}/join/${enc(roomId)}?server_name=${enc(home.name)}`, {})).status).toBe(403);
    for (const action of ['invite', 'kick']) {
      expect((await call(home, owner, 'POST', `${V3}/rooms/${enc(roomId)}/${action}`, { user_id: guest.userId })).status, action).toBe(403);
    }
    expect((await call(home, owner, 'POST', `${V3}/rooms/${enc(roomId)}/unban`, { user_id: guest.userId })).status).toBe(200);
    const back = await call(away, guest, 'POST', `${V3}/join/${enc(roomId)}?server_name=${enc(home.name)}`, {});
    expect(back.status, JSON.stringify(back.body)).toBe(200);
  });
});

describe.each([
  { direction: 'from Hearth to Synapse', from: () => hearth, to: synapseServer },
  { direction: 'from Synapse to Hearth', from: synapseServer, to: () => hearth },
])('presence unavailable $direction', ({ from: fromOf, to: toOf }) => {
  it('reaches the other server’s members', async () => {
    const [from, to] = [fromOf(), toOf()];
    const [setter, watcher] = [await user(from, 'setter'), await user(to, 'watcher')];
    await sharedRoom(from, setter, to, watcher);
    expect((await call(from, setter, 'PUT', `${V3}/presence/${enc(setter.userId)}/status`, { presence: 'unavailable' })).status).toBe(200);
    const presenceOf = (s: SyncBody) => s.presence?.events?.filter((e: any) => e.sender === setter.userId).at(-1)?.content.presence;
    await syncUntil(to, watcher, (s) => presenceOf(s) === 'unavailable');
    await syncUntil(from, setter, (s) => presenceOf(s) === 'unavailable');
  });
});

describe.each([
  { direction: 'a Synapse user redacts in a Hearth room', home: () => hearth, redacter: synapseServer },
  { direction: 'a Hearth user redacts in a Synapse room', home: synapseServer, redacter: () => hearth },
])('$direction', ({ home: homeOf, redacter: redacterOf }) => {
  it('the redacted message has unsigned.redacted_by beside redacted_because on both servers', async () => {
    const [home, away] = [homeOf(), redacterOf()];
    const [owner, guest] = [await user(home, 'owner'), await user(away, 'redacter')];
    const roomId = await sharedRoom(home, owner, away, guest);
    const messageId = (await call(away, guest, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/m1`, { msgtype: 'm.text', body: 'Message' })).body.event_id as string;
    const redactionId = (await call(away, guest, 'PUT', `${V3}/rooms/${enc(roomId)}/redact/${enc(messageId)}/r1`, {})).body.event_id as string;
    await syncUntil(home, owner, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.event_id === redactionId));
    for (const [server, account] of [[home, owner], [away, guest]] as const) {
      const chunk: any[] = (await call(server, account, 'GET', `${V3}/rooms/${enc(roomId)}/messages?dir=b&limit=50`)).body.chunk;
      const message = chunk.find((e) => e.event_id === messageId);
      expect(message?.content, server.label).toEqual({});
      expect(message?.unsigned?.redacted_by, server.label).toBe(redactionId);
      expect(message?.unsigned?.redacted_because?.event_id, server.label).toBe(redactionId);
    }
  });
});

describe('a redaction on Synapse, backfilled by Hearth', () => {
  it('reads with unsigned.redacted_by once a Hearth user who joins afterwards pages back to it', async () => {
    const [owner, latecomer] = [await user(synapseServer(), 'owner'), await user(hearth, 'latecomer')];
    const created = await call(synapseServer(), owner, 'POST', `${V3}/createRoom`, { preset: 'public_chat' });
    const roomId = created.body.room_id as string;
    const messageId = (await call(synapseServer(), owner, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/m1`, { msgtype: 'm.text', body: 'Message' })).body.event_id as string;
    const redactionId = (await call(synapseServer(), owner, 'PUT', `${V3}/rooms/${enc(roomId)}/redact/${enc(messageId)}/r1`, {})).body.event_id as string;
    for (let i = 0; i < 5; i++) await call(synapseServer(), owner, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/f${i}`, { msgtype: 'm.text', body: `after ${i}` });
    expect((await call(hearth, latecomer, 'POST', `${V3}/join/${enc(roomId)}?server_name=${enc(synapse.name)}`, {})).status).toBe(200);
    const events: any[] = [];
    let from: string | undefined;
    for (let page = 0; page < 10 && !events.some((e) => e.event_id === messageId); page++) {
      const r = await call(hearth, latecomer, 'GET', `${V3}/rooms/${enc(roomId)}/messages?dir=b&limit=5${from ? `&from=${enc(from)}` : ''}`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      events.push(...r.body.chunk);
      if (!r.body.end) break;
      from = r.body.end;
    }
    const message = events.find((e) => e.event_id === messageId);
    expect(events.some((e) => e.event_id === redactionId)).toBe(true);
    expect(message?.content).toEqual({});
    expect(message?.unsigned?.redacted_by).toBe(redactionId);
  });
});
