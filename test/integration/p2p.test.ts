import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { tcp } from '@libp2p/tcp';
import { FsDatastore } from 'datastore-fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FederationUnreachable } from '../../src/federation/transport.ts';
import type { InboundFederationHandler } from '../../src/p2p/http.ts';
import { serverNameFromPeerId } from '../../src/p2p/identity.ts';
import { createP2PNode, type P2PNode, type P2PNodeOptions } from '../../src/p2p/node.ts';

// Real libp2p nodes over TCP on 127.0.0.1, each with its own data folder.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Events remembered by key, so a wait that starts after the event still resolves. */
class Seen {
  private readonly fired = new Set<string>();
  private readonly waiting = new Map<string, (() => void)[]>();
  fire(key: string): void {
    this.fired.add(key);
    for (const resolve of this.waiting.get(key) ?? []) resolve();
    this.waiting.delete(key);
  }
  wait(key: string): Promise<void> {
    if (this.fired.has(key)) return Promise.resolve();
    return new Promise((resolve) => this.waiting.set(key, [...(this.waiting.get(key) ?? []), resolve]));
  }
}

interface TestNode extends P2PNode {
  dir: string;
  seed: Uint8Array;
  connected: Seen;
  disconnected: Seen;
  discovered: Seen;
}

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'hearth-p2p-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Answers with what it was asked, and by whom. */
const echo: InboundFederationHandler = async (request, remoteServerName) => {
  const url = new URL(request.url);
  return Response.json({
    from: remoteServerName,
    method: request.method,
    path: url.pathname,
    query: url.search,
    contentType: request.headers.get('content-type'),
    authorization: request.headers.get('authorization'),
    body: request.method === 'GET' ? null : await request.json(),
  });
};

async function startNode(options: Partial<P2PNodeOptions> & { dir?: string } = {}): Promise<TestNode> {
  const dir = options.dir ?? (await tempDir());
  const seed = options.seed ?? crypto.getRandomValues(new Uint8Array(32));
  const datastore = new FsDatastore(join(dir, 'peers'));
  await datastore.open();
  const connected = new Seen();
  const disconnected = new Seen();
  const discovered = new Seen();
  const node = await createP2PNode({
    seed,
    transports: [tcp()],
    listen: ['/ip4/127.0.0.1/tcp/0'],
    datastore,
    handler: echo,
    inboundConnectionThreshold: Infinity,
    onPeerConnected: (name) => connected.fire(name),
    onPeerDisconnected: (name) => disconnected.fire(name),
    onPeerDiscovered: (name) => discovered.fire(name),
    ...options,
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await node.stop();
    await datastore.close();
  };
  cleanups.push(stop);
  return Object.assign(Object.create(node) as P2PNode, node, { dir, seed, connected, disconnected, discovered, stop });
}

async function connectedPair(serverOptions: Partial<P2PNodeOptions> = {}, clientOptions: Partial<P2PNodeOptions> = {}): Promise<[TestNode, TestNode]> {
  const server = await startNode(serverOptions);
  const client = await startNode(clientOptions);
  await client.dial(server.multiaddrs()[0]!);
  return [client, server];
}

const json = (method: string, path: string, body?: unknown) =>
  new Request(`http://ignored${path}`, {
    method,
    headers: { 'content-type': 'application/json', authorization: 'X-Matrix origin="a",destination="b",key="ed25519:hearth",sig="x"' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

describe('federation over libp2p', () => {
  it('carries a request and its JSON response, and the handler learns the sender from the connection', async () => {
    const [a, b] = await connectedPair();
    const response = await a.transport.send(b.serverName, json('PUT', '/_matrix/federation/v1/send/txn1?limit=10&v=%24e', { pdus: [], edus: [{ edu_type: 'm.typing', content: { ü: 'ß' } }] }));
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/application\/json/);
    expect(await response.json()).toEqual({
      from: a.serverName,
      method: 'PUT',
      path: '/_matrix/federation/v1/send/txn1',
      query: '?limit=10&v=%24e',
      contentType: 'application/json',
      authorization: 'X-Matrix origin="a",destination="b",key="ed25519:hearth",sig="x"',
      body: { pdus: [], edus: [{ edu_type: 'm.typing', content: { ü: 'ß' } }] },
    });
    // And the other way, on the same connection.
    const back = await b.transport.send(a.serverName, json('GET', '/_matrix/federation/v1/version'));
    expect((await back.json()).from).toBe(b.serverName);
  });

  it('rejects with FederationUnreachable for a server it has no address for, or that is not a Hearth name', async () => {
    const a = await startNode();
    const stranger = serverNameFromPeerId(peerIdFromPrivateKey(await generateKeyPair('Ed25519')))!;
    await expect(a.transport.send(stranger, json('GET', '/_matrix/federation/v1/version'))).rejects.toBeInstanceOf(FederationUnreachable);
    await expect(a.transport.send('matrix.org', json('GET', '/_matrix/federation/v1/version'))).rejects.toBeInstanceOf(FederationUnreachable);
  });

  it('refuses an oversized request with 413 before the handler sees any of it', async () => {
    let calls = 0;
    const [a, b] = await connectedPair({ limits: { maxRequestBytes: 1024 }, handler: async (request, from) => (calls++, echo(request, from)) });
    const response = await a.transport.send(b.serverName, json('PUT', '/_matrix/federation/v1/send/big', { filler: 'x'.repeat(64 * 1024) }));
    expect(response.status).toBe(413);
    expect((await response.json()).errcode).toBe('M_TOO_LARGE');
    expect(calls).toBe(0);
    // The stream is spent, the connection is not.
    expect((await a.transport.send(b.serverName, json('PUT', '/_matrix/federation/v1/send/small', { ok: true }))).status).toBe(200);
    expect(calls).toBe(1);
  });

  it('rejects an oversized response on the client side', async () => {
    const [a, b] = await connectedPair(
      { handler: async () => Response.json({ filler: 'x'.repeat(64 * 1024) }) },
      { limits: { maxResponseBytes: 1024 } },
    );
    await expect(a.transport.send(b.serverName, json('GET', '/_matrix/federation/v1/state/x'))).rejects.toThrow(/exceeds 1024/);
  });

  it('carries a response of a few MiB whole (a join\'s state, a backfill)', async () => {
    const filler = 'x'.repeat(3 * 1024 * 1024);
    const [a, b] = await connectedPair({ handler: async () => Response.json({ filler }) }, {});
    const response = await a.transport.send(b.serverName, json('GET', '/_matrix/federation/v1/state/x'));
    expect(response.status).toBe(200);
    expect(((await response.json()) as { filler: string }).filler.length).toBe(filler.length);
  });

  it('gives up after its timeout, and honours the caller’s AbortSignal', async () => {
    let release = () => {};
    const never = new Promise<Response>((resolve) => (release = () => resolve(new Response(null, { status: 204 }))));
    cleanups.push(async () => release());
    const [a, b] = await connectedPair({ handler: () => never }, { limits: { timeoutMs: 300 } });
    await expect(a.transport.send(b.serverName, json('GET', '/_matrix/federation/v1/slow'))).rejects.toMatchObject({ name: 'TimeoutError' });

    const controller = new AbortController();
    const sent = a.transport.send(b.serverName, json('GET', '/_matrix/federation/v1/slow'), { signal: controller.signal });
    controller.abort(new Error('the caller gave up'));
    await expect(sent).rejects.toThrow('the caller gave up');
  });
});

describe('discovery and reachability', () => {
  it('lets C, bootstrapped only to A, reach B by its server name alone', async () => {
    // A long announce interval: discovery must not wait for the periodic announce.
    const slow = { announceIntervalMs: 60_000 };
    const a = await startNode(slow);
    const b = await startNode({ ...slow, bootstrap: [a.multiaddrs()[0]!] });
    await b.connected.wait(a.serverName);

    const started = performance.now();
    const c = await startNode({ ...slow, bootstrap: [a.multiaddrs()[0]!] });
    await c.discovered.wait(b.serverName);
    const discoveredAfter = performance.now() - started;
    const response = await c.transport.send(b.serverName, json('POST', '/_matrix/federation/v1/user/keys/query', { device_keys: {} }));
    const reachedAfter = performance.now() - started;
    expect((await response.json()).from).toBe(c.serverName);
    expect(c.peers().map((p) => p.server_name).sort()).toEqual([a.serverName, b.serverName].sort());
    console.info(`C discovered B ${discoveredAfter.toFixed(0)} ms after starting, and had B's answer ${reachedAfter.toFixed(0)} ms after starting`);
  });

  it('redials, after a restart with no bootstrap, the peers its persisted peer store knows', async () => {
    const a = await startNode();
    const b = await startNode({ bootstrap: [a.multiaddrs()[0]!] });
    await b.connected.wait(a.serverName);
    await b.stop();
    await a.disconnected.wait(b.serverName);
    // A still has B's address, but nobody answers there now.
    await expect(a.transport.send(b.serverName, json('GET', '/_matrix/federation/v1/version'))).rejects.toBeInstanceOf(FederationUnreachable);

    const again = await startNode({ dir: b.dir, seed: b.seed });
    expect(again.serverName).toBe(b.serverName);
    await again.connected.wait(a.serverName);
    expect((await (await again.transport.send(a.serverName, json('GET', '/_matrix/federation/v1/version'))).json()).from).toBe(b.serverName);
  });
});
