// Real homeservers (createHomeserver, in-memory sql.js) federating in one process
// through InProcessNetwork, driven through their client API as Request → Response.
// Every server-server exchange is recorded, so tests can say where something went
// and check what was answered against the spec.
import { createHomeserver, type Homeserver, type HomeserverOptions } from '../../src/homeserver.ts';
import type { FederationTransport } from '../../src/federation/transport.ts';
import { openTestDatabase } from './test-database.ts';
import { InProcessNetwork } from './in-process-federation.ts';
import { validateClientRequest, validateClientResponse } from './spec-schema.ts';
import { longPollUntil, syncPath, type Syncer } from './sync-until.ts';

/** One request a server sent to another, and the answer it got. */
export interface Exchange {
  destination: string;
  method: string;
  path: string;
  request: any;
  status: number;
  response: any;
}

export interface Account {
  userId: string;
  accessToken: string;
  deviceId: string;
}

export interface FederatedServer {
  homeserver: Homeserver;
  serverName: string;
  /** What this server sent to others, oldest first. */
  sent: Exchange[];
  /** A client-server call, checked against the spec unless `unchecked`. */
  api(method: string, path: string, options?: { token?: string; body?: unknown; unchecked?: boolean }): Promise<{ status: number; body: any }>;
  register(username: string): Promise<Account>;
}

const parse = (text: string): unknown => (text === '' ? undefined : JSON.parse(text));
/** A recorded body: JSON parsed, anything else (media's multipart/mixed) kept as text. */
const parseRecorded = (text: string): unknown => {
  try {
    return parse(text);
  } catch {
    return text;
  }
};

/** A transport that records each exchange before handing the answer back. */
function recording(inner: FederationTransport, sent: Exchange[]): FederationTransport {
  return {
    send: async (destination, request, options) => {
      const requestText = await request.clone().text();
      const response = await inner.send(destination, request, options);
      const url = new URL(request.url);
      sent.push({ destination, method: request.method, path: url.pathname + url.search, request: parseRecorded(requestText), status: response.status, response: parseRecorded(await response.clone().text()) });
      return response;
    },
  };
}

/** Homeservers that can reach each other; close them with the returned `close`. */
export async function federatedServers(count: number, options: Partial<Omit<HomeserverOptions, 'database' | 'seed' | 'federation'>> = {}): Promise<{ servers: FederatedServer[]; network: InProcessNetwork; close(): Promise<void> }> {
  const network = new InProcessNetwork();
  const servers: FederatedServer[] = [];
  const cleanups: Array<() => Promise<void>> = [];
  for (let i = 0; i < count; i++) {
    const { database, cleanup } = await openTestDatabase();
    cleanups.push(cleanup);
    const sent: Exchange[] = [];
    let name = '';
    const homeserver = await createHomeserver({
      database,
      seed: crypto.getRandomValues(new Uint8Array(32)),
      rateLimits: false,
      federationRateLimits: false,
      passwordIterations: 1000,
      log: (message, error) => console.error(message, error),
      ...options,
      federation: { transport: recording(network.transportFor(() => name), sent), backoff: { initialMs: 20, maxMs: 100, refusedMs: 50 } },
    });
    name = homeserver.serverName;
    network.add(homeserver);
    await homeserver.start();
    const api: FederatedServer['api'] = async (method, path, options = {}) => {
      if (!options.unchecked && options.body !== undefined) validateClientRequest(method, path, options.body);
      const headers: Record<string, string> = {};
      if (options.token) headers['authorization'] = `Bearer ${options.token}`;
      if (options.body !== undefined) headers['content-type'] = 'application/json';
      const response = await homeserver.fetch(new Request(`http://hearth.test${path}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) }));
      const body = parse(await response.text());
      if (!options.unchecked) validateClientResponse(method, path, response.status, body);
      return { status: response.status, body };
    };
    const register = async (username: string): Promise<Account> => {
      const { status, body } = await api('POST', '/_matrix/client/v3/register', { body: { username, password: 'correct horse battery staple', auth: { type: 'm.login.dummy' } } });
      if (status !== 200) throw new Error(`register ${username}: ${status} ${JSON.stringify(body)}`);
      return { userId: body.user_id, accessToken: body.access_token, deviceId: body.device_id };
    };
    servers.push({ homeserver, serverName: name, sent, api, register });
  }
  return {
    servers,
    network,
    close: async () => {
      await Promise.all(servers.map((s) => s.homeserver.close()));
      await Promise.all(cleanups.map((cleanup) => cleanup()));
    },
  };
}

/** Three servers, each with one user: alice on A, bob on B, carol on C. */
export interface ThreeServers {
  a: FederatedServer;
  b: FederatedServer;
  c: FederatedServer;
  alice: Account;
  bob: Account;
  carol: Account;
  network: InProcessNetwork;
  close(): Promise<void>;
}

/** The set-up of tests about who hears what: three servers, a user on each (no room yet). */
export async function threeServers(options: Parameters<typeof federatedServers>[1] = {}): Promise<ThreeServers> {
  const { servers, network, close } = await federatedServers(3, options);
  const [a, b, c] = servers as [FederatedServer, FederatedServer, FederatedServer];
  const [alice, bob, carol] = await Promise.all([a.register('alice'), b.register('bob'), c.register('carol')]);
  return { a, b, c, alice, bob, carol, network, close };
}

const enc = encodeURIComponent;

/** A room `owner` creates, which each guest (a user of another server) is invited to and joins. */
export async function sharedRoom(owner: FederatedServer, ownerAccount: Account, guests: [FederatedServer, Account][]): Promise<string> {
  const { body: created } = await owner.api('POST', '/_matrix/client/v3/createRoom', { token: ownerAccount.accessToken, body: {} });
  const roomId = created.room_id as string;
  for (const [server, account] of guests) {
    const invite = await owner.api('POST', `/_matrix/client/v3/rooms/${enc(roomId)}/invite`, { token: ownerAccount.accessToken, body: { user_id: account.userId } });
    if (invite.status !== 200) throw new Error(`invite: ${invite.status} ${JSON.stringify(invite.body)}`);
    const join = await server.api('POST', `/_matrix/client/v3/join/${enc(roomId)}`, { token: account.accessToken, body: {} });
    if (join.status !== 200) throw new Error(`join: ${join.status} ${JSON.stringify(join.body)}`);
  }
  // The owner's server must know of every join before its local users' EDUs can reach the guests.
  for (const [, account] of guests) await until(async () => (await owner.homeserver.services.rooms.membership(roomId, account.userId)) === 'join');
  return roomId;
}

/** Long-polls /sync until `predicate` holds for a response; returns that response. By default 20 polls of up to 500 ms. */
export function syncUntil(server: FederatedServer, account: Account, predicate: (body: any) => boolean, since?: string, options: { rounds?: number; pollMs?: number } = {}): Promise<any> {
  const sync: Syncer = async (from) => (await server.api('GET', syncPath(from, options.pollMs ?? 500), { token: account.accessToken })).body;
  return longPollUntil(sync, predicate, { since, rounds: options.rounds ?? 20, who: `${account.userId}'s (on ${server.serverName.slice(0, 8)})` });
}

/** Waits for a condition that background work (queues, notifiers) makes true. */
export async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error('condition never held');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
