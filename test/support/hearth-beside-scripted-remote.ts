/**
 * The set-up the tests that hold Hearth to the scripted remote (scripted-remote.ts) share: a test
 * CA, one DNS-named Hearth host over real HTTPS for the file, and for each test a remote of its own
 * beside it and a new account on Hearth. A file calls `hearthBesideScriptedRemote()` once at its
 * top level, which registers the hooks; the answer's parts are those of the running test, so a
 * file binds them in a `beforeEach` of its own after the call (vitest runs before-hooks in order).
 *
 * Hearth runs in the test's process (`startNodePeer`, as `npm run serve -- --server-name localhost:P
 * --tls-cert … --tls-key …` would), not in a process of its own: no case stops or restarts it, so
 * a process would only cost its start. Its log goes to the console, which vitest shows for a
 * failing test alone.
 */
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { register, type Account } from '../integration/harness.ts';
import { createTestTls, type TestTls } from './https-hosts.ts';
import { freePort, startNodePeer, type NodePeer } from './node-peer.ts';
import { startScriptedRemote, type ScriptedRemote } from './scripted-remote.ts';

/** A server as a test reaches it: its name (`localhost:P`), its HTTPS URL, and a fetch that trusts the test's CA. */
export interface HttpsServer {
  name: string;
  url: string;
  fetch: typeof fetch;
}

export interface HearthBesideScriptedRemote {
  hearth: HttpsServer;
  /** This test's remote: a new one for each test, so no test sees another's rooms, scripted answers, keys or backoff. */
  remote: ScriptedRemote;
  /** A new account on Hearth for each test, `alice<testNumber>`, with the harness's password. */
  alice: Account;
  /** `@bob:` the remote's name: its user most cases speak as. */
  bob: string;
  /** The test's number in the file (1, 2…): other accounts a test registers take it into their names, as alice does. */
  testNumber: number;
  /** Closes this test's remote and starts another in its place, with `options` (`{ host: '127.0.0.1' }`: named by its IP literal). */
  replaceRemote(options: Parameters<typeof startScriptedRemote>[1]): Promise<ScriptedRemote>;
}

export function hearthBesideScriptedRemote(): HearthBesideScriptedRemote {
  let tls: TestTls | undefined;
  let host: NodePeer | undefined;
  const fixture = {
    testNumber: 0,
    replaceRemote: async (options) => {
      await fixture.remote.close();
      fixture.remote = await startScriptedRemote(tls!, options);
      fixture.bob = `@bob:${fixture.remote.name}`;
      return fixture.remote;
    },
  } as HearthBesideScriptedRemote;

  beforeAll(async () => {
    tls = await createTestTls();
    // Its server name names its port, so the port is chosen first.
    const port = await freePort();
    host = await startNodePeer({
      port,
      listen: [],
      serverName: `localhost:${port}`,
      tls: tls.leaf,
      https: { extraCa: [tls.ca.cert] },
      log: (message, error) => console.error(message, error ?? ''),
    });
    fixture.hearth = { name: host.homeserver.serverName, url: host.url, fetch: tls.fetch };
  });

  afterAll(async () => {
    await host?.close();
    await tls?.dispose();
  });

  beforeEach(async () => {
    fixture.remote = await startScriptedRemote(tls!);
    fixture.alice = await register(fixture.hearth, `alice${++fixture.testNumber}`);
    fixture.bob = `@bob:${fixture.remote.name}`;
  });

  afterEach(async () => {
    await fixture.remote?.close();
  });

  return fixture;
}
