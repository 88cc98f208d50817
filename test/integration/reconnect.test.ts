import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, register } from '../../bench/federation.bench.ts';
import { spawnHearth, type HearthProcess } from '../support/hearth-process.ts';
import { assertNetworkNamespaces, createLab, type Lab, type Namespace } from '../support/netns.ts';
import { httpSyncer, longPollUntil } from '../support/sync-until.ts';

// When the network comes back (issue 40). Two hosts, each in a network namespace of its own, joined by
// one link that the test cuts by dropping every packet on it (iptables), as a network that goes silent:
// no connection is told. A sends while the link is out; the request in flight waits on a connection
// that carries nothing. A must see that (stall-watch.ts: it logs the connection it closes), dial B again
// while the link is out, and once the link is back flush everything at once over the new connection,
// not wait for TCP's resends on the old one, nor for the request's deadline (here 10 minutes, so the
// test would time out without this). Every message arrives once, in order.

const enc = encodeURIComponent;
let lab: Lab;
let a: HearthProcess;
let b: HearthProcess;
let nsA: Namespace;
let nsB: Namespace;
const dirs: string[] = [];

/** Every packet A or B sends on the link is dropped (`cut`), or none is. */
function setLink(state: 'cut' | 'up'): void {
  for (const [ns, dev] of [[nsA, 'v1a'], [nsB, 'v1b']] as const) {
    ns.run('iptables', [state === 'cut' ? '-A' : '-D', 'OUTPUT', '-o', dev, '-j', 'DROP']);
  }
}

/** Resolves when A's output matches. */
function output(host: HearthProcess, pattern: RegExp): Promise<void> {
  return new Promise((resolve) => {
    if (pattern.test(host.output())) return resolve();
    const check = () => pattern.test(host.output()) && (host.child.stdout!.off('data', check), host.child.stderr!.off('data', check), resolve());
    host.child.stdout!.on('data', check);
    host.child.stderr!.on('data', check);
  });
}

beforeAll(async () => {
  assertNetworkNamespaces('The reconnect test');
  lab = createLab();
  nsA = lab.namespace('ra');
  nsB = lab.namespace('rb');
  lab.link(nsA, '10.242.0.1/24', nsB, '10.242.0.2/24');
  // The test's clients reach each host over a link of their own, never cut.
  lab.link('host', '10.243.1.1/30', nsA, '10.243.1.2/30');
  lab.link('host', '10.243.2.1/30', nsB, '10.243.2.2/30');
  const start = async (ns: Namespace, host: string, listen: string, bootstrap: string[]) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'hearth-reconnect-'));
    dirs.push(dataDir);
    return spawnHearth({ dataDir, netns: ns, listen: [listen], bootstrap, args: ['--host', host], env: { HEARTH_FEDERATION_TIMEOUT_MS: '600000' } });
  };
  a = await start(nsA, '10.243.1.2', '/ip4/10.242.0.1/tcp/4001', []);
  b = await start(nsB, '10.243.2.2', '/ip4/10.242.0.2/tcp/4001', a.multiaddrs);
});

afterAll(async () => {
  await a?.stop();
  await b?.stop();
  lab?.close();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe('a link that goes silent and comes back', () => {
  it('closes the stalled connection, dials again, and flushes the queue over the new connection once the link is back, each message once and in order', async () => {
    const alice = await register((...args) => call(a, ...args), 'alice');
    const bob = await register((...args) => call(b, ...args), 'bob');
    const roomId: string = (await call(a, 'POST', '/_matrix/client/v3/createRoom', alice.token, { preset: 'public_chat' })).room_id;
    await call(b, 'POST', `/_matrix/client/v3/join/${enc(roomId)}?via=${a.serverName}`, bob.token, {});
    const send = (i: number) => call(a, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/m${i}`, alice.token, { msgtype: 'm.text', body: `message ${i}` });
    await send(0);
    const syncer = httpSyncer(b, bob.token);
    const bodiesIn = (body: { rooms?: any }) => (body.rooms?.join?.[roomId]?.timeline?.events ?? []).filter((e: any) => e.type === 'm.room.message').map((e: any) => e.content.body as string);
    let since = (await longPollUntil(syncer, (body) => bodiesIn(body).includes('message 0'))).next_batch;

    setLink('cut');
    for (let i = 1; i <= 5; i++) await send(i);
    // A finds the connection stalled while the link is still out, closes it, and keeps dialling.
    await output(a, /no answer from \S+ over \/ip4\/10\.242\.0\.2\/.* closing that connection and dialling again/);
    setLink('up');

    const seen: string[] = [];
    while (seen.length < 5) {
      const body = await longPollUntil(syncer, (r) => bodiesIn(r).length > 0, { since });
      since = body.next_batch;
      seen.push(...bodiesIn(body));
    }
    expect(seen).toEqual(['message 1', 'message 2', 'message 3', 'message 4', 'message 5']);
  });
});
