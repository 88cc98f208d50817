import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { federatedServers, until, type FederatedServer } from '../../test/support/federated-homeservers.ts';

let servers: Awaited<ReturnType<typeof federatedServers>>;
let a: FederatedServer;
let b: FederatedServer;

beforeAll(async () => {
  servers = await federatedServers(2);
  [a, b] = servers.servers as [FederatedServer, FederatedServer];
});
afterAll(() => servers.close());

const transactionIds = () => a.sent.filter((e) => e.path.startsWith('/_matrix/federation/v1/send/')).map((e) => e.path.split('/').at(-1));

describe('outgoing queues', () => {
  it('never reuse a transaction ID once the outbox has drained: the receiver would drop the new one as a repeat', async () => {
    const { federation } = a.homeserver;
    for (const n of [1, 2, 3]) {
      await federation.component.sendEdus([b.serverName], [{ edu_type: 'org.example.test', content: { n } }]);
      await until(async () => (await federation.component.queues.pending(b.serverName)) === 0 && transactionIds().length === n);
    }
    expect(new Set(transactionIds()).size).toBe(3);
  });

  it('keeps ephemeral EDUs in memory while a server is unreachable, the latest per key, and sends them under IDs of their own', async () => {
    const { queues } = a.homeserver.federation.component;
    const before = a.sent.length;
    servers.network.down.add(b.serverName);
    queues.sendEphemeral([b.serverName], 'typing', { edu_type: 'org.example.notice', content: { n: 1 } });
    queues.sendEphemeral([b.serverName], 'presence', { edu_type: 'org.example.notice', content: { n: 0 } });
    // The attempt fails and both wait again (waited for, not slept on: under load 10 ms was not always enough,
    // and an attempt that reached the network only after it came back sent them in a transaction of their own).
    const state = () => (queues as unknown as { destinations: Map<string, { failures: number; running: boolean }> }).destinations.get(b.serverName);
    await until(() => (state()?.failures ?? 0) > 0 && !state()!.running);
    queues.sendEphemeral([b.serverName], 'typing', { edu_type: 'org.example.notice', content: { n: 2 } });
    servers.network.down.delete(b.serverName);
    queues.wake(b.serverName);
    await until(() => a.sent.length > before);
    const sent = a.sent.slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.path).toMatch(/\/send\/e\d+-\d+$/);
    expect(sent[0]!.request.edus.map((e: { content: { n: number } }) => e.content.n)).toEqual([0, 2]);
  });
});

describe('a wake while a send is failing', () => {
  it('retries at once when the peer connected during the attempt, instead of backing off', async () => {
    const { createHomeserver, homeserverSchemas } = await import('../homeserver.ts');
    const { openSqlJsDatabase } = await import('../storage/sqljs-database.ts');
    const { FederationUnreachable } = await import('./transport.ts');
    const initSqlJs = (await import('sql.js')).default;
    const destination = 'b'.repeat(64);
    const attempts: { fail(): void }[] = [];
    const homeserver = await createHomeserver({
      database: await openSqlJsDatabase({ sqlJs: await initSqlJs(), schemas: homeserverSchemas }),
      seed: crypto.getRandomValues(new Uint8Array(32)),
      rateLimits: false,
      // Without the fix the retry would wait a minute.
      federation: {
        backoff: { initialMs: 60_000, maxMs: 60_000, refusedMs: 60_000 },
        transport: {
          send: (to) =>
            new Promise<Response>((resolve, reject) => {
              if (attempts.length === 0) {
                // The first attempt is a dial that fails, but only after the peer has connected.
                attempts.push({ fail: () => reject(new FederationUnreachable(to, 'the dial began before the connection was up')) });
              } else {
                attempts.push({ fail: () => {} });
                resolve(Response.json({ pdus: {} }));
              }
            }),
        },
      },
    });
    try {
      await homeserver.start();
      const attempt = (n: number) => until(() => attempts.length >= n);
      await homeserver.federation.component.sendEdus([destination], [{ edu_type: 'org.example.test', content: {} }]);
      await attempt(1);
      homeserver.federation.peerConnected(destination);
      attempts[0]!.fail();
      await attempt(2);
      await until(async () => (await homeserver.federation.component.queues.pending(destination)) === 0);
    } finally {
      await homeserver.close();
    }
  });
});
