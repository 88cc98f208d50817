import { afterEach, expect, it } from 'vitest';
import { startP2PHomeserver, type P2PHomeserver, type P2PHomeserverOptions } from '../support/p2p-homeserver.ts';
import { httpSyncer, longPollUntil, timelineHas } from '../support/sync-until.ts';
import { api, register, type Account } from './harness.ts';

// Three homeservers over real libp2p, faults injected at the receiving end of a peer's federation API:
// an event whose prev event cannot be fetched now (the answer's stream breaks, as under load) is not
// lost: its transaction is sent again until the event is placed. And /messages, whose backfill cannot
// fetch what a backfilled event needs, answers with what is held instead of 500. A transaction sent
// again while the first attempt is held in such a fetch waits for that attempt's answer instead of
// processing its PDUs again.

const enc = encodeURIComponent;
const GAP_FETCHES = ['/get_missing_events/', '/state/', '/state_ids/', '/event_auth/'];
const isGapFetch = (request: Request) => GAP_FETCHES.some((p) => new URL(request.url).pathname.includes(p));

/** Holds requests while shut. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  let shut = true;
  return {
    get shut() {
      return shut;
    },
    hold: () => opened,
    open() {
      shut = false;
      open();
    },
  };
}

/** An answer whose body fails as it is written: the libp2p stream is aborted, and the asker sees it reset. */
const brokenAnswer = () => new Response(new ReadableStream({ start: (controller) => controller.error(new Error('fault: the answer breaks')) }), { status: 200 });

const started: P2PHomeserver[] = [];
async function peer(options: P2PHomeserverOptions = {}): Promise<P2PHomeserver> {
  const server = await startP2PHomeserver(options);
  started.push(server);
  return server;
}
afterEach(async () => {
  for (const s of started.splice(0).reverse()) await s.close();
});

async function joinRoom(server: P2PHomeserver, account: Account, roomId: string, via: P2PHomeserver): Promise<void> {
  const joined = await api(server, 'POST', `/_matrix/client/v3/join/${enc(roomId)}?server_name=${via.homeserver.serverName}`, { token: account.accessToken, body: {} });
  expect(joined.status, JSON.stringify(joined.body)).toBe(200);
}

async function say(server: P2PHomeserver, account: Account, roomId: string, body: string): Promise<string> {
  const sent = await api(server, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/${enc(body)}`, { token: account.accessToken, body: { msgtype: 'm.text', body } });
  expect(sent.status, JSON.stringify(sent.body)).toBe(200);
  return sent.body.event_id as string;
}

it('an event whose prev event could not be fetched (the answer broke) is sent again until it is placed', async () => {
  // A fails to answer B's gap fetches while `aFails` is shut; B holds C's transactions while `cHeld` is shut.
  const aFails = gate();
  const cHeld = gate();
  let cName = '';
  // The stream of A's answer to B's gap fetch breaks (as one that times out or is reset does under load).
  const a = await peer({
    inbound: async (request, remote, next) => {
      if (aFails.shut && remote === b?.homeserver.serverName && isGapFetch(request)) return brokenAnswer();
      return next(request);
    },
  });
  let gaveUp!: () => void;
  const bGaveUp = new Promise<void>((resolve) => (gaveUp = resolve));
  const b: P2PHomeserver = await peer({
    bootstrap: a.p2p.multiaddrs(),
    log: (message) => {
      if (/^federation: event \S+ from \S+ failed/.test(message)) gaveUp();
    },
    inbound: async (request, remote, next) => {
      if (cHeld.shut && remote === cName && new URL(request.url).pathname.includes('/send/')) await cHeld.hold();
      return next(request);
    },
  });
  const c = await peer({ bootstrap: a.p2p.multiaddrs() });
  cName = c.homeserver.serverName;
  const [alice, bob, carol] = [await register(a, 'alice'), await register(b, 'bob'), await register(c, 'carol')];
  const created = await api(a, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat' } });
  const roomId = created.body.room_id as string;
  await joinRoom(b, bob, roomId, a);
  await joinRoom(c, carol, roomId, a);
  const aliceSync = httpSyncer(a, alice.accessToken, 2000);
  await longPollUntil(aliceSync, (s) => (s.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.state_key === carol.userId && e.content?.membership === 'join'));

  // Carol's message reaches A, not B (held); alice's next one builds on it, and B cannot fetch it from A.
  await say(c, carol, roomId, 'from C');
  await longPollUntil(aliceSync, timelineHas(roomId, 'from C'), { who: 'alice' });
  // A's queue is done with a transaction to B once B answered it: B must hold the event then.
  const delivered = new Promise<void>((resolve) => a.homeserver.federation.component.queues.onSent((to, pdus) => {
    if (to === b.homeserver.serverName && pdus > 0) resolve();
  }));
  const eventId = await say(a, alice, roomId, 'from A, after C');
  // Once B has given up placing the event, both faults go.
  await bGaveUp;
  aFails.open();
  cHeld.open();
  await delivered;
  const held = await api(b, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/event/${enc(eventId)}`, { token: bob.accessToken });
  expect(held.status, JSON.stringify(held.body)).toBe(200);
  await longPollUntil(httpSyncer(b, bob.accessToken, 2000), timelineHas(roomId, 'from A, after C'), { who: 'bob' });
});

it('/messages answers with what is held when its backfill cannot fetch what a backfilled event needs', async () => {
  let broken = false;
  let bName = '';
  const a = await peer({
    inbound: async (request, remote, next) => {
      if (broken && remote === bName && isGapFetch(request)) return brokenAnswer();
      return next(request);
    },
  });
  const b = await peer({ bootstrap: a.p2p.multiaddrs() });
  bName = b.homeserver.serverName;
  const [alice, bob] = [await register(a, 'alice'), await register(b, 'bob')];
  const created = await api(a, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat' } });
  const roomId = created.body.room_id as string;
  for (let i = 0; i < 12; i++) await say(a, alice, roomId, `before ${i}`);
  await joinRoom(b, bob, roomId, a);
  const synced = await longPollUntil(httpSyncer(b, bob.accessToken, 2000), (s) => !!s.rooms?.join?.[roomId], { who: 'bob' });
  broken = true;
  // B backfills from A; the oldest event of the batch needs the state before it, whose answer breaks.
  const page = await api(b, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=5&from=${enc(synced.rooms.join[roomId].timeline.prev_batch)}`, { token: bob.accessToken });
  expect(page.status, JSON.stringify(page.body)).toBe(200);
  // Nothing before the join could be placed: none of it is given, and no `end` promises more.
  expect(page.body.chunk).toEqual([]);
  expect(page.body.end).toBeUndefined();
  // With the fault gone, the same request backfills the history.
  broken = false;
  const again = await api(b, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=5&from=${enc(synced.rooms.join[roomId].timeline.prev_batch)}`, { token: bob.accessToken });
  expect(again.status, JSON.stringify(again.body)).toBe(200);
  expect(again.body.chunk.map((e: any) => e.content?.body)).toContain('before 11');
});

it('a transaction sent again while its first attempt is still processed waits for that attempt: one answer, its PDUs processed once', async () => {
  // B holds every /send of A's own queue (so the messages reach B only in the test's transactions);
  // A holds B's /get_missing_events while `fetchHeld` is shut, and records for which events each was asked.
  const queueHeld = gate();
  const fetchHeld = gate();
  const fetchedFor: string[][] = [];
  let fetched!: (latest: string[]) => void;
  let onFetch = new Promise<string[]>((resolve) => (fetched = resolve));
  let aName = '';
  let bName = '';
  const a = await peer({
    inbound: async (request, remote, next) => {
      if (remote === bName && new URL(request.url).pathname.includes('/get_missing_events/')) {
        const latest = ((await request.clone().json()) as { latest_events: string[] }).latest_events;
        fetchedFor.push(latest);
        fetched(latest);
        if (fetchHeld.shut) await fetchHeld.hold();
      }
      return next(request);
    },
  });
  const b = await peer({
    bootstrap: a.p2p.multiaddrs(),
    inbound: async (request, remote, next) => {
      const path = new URL(request.url).pathname;
      if (remote === aName && path.includes('/send/') && !path.includes('/send/by-test-') && queueHeld.shut) await queueHeld.hold();
      return next(request);
    },
  });
  [aName, bName] = [a.homeserver.serverName, b.homeserver.serverName];
  const [alice, bob] = [await register(a, 'alice'), await register(b, 'bob')];
  const created = await api(a, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat' } });
  const roomId = created.body.room_id as string;
  await joinRoom(b, bob, roomId, a);
  const bobSync = httpSyncer(b, bob.accessToken, 2000);
  await longPollUntil(bobSync, (s) => !!s.rooms?.join?.[roomId], { who: 'bob' });

  // Three messages B does not hold: each builds on the one before.
  const [, second, third] = [await say(a, alice, roomId, 'one'), await say(a, alice, roomId, 'two'), await say(a, alice, roomId, 'three')];
  const pduOf = async (eventId: string) => (await b.homeserver.federation.component.client.event(aName, eventId)).pdus[0]!;
  const [secondPdu, thirdPdu] = [await pduOf(second), await pduOf(third)];
  const send = (txnId: string, pdu: unknown) => a.homeserver.federation.component.client.sendTransaction(bName, txnId, { origin: aName, origin_server_ts: Date.now(), pdus: [pdu as never] });

  // The first attempt lacks `one` and asks A for it: held there.
  const first = send('by-test-1', secondPdu);
  expect(await onFetch).toEqual([second]);
  onFetch = new Promise((resolve) => (fetched = resolve));
  // The same transaction again while that attempt is held, then another one (lacking `two`) behind it:
  // once that other one has asked A, a retry that did not wait would have asked too.
  const retry = send('by-test-1', secondPdu);
  const other = send('by-test-2', thirdPdu);
  expect(await onFetch).toEqual([third]);
  expect(fetchedFor).toEqual([[second], [third]]);
  fetchHeld.open();

  const answers = await Promise.all([first, retry]);
  expect(answers[0]).toEqual({ pdus: { [second]: {} } });
  expect(answers[1]).toEqual(answers[0]);
  expect(await other).toEqual({ pdus: { [third]: {} } });
  expect(fetchedFor.filter(([id]) => id === second)).toHaveLength(1);
  // Each message is in bob's timeline once.
  await longPollUntil(bobSync, timelineHas(roomId, 'three'), { who: 'bob' });
  const page = await api(b, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=10`, { token: bob.accessToken });
  expect(page.body.chunk.map((e: any) => e.content?.body).filter(Boolean)).toEqual(['three', 'two', 'one']);
  queueHeld.open();
});
