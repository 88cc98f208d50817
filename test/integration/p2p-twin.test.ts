import { tcp } from '@libp2p/tcp';
import { multiaddr } from '@multiformats/multiaddr';
import { afterEach, describe, expect, it } from 'vitest';
import { FederationUnreachable } from '../../src/federation/transport.ts';
import { createP2PNode, type P2PNode, type P2PNodeOptions } from '../../src/p2p/node.ts';
import { INSTANCE_PROTOCOL, type TwinReport } from '../../src/p2p/twin.ts';

// Two copies of one homeserver online at once (a copy, not a move): a peer that sees both tells
// both, and each stops federating, saying why, until the other is gone (src/p2p/twin.ts).

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

const echo = async (request: Request, from: string) => Response.json({ from, path: new URL(request.url).pathname });

interface Watched extends P2PNode {
  /** Resolves with the next twin report (or undefined: the twin is gone). */
  nextTwin(): Promise<TwinReport | undefined>;
  twinEvents: (TwinReport | undefined)[];
}

async function node(options: Partial<P2PNodeOptions> = {}): Promise<Watched> {
  const twinEvents: (TwinReport | undefined)[] = [];
  let wake: (() => void) | undefined;
  const started = await createP2PNode({
    seed: crypto.getRandomValues(new Uint8Array(32)),
    transports: [tcp()],
    listen: ['/ip4/127.0.0.1/tcp/0'],
    handler: echo,
    inboundConnectionThreshold: Infinity,
    announceIntervalMs: 60_000,
    detectTwins: true,
    twinRecheckMs: 200,
    onTwin: (report) => (twinEvents.push(report), wake?.()),
    ...options,
  });
  let stopped = false;
  const stop = async () => void (!stopped && ((stopped = true), await started.stop()));
  stops.push(stop);
  const seen = { count: 0 };
  return Object.assign(Object.create(started) as P2PNode, started, {
    stop,
    twinEvents,
    nextTwin: async () => {
      const index = seen.count++;
      while (twinEvents.length <= index) await new Promise<void>((resolve) => (wake = resolve));
      return twinEvents[index];
    },
  }) as Watched;
}

const version = () => new Request('http://x/_matrix/federation/v1/version');

describe('the same identity online twice', () => {
  it('a peer that sees both copies tells both; neither federates until the other is gone', async () => {
    const witness = await node();
    const seed = crypto.getRandomValues(new Uint8Array(32));
    const first = await node({ seed });
    await first.dial(witness.multiaddrs()[0]!);
    expect((await first.transport.send(witness.serverName, version())).status).toBe(200);
    // One copy with two connections (it dialled twice) carries one nonce: no twin.
    await first.libp2p.dial(multiaddr(witness.multiaddrs()[0]!), { force: true });
    expect(first.libp2p.getConnections().length).toBe(2);
    expect((await first.transport.send(witness.serverName, version())).status).toBe(200);
    expect(first.twinEvents).toEqual([]);

    const second = await node({ seed });
    expect(second.serverName).toBe(first.serverName);
    await second.dial(witness.multiaddrs()[0]!);
    const [toSecond, toFirst] = await Promise.all([second.nextTwin(), first.nextTwin()]);
    expect(toSecond).toMatchObject({ witness: witness.peerId, address: expect.stringMatching(/^\/ip4\/127\.0\.0\.1\/tcp\/\d+/) });
    expect(toFirst).toMatchObject({ witness: witness.peerId });
    expect(first.status().twin).toEqual(toFirst);
    for (const copy of [first, second]) {
      const refused = await copy.transport.send(witness.serverName, version()).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(FederationUnreachable);
      expect((refused as Error).message).toMatch(/Another copy of this homeserver \(the same identity\) is online.*Move, don’t copy/);
    }

    // The second copy stops: the first asks again, hears the twin is gone, and federates again.
    await second.stop();
    expect(await first.nextTwin()).toBeUndefined();
    expect(first.status().twin).toBeUndefined();
    expect((await first.transport.send(witness.serverName, version())).status).toBe(200);
  }, 60_000);

  it('a stopped copy’s lingering connection beside its successor’s is no twin: the witness asks it first, and no one answers', async () => {
    const said: string[] = [];
    let heard: (() => void) | undefined;
    const witness = await node({ log: (message) => (said.push(message), heard?.()) });
    const seed = crypto.getRandomValues(new Uint8Array(32));
    const old = await node({ seed });
    await old.dial(witness.multiaddrs()[0]!);
    expect((await old.transport.send(witness.serverName, version())).status).toBe(200);
    // As a reloaded tab's node: gone, though the witness still holds its connection (here: the node no longer answers on it).
    await old.libp2p.unhandle(INSTANCE_PROTOCOL);
    const next = await node({ seed });
    await next.dial(witness.multiaddrs()[0]!);
    while (!said.some((line) => line.includes('did not answer'))) await new Promise<void>((resolve) => (heard = resolve));
    expect(said.join('\n')).not.toMatch(/two copies/);
    expect(next.twinEvents).toEqual([]);
    expect(next.status().twin).toBeUndefined();
    expect((await next.transport.send(witness.serverName, version())).status).toBe(200);
  }, 60_000);
});
