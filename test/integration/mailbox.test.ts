import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { defaultEd25519Backend } from '../../src/crypto/ed25519.ts';
import { HEARTH_KEY_ID } from '../../src/crypto/identity.ts';
import { FederationRequestError } from '../../src/federation/client.ts';
import { authorizationHeader } from '../../src/federation/x-matrix.ts';
import type { Homeserver } from '../../src/homeserver.ts';
import { serverNameFromPeerId } from '../../src/p2p/identity.ts';
import { sealLetter } from '../../src/mailbox/letter.ts';
import { depositPath, lettersPath, type CollectOutcome, type DepositOutcome } from '../../src/mailbox/mailbox.ts';
import { startNodeHost, type NodeHost } from '../../src/node/node-host.ts';
import { startP2PHomeserver, type P2PHomeserver, type P2PHomeserverOptions } from '../support/p2p-homeserver.ts';
import { httpSyncer, longPollUntil, timelineHas } from '../support/sync-until.ts';
import { api, register, type Account } from './harness.ts';

// Store-and-forward over real libp2p on 127.0.0.1: A sends, M is a mailbox, B is away
// (or unreachable from A). Every peer has its own OS-chosen port; B (and A, where it
// restarts) keeps its database in a folder of its own.

const running = new Set<P2PHomeserver>();
const directories: string[] = [];
afterEach(async () => {
  for (const peer of [...running]) await stop(peer);
});
afterAll(async () => {
  for (const dir of directories) await rm(dir, { recursive: true, force: true });
});

async function start(options: P2PHomeserverOptions = {}): Promise<P2PHomeserver> {
  const peer = await startP2PHomeserver(options);
  running.add(peer);
  return peer;
}
async function stop(peer: P2PHomeserver): Promise<void> {
  running.delete(peer);
  await peer.close();
}
async function dataDir(name: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `hearth-mailbox-${name}-`));
  directories.push(dir);
  return dir;
}
const name = (peer: P2PHomeserver) => peer.homeserver.serverName;
const seed = () => crypto.getRandomValues(new Uint8Array(32));

/** Resolves with the first value `subscribe` reports that `predicate` accepts. */
function next<T>(subscribe: (listener: (value: T) => void) => () => void, predicate: (value: T) => boolean = () => true): Promise<T> {
  return new Promise((resolve) => {
    const off = subscribe((value) => {
      if (!predicate(value)) return;
      off();
      resolve(value);
    });
  });
}

/** Resolves once `homeserver` knows `mailbox` as a mailbox. */
function knowsMailbox(homeserver: Homeserver, mailbox: string): Promise<unknown> {
  if (homeserver.mailbox.knownMailboxes().includes(mailbox)) return Promise.resolve();
  return next((l) => homeserver.mailbox.onMailboxKnown(l), (m) => m === mailbox);
}

/** Resolves once everything queued for `destination` has gone (directly or via a mailbox). */
function drained(homeserver: Homeserver, destination: string): Promise<unknown> {
  const { queues } = homeserver.federation.component;
  return new Promise<void>((resolve) => {
    const check = async () => {
      if ((await queues.pending(destination)) > 0) return;
      off();
      resolve();
    };
    const off = queues.onSent((to) => void (to === destination && check()));
    void check();
  });
}

const send = async (peer: P2PHomeserver, account: Account, roomId: string, body: string): Promise<string> => {
  const { status, body: sent } = await api(peer, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/${crypto.randomUUID()}`, {
    token: account.accessToken,
    body: { msgtype: 'm.text', body },
  });
  expect(status, JSON.stringify(sent)).toBe(200);
  return sent.event_id as string;
};

/** Long-polls /sync (each poll wakes on news) until the room's timeline has shown `body`. */
async function syncUntilSaid(peer: P2PHomeserver, account: Account, roomId: string, body: string): Promise<void> {
  await longPollUntil(httpSyncer(peer, account.accessToken), timelineHas(roomId, body), { rounds: 30, who: account.userId });
}

async function messages(peer: P2PHomeserver, account: Account, roomId: string): Promise<string[]> {
  const { body } = await api(peer, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/messages?dir=b&limit=50`, { token: account.accessToken });
  return body.chunk.filter((e: any) => e.type === 'm.room.message').map((e: any) => e.content.body).reverse();
}

/** A room on A that bob on B has joined, with A seeing the join (so A sends B what happens in it). */
async function sharedRoom(a: P2PHomeserver, b: P2PHomeserver, alice: Account, bob: Account): Promise<string> {
  const { body: created } = await api(a, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { preset: 'public_chat' } });
  const roomId = created.room_id as string;
  const join = await api(b, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}?server_name=${name(a)}`, { token: bob.accessToken, body: {} });
  expect(join.status, JSON.stringify(join.body)).toBe(200);
  expect(await a.homeserver.services.rooms.membership(roomId, bob.userId)).toBe('join');
  await drained(a.homeserver, name(b));
  return roomId;
}

describe('the mailbox', () => {
  it('holds A\'s mail for B while B is away; B back, knowing only M, gets all of it in order; C cannot collect it; an altered letter is dropped', async () => {
    const m = await start({ mailbox: true });
    const a = await start({ bootstrap: m.p2p.multiaddrs() });
    const bSeed = seed();
    const bDir = await dataDir('b');
    let b = await start({ seed: bSeed, dataDir: bDir, bootstrap: [...m.p2p.multiaddrs(), ...a.p2p.multiaddrs()] });
    const c = await start({ bootstrap: m.p2p.multiaddrs() });
    await knowsMailbox(a.homeserver, name(m));
    const alice = await register(a, 'alice');
    const bob = await register(b, 'bob');
    const roomId = await sharedRoom(a, b, alice, bob);

    // B goes away; A's five messages go to M, one transaction (or a few) as sealed letters.
    await stop(b);
    const viaMailbox: number[] = [];
    a.homeserver.federation.component.queues.onSent((to, pdus, _edus, via) => void (to === name(b) && via === 'mailbox' && viaMailbox.push(pdus)));
    const sent = ['one', 'two', 'three', 'four', 'five'];
    for (const body of sent) await send(a, alice, roomId, body);
    await drained(a.homeserver, name(b));
    expect(viaMailbox.reduce((n, p) => n + p, 0)).toBe(5);

    // A sixth goes too, and is altered in M's store (as a mailbox that wanted to forge would).
    const tamperedId = await send(a, alice, roomId, 'six, as alice wrote it');
    await drained(a.homeserver, name(b));
    await m.database.transaction((tx) => tx.run("UPDATE mailbox_letters SET letter = replace(letter, 'six, as alice wrote it', 'six, as the mailbox wants') WHERE seq = (SELECT MAX(seq) FROM mailbox_letters)"));
    const held = await m.homeserver.mailbox.store!.usage(name(b));
    expect(held.letters).toBeGreaterThanOrEqual(2);

    // C, authenticated as itself, cannot collect B's mail, nor acknowledge (delete) it.
    const asC = c.homeserver.federation.component.client;
    for (const query of [{}, { ack: '999999' }]) {
      const refused = await asC.request(name(m), 'GET', lettersPath(name(b)), { query }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(FederationRequestError);
      expect(refused).toMatchObject({ status: 403, errcode: 'M_FORBIDDEN' });
    }
    expect(await m.homeserver.mailbox.store!.usage(name(b))).toEqual(held);
    // Nor can C deposit A's letter (a copy of it, as if it were its own): the depositor must be the letter's origin.
    const copy = await m.database.get<{ letter: string; txn_id: string }>('SELECT letter, txn_id FROM mailbox_letters ORDER BY seq LIMIT 1');
    const redeposit = await asC.request(name(m), 'PUT', depositPath(name(b), copy!.txn_id), { body: JSON.parse(copy!.letter) }).catch((e: unknown) => e);
    expect(redeposit).toMatchObject({ status: 403, errcode: 'M_FORBIDDEN' });
    expect(await m.homeserver.mailbox.store!.usage(name(b))).toEqual(held);

    // A stops: B can only get its mail from M. B comes back with its data, bootstrapped to M alone.
    await stop(a);
    let collected!: Promise<CollectOutcome>;
    b = await start({
      seed: bSeed,
      dataDir: bDir,
      bootstrap: m.p2p.multiaddrs(),
      onCreated: (homeserver) => (collected = next((l) => homeserver.mailbox.onCollected(l), (o) => o.mailbox === name(m) && o.rejected > 0)),
    });
    await syncUntilSaid(b, bob, roomId, 'five');
    const outcome = await collected;
    expect(outcome.rejected).toBe(1);
    expect(await messages(b, bob, roomId)).toEqual(sent);
    // Nothing of the altered letter was kept; and B acknowledged everything, so M holds nothing for it.
    expect(await b.homeserver.services.rooms.getEvent(tamperedId)).toBeUndefined();
    expect(await m.homeserver.mailbox.store!.usage(name(b))).toEqual({ letters: 0, bytes: 0 });
  }, 120_000);

  it('tells B at once when mail for it arrives while B is online but A cannot reach it; a restarted A remembers M', async () => {
    const m = await start({ mailbox: true });
    const aSeed = seed();
    const aDir = await dataDir('a');
    let a = await start({ seed: aSeed, dataDir: aDir, bootstrap: m.p2p.multiaddrs() });
    const b = await start({ bootstrap: [...m.p2p.multiaddrs(), ...a.p2p.multiaddrs()] });
    await knowsMailbox(a.homeserver, name(m));
    const alice = await register(a, 'alice');
    const bob = await register(b, 'bob');
    const roomId = await sharedRoom(a, b, alice, bob);

    // A restarts unable to reach B (its connection gater refuses B) and before it meets M again:
    // it deposits with M from what it remembered, and M tells B, who collects at once.
    await stop(a);
    a = await start({ seed: aSeed, dataDir: aDir, refuse: (server) => server === name(b) });
    expect(a.homeserver.mailbox.knownMailboxes()).toEqual([name(m)]);
    const deposited = next<DepositOutcome>((l) => a.homeserver.mailbox.onDeposit(l), (o) => o.accepted.includes(name(m)));
    // B stays connected to M throughout: what makes it collect is M's notice, not a reconnect or a timer.
    const collected = next<CollectOutcome>((l) => b.homeserver.mailbox.onCollected(l), (o) => o.mailbox === name(m) && o.accepted > 0);
    await a.p2p.dial(m.p2p.multiaddrs()[0]!);
    await send(a, alice, roomId, 'while B cannot be reached');
    await deposited;
    await syncUntilSaid(b, bob, roomId, 'while B cannot be reached');
    expect((await collected).rejected).toBe(0);
    expect(a.p2p.peers().map((p) => p.server_name)).not.toContain(name(b));
  }, 120_000);

  it('a mailbox restarted on the same data folder, listening on "any port" as npm start\'s peer does, is found again on the port it had: A deposits there while B is away, and B back collects all of it (issue 24, peers 1)', async () => {
    const mDir = await dataDir('m');
    const startM = () => startNodeHost({ dataDir: mDir, port: 0, listen: ['/ip4/127.0.0.1/tcp/0'], relay: true, mailbox: true, rateLimits: false });
    let m: NodeHost | undefined = await startM();
    try {
      const mName = m.homeserver.serverName;
      const mAddresses = m.p2p.multiaddrs();
      const a = await start({ bootstrap: mAddresses });
      const bSeed = seed();
      const bDir = await dataDir('b');
      let b = await start({ seed: bSeed, dataDir: bDir, bootstrap: [...mAddresses, ...a.p2p.multiaddrs()] });
      await knowsMailbox(a.homeserver, mName);
      const alice = await register(a, 'alice');
      const bob = await register(b, 'bob');
      const roomId = await sharedRoom(a, b, alice, bob);

      // M restarts (as SIGTERM and npm start again would): same data folder, the listen address still asks for any port.
      await m.close();
      m = undefined;
      const backAtM = new Promise<void>((resolve) =>
        a.p2p.libp2p.addEventListener('peer:connect', ({ detail }) => void (serverNameFromPeerId(detail) === mName && resolve())),
      );
      m = await startM();
      expect(m.homeserver.serverName).toBe(mName);
      expect(m.p2p.multiaddrs()).toEqual(mAddresses);
      // A, which dials its bootstrap address until it answers, is back with M.
      await backAtM;

      // B goes away; A's five go to M.
      await stop(b);
      const viaMailbox: number[] = [];
      a.homeserver.federation.component.queues.onSent((to, pdus, _edus, via) => void (to === name(b) && via === 'mailbox' && viaMailbox.push(pdus)));
      const sent = ['one', 'two', 'three', 'four', 'five'].map((n) => `after the restart: ${n}`);
      for (const body of sent) await send(a, alice, roomId, body);
      await drained(a.homeserver, name(b));
      expect(viaMailbox.reduce((n, p) => n + p, 0)).toBe(5);

      // B comes back, unable to reach A (though A is up): its mail can come only from M.
      let collected!: Promise<CollectOutcome>;
      b = await start({
        seed: bSeed,
        dataDir: bDir,
        bootstrap: mAddresses,
        refuse: (server) => server === name(a),
        onCreated: (homeserver) => (collected = next((l) => homeserver.mailbox.onCollected(l), (o) => o.mailbox === mName && o.accepted > 0)),
      });
      await syncUntilSaid(b, bob, roomId, sent.at(-1)!);
      expect((await collected).rejected).toBe(0);
      expect(await messages(b, bob, roomId)).toEqual(sent);
      expect(await m.homeserver.mailbox.store!.usage(name(b))).toEqual({ letters: 0, bytes: 0 });
    } finally {
      await m?.close();
    }
  }, 120_000);

  it('leaves mail with every known mailbox, so one that is down loses nothing; copies from two mailboxes arrive once', async () => {
    const m1Seed = seed();
    const m1Dir = await dataDir('m1');
    let m1 = await start({ seed: m1Seed, dataDir: m1Dir, mailbox: true });
    const m2 = await start({ mailbox: true });
    const a = await start({ bootstrap: [...m1.p2p.multiaddrs(), ...m2.p2p.multiaddrs()] });
    const bSeed = seed();
    const bDir = await dataDir('b');
    let b = await start({ seed: bSeed, dataDir: bDir, bootstrap: [...m1.p2p.multiaddrs(), ...m2.p2p.multiaddrs(), ...a.p2p.multiaddrs()] });
    await knowsMailbox(a.homeserver, name(m1));
    await knowsMailbox(a.homeserver, name(m2));
    const alice = await register(a, 'alice');
    const bob = await register(b, 'bob');
    const roomId = await sharedRoom(a, b, alice, bob);
    await stop(b);

    const deposit = (txnHolds: (o: DepositOutcome) => boolean) => next<DepositOutcome>((l) => a.homeserver.mailbox.onDeposit(l), txnHolds);
    let deposited = deposit((o) => o.destination === name(b));
    await send(a, alice, roomId, 'to both');
    expect((await deposited).accepted.sort()).toEqual([name(m1), name(m2)].sort());
    await drained(a.homeserver, name(b));

    await stop(m1);
    deposited = deposit((o) => o.destination === name(b));
    await send(a, alice, roomId, 'while M1 is down');
    expect(await deposited).toMatchObject({ accepted: [name(m2)], refused: [] });
    await drained(a.homeserver, name(b));
    await stop(a);

    // M1 comes back with what it held; B collects from both, and 'to both' arrives twice: the dedupe keeps one.
    m1 = await start({ seed: m1Seed, dataDir: m1Dir, mailbox: true });
    let fromBoth!: Promise<unknown>;
    b = await start({
      seed: bSeed,
      dataDir: bDir,
      bootstrap: [...m1.p2p.multiaddrs(), ...m2.p2p.multiaddrs()],
      onCreated: (homeserver) => {
        const collected = (mailbox: string) => next<CollectOutcome>((l) => homeserver.mailbox.onCollected(l), (o) => o.mailbox === mailbox);
        fromBoth = Promise.all([collected(name(m1)), collected(name(m2))]);
      },
    });
    await fromBoth;
    expect(await messages(b, bob, roomId)).toEqual(['to both', 'while M1 is down']);
    expect(await m1.homeserver.mailbox.store!.usage()).toEqual({ letters: 0, bytes: 0 });
    expect(await m2.homeserver.mailbox.store!.usage()).toEqual({ letters: 0, bytes: 0 });
  }, 120_000);

  it('answers bad input with Matrix errors, and a server that is no mailbox says so (404 M_UNRECOGNIZED)', async () => {
    const m = await start({ mailbox: true });
    const aSeed = seed();
    const a = await start({ seed: aSeed, bootstrap: m.p2p.multiaddrs() });
    const aKey = await (await defaultEd25519Backend()).keyFromSeed(aSeed);
    await knowsMailbox(a.homeserver, name(m));
    const asA = a.homeserver.federation.component.client;
    const error = (promise: Promise<unknown>) => promise.then(() => undefined, (e: unknown) => e);
    const someone = 'ab'.repeat(32);
    const letter = await sealLetter(name(a), someone, 't1', { origin: name(a), origin_server_ts: 0, pdus: [] }, HEARTH_KEY_ID, aKey);

    expect(await error(asA.request(name(m), 'PUT', depositPath(someone, 't1'), { body: { ...letter, method: 'GET' } }))).toMatchObject({ status: 400, errcode: 'M_BAD_JSON' });
    expect(await error(asA.request(name(m), 'PUT', depositPath(someone, 't1'), { body: [1, 2] }))).toMatchObject({ status: 400, errcode: 'M_BAD_JSON' });
    expect(await error(asA.request(name(m), 'PUT', depositPath('not-hearth', 't1'), { body: letter }))).toMatchObject({ status: 400, errcode: 'M_INVALID_PARAM' });
    // Under another txn ID, or for another destination, than it was sealed for.
    expect(await error(asA.request(name(m), 'PUT', depositPath(someone, 't2'), { body: letter }))).toMatchObject({ status: 403, errcode: 'M_FORBIDDEN' });
    expect(await error(asA.request(name(m), 'PUT', depositPath('cd'.repeat(32), 't1'), { body: letter }))).toMatchObject({ status: 403, errcode: 'M_FORBIDDEN' });
    expect(await error(asA.request(name(m), 'GET', lettersPath(name(a)), { query: { ack: '-1' } }))).toMatchObject({ status: 400, errcode: 'M_INVALID_PARAM' });
    expect(await m.homeserver.mailbox.store!.usage()).toEqual({ letters: 0, bytes: 0 });
    await asA.request(name(m), 'PUT', depositPath(someone, 't1'), { body: letter });
    expect(await m.homeserver.mailbox.store!.usage(someone)).toMatchObject({ letters: 1 });

    // A is not a mailbox: deposit and collect are not routes there.
    const asM = m.homeserver.federation.component.client;
    expect(await error(asM.request(name(a), 'GET', lettersPath(name(m))))).toMatchObject({ status: 404, errcode: 'M_UNRECOGNIZED' });
    expect(await error(asM.request(name(a), 'PUT', depositPath(someone, 't1'), { body: letter }))).toMatchObject({ status: 404, errcode: 'M_UNRECOGNIZED' });
    expect(m.homeserver.mailbox.knownMailboxes()).toEqual([]);
  }, 60_000);

  it('refuses deposits over the per-destination bound with a Matrix error; the sender keeps them queued and delivers them later', async () => {
    const m = await start({ mailbox: { maxLettersPerDestination: 2 } });
    const aSeed = seed();
    const a = await start({ seed: aSeed, bootstrap: m.p2p.multiaddrs() });
    const aKey = await (await defaultEd25519Backend()).keyFromSeed(aSeed);
    const bSeed = seed();
    const bDir = await dataDir('b');
    let b = await start({ seed: bSeed, dataDir: bDir, bootstrap: [...m.p2p.multiaddrs(), ...a.p2p.multiaddrs()] });
    await knowsMailbox(a.homeserver, name(m));
    const alice = await register(a, 'alice');
    const bob = await register(b, 'bob');
    const roomId = await sharedRoom(a, b, alice, bob);
    await stop(b);

    const { queues } = a.homeserver.federation.component;
    for (const body of ['q1', 'q2']) {
      await send(a, alice, roomId, body);
      await drained(a.homeserver, name(b));
    }
    const refused = next<DepositOutcome>((l) => a.homeserver.mailbox.onDeposit(l), (o) => o.refused.length > 0);
    await send(a, alice, roomId, 'q3');
    expect((await refused).refused[0]).toMatchObject({ mailbox: name(m), status: 507, errcode: 'M_RESOURCE_LIMIT_EXCEEDED' });
    expect(await queues.pending(name(b))).toBeGreaterThan(0);

    // The refusal as it comes over the wire: the Matrix error shape.
    const letter = await sealLetter(name(a), name(b), 'over-quota', { origin: name(a), origin_server_ts: 0, pdus: [] }, HEARTH_KEY_ID, aKey);
    const path = depositPath(name(b), 'over-quota');
    const response = await a.p2p.transport.send(name(m), new Request(`http://${name(m)}${path}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', authorization: await authorizationHeader('PUT', path, name(a), name(m), letter, HEARTH_KEY_ID, aKey) },
      body: JSON.stringify(letter),
    }));
    expect(response.status).toBe(507);
    expect(await response.json()).toEqual({ errcode: 'M_RESOURCE_LIMIT_EXCEEDED', error: expect.any(String) });

    // B comes back: q1 and q2 from M, q3 straight from A once they meet.
    b = await start({ seed: bSeed, dataDir: bDir, bootstrap: [...m.p2p.multiaddrs(), ...a.p2p.multiaddrs()] });
    await syncUntilSaid(b, bob, roomId, 'q3');
    await drained(a.homeserver, name(b));
    expect(await messages(b, bob, roomId)).toEqual(['q1', 'q2', 'q3']);
  }, 120_000);
});
