/**
 * What the tests of Hearth against another implementation share (test/interop/): one DNS-named
 * Hearth host and one remote server (Synapse, Dendrite), each `localhost:P` on loopback and
 * federating over HTTPS under the test's own CA, the people a test registers on each, matrix-js-sdk
 * clients that the file's afterAll stops, and the few client calls every such test makes.
 * `remoteAndHearth(start)` registers the hooks; a file calls it once at its top level
 * (`synapseAndHearth()` in synapse-interop.ts for Synapse).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import { api, register, type Account } from '../integration/harness.ts';
import { sdk, startClient, waitFor } from '../integration/sdk.ts';
import { stopAllHearths } from './hearth-process.ts';
import { createTestTls, spawnHttpsHearth, type HttpsHearth, type TestTls } from './https-hosts.ts';
import { restartablePort } from './ports.ts';
import { stopAllRemoteServers, type RemoteServer } from './remote-server.ts';

const traceFile = (tls: TestTls) => join(tls.dir, 'hearth-federation.jsonl');

export const PASSWORD = 'correct horse battery staple';

/** A server a test talks to as a client: its name, its HTTPS URL and a fetch that trusts the test's CA. */
export type InteropServer = { name: string; url: string; fetch: typeof fetch };

/** One side of the federation: its server, and a person there with a running client. */
export interface Side {
  label: string;
  server: InteropServer;
  account: Account;
  client: sdk.MatrixClient;
}

export interface RemoteAndHearth<Remote extends RemoteServer = RemoteServer> {
  tls: TestTls;
  remote: Remote;
  hearth: HttpsHearth;
  /** The first person of each server (`remoteUsers[0]`, `hearthUsers[0]`) with a client without crypto. */
  onRemote: Side;
  onHearth: Side;
  /** A matrix-js-sdk client for an account (Rust crypto in memory with `crypto`; its requests through `fetchFn` if given), stopped after the file. */
  client(server: InteropServer, account: Account, crypto?: boolean, fetchFn?: typeof fetch): Promise<sdk.MatrixClient>;
  /** What other servers asked of Hearth (with `traceHearthFederation`): one entry per exchange, oldest first. */
  hearthTrace(): Promise<Array<{ origin?: string; method: string; path: string; status: number; request?: any; response?: any }>>;
  /** With `restartable`: stops Hearth (SIGTERM), keeping its data folder and port. */
  haltHearth(): Promise<void>;
  /** With `restartable`: starts Hearth again on the same data, name and port (`hearth` is the same object, now the new process). */
  resumeHearth(): Promise<void>;
  /** A new session (device) of a registered person. */
  login(server: InteropServer, username: string): Promise<Account>;
  /** Registers a person with the shared password. */
  register(server: InteropServer, username: string): Promise<Account>;
  /** Registers a person on a server and starts their client (without crypto): one more Side. */
  person(server: InteropServer, username: string): Promise<Side>;
}

export interface RemoteAndHearthOptions {
  /** Who is registered on each before the tests (default `sam` and `hana`); the first has a client on `onRemote`/`onHearth`. */
  remoteUsers?: string[];
  hearthUsers?: string[];
  /** Hearth appends every inbound server-server exchange to a file (HEARTH_TRACE_FEDERATION), which `hearthTrace()` reads. */
  traceHearthFederation?: boolean;
  /** Ports below the ephemeral range, so that a test may stop a server and start it again at the same name. */
  restartable?: boolean;
}

/**
 * Starts the remote server (`start`, given the test's TLS and, with `restartable`, the port to take)
 * and a Hearth host before the file's tests and stops them after, registers the people named, and
 * prints both servers' logs for a failing test. The answer is filled in once beforeAll has run.
 */
export function remoteAndHearth<Remote extends RemoteServer>(start: (tls: TestTls, port?: number) => Promise<Remote>, options: RemoteAndHearthOptions = {}): RemoteAndHearth<Remote> {
  const clients: sdk.MatrixClient[] = [];
  const fixture = {
    client: async (server: InteropServer, account: Account, crypto = false, fetchFn = server.fetch) => {
      const c = await startClient(server.url, account, { fetchFn, crypto });
      clients.push(c);
      return c;
    },
    login,
    hearthTrace: async () => {
      const text = await readFile(traceFile(fixture.tls), 'utf8').catch(() => '');
      return text.split('\n').filter(Boolean).map((line) => JSON.parse(line));
    },
    register: (server: InteropServer, username: string) => register(server, username, PASSWORD),
    person: async (server: InteropServer, username: string) => {
      const account = await register(server, username, PASSWORD);
      return { label: `${username} on ${server === fixture.remote ? fixture.remote.label : 'Hearth'}`, server, account, client: await fixture.client(server, account) };
    },
  } as RemoteAndHearth<Remote>;

  /** With `restartable`, Hearth's data folder, which outlives each of its processes. */
  let hearthData: string | undefined;
  let hearthOptions: Parameters<typeof spawnHttpsHearth>[1];

  fixture.haltHearth = async () => {
    if (!hearthData) throw new Error('haltHearth needs the fixture made with { restartable: true }');
    await fixture.hearth.close();
  };
  fixture.resumeHearth = async () => {
    const { process, close } = await spawnHttpsHearth(fixture.tls, hearthOptions);
    Object.assign(fixture.hearth, { process, close });
  };

  beforeAll(async () => {
    const tls = await createTestTls();
    const [remotePort, hearthPort] = options.restartable ? [await restartablePort(), await restartablePort()] : [undefined, undefined];
    if (options.restartable) hearthData = await mkdtemp(join(tmpdir(), 'hearth-https-'));
    hearthOptions = {
      ...(hearthPort ? { port: hearthPort } : {}),
      ...(hearthData ? { dataDir: hearthData } : {}),
      ...(options.traceHearthFederation ? { env: { HEARTH_TRACE_FEDERATION: traceFile(tls) } } : {}),
    };
    const [remote, hearth] = await Promise.all([start(tls, remotePort), spawnHttpsHearth(tls, hearthOptions)]);
    Object.assign(fixture, { tls, remote, hearth });
    const remoteUsers = options.remoteUsers ?? ['sam'];
    const hearthUsers = options.hearthUsers ?? ['hana'];
    const accounts = await Promise.all([...remoteUsers.map((u) => fixture.register(remote, u)), ...hearthUsers.map((u) => fixture.register(hearth, u))]);
    const [sam, hana] = [accounts[0]!, accounts[remoteUsers.length]!];
    fixture.onRemote = { label: remote.label, server: remote, account: sam, client: await fixture.client(remote, sam) };
    fixture.onHearth = { label: 'Hearth', server: hearth, account: hana, client: await fixture.client(hearth, hana) };
  });

  // A failing test shows what each server logged while it ran.
  beforeEach(({ onTestFailed }) => {
    const from = { remote: fixture.remote.log().length, hearth: fixture.hearth.process.output().length };
    onTestFailed(() => {
      console.log(`--- ${fixture.remote.label}'s log during the test (last 200 lines):\n${fixture.remote.log().slice(from.remote).split('\n').slice(-200).join('\n')}`);
      console.log(`--- Hearth's output during the test (last 200 lines):\n${fixture.hearth.process.output().slice(from.hearth).split('\n').slice(-200).join('\n')}`);
    });
  });

  afterAll(async () => {
    for (const c of clients.splice(0)) c.stopClient();
    await stopAllRemoteServers();
    await fixture.hearth?.close();
    await stopAllHearths();
    if (hearthData) await rm(hearthData, { recursive: true, force: true, maxRetries: 5 });
    await fixture.tls?.dispose();
  });

  return fixture;
}

/** A new session (device) of a person registered with the shared password. */
export async function login(server: InteropServer, username: string): Promise<Account> {
  const r = await api(server, 'POST', '/_matrix/client/v3/login', { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: username }, password: PASSWORD } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return { userId: r.body.user_id, accessToken: r.body.access_token, deviceId: r.body.device_id };
}

/** The bodies of the plain messages in a client's live timeline of a room. */
export const bodies = (c: sdk.MatrixClient, roomId: string): string[] =>
  c.getRoom(roomId)?.getLiveTimeline().getEvents().filter((e) => e.getType() === 'm.room.message').map((e) => e.getContent()['body'] as string) ?? [];

/** A member's membership in a room as a client sees it. */
export const membership = (c: sdk.MatrixClient, roomId: string, userId: string): string | undefined => c.getRoom(roomId)?.getMember(userId)?.membership;

let txn = 0;
/** Sends an event of any shape as `account`, through the client API; its ID. */
export async function sendEvent(server: InteropServer, account: Account, roomId: string, type: string, content: Record<string, unknown>): Promise<string> {
  const r = await api(server, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/${type}/t${Date.now()}-${++txn}`, { token: account.accessToken, body: content, unchecked: true });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.event_id;
}

/** Sends an event as `side`'s person; its ID. */
export const send = (side: Side, roomId: string, type: string, content: Record<string, unknown>): Promise<string> => sendEvent(side.server, side.account, roomId, type, content);

/** A message from `from` reaches `to`'s /sync in the room. */
export async function messageCrosses(from: Side, to: Side, roomId: string, text: string): Promise<void> {
  await from.client.sendTextMessage(roomId, text);
  await waitFor(to.client, () => bodies(to.client, roomId).includes(text), 15_000, `"${text}" on ${to.label}`);
}

/** A room made by `creator` (with `options`) that `joiner` has joined through the creator's server, the join seen by both; its ID. */
export async function sharedRoom(creator: Side, joiner: Side, options: Partial<sdk.ICreateRoomOpts> = {}): Promise<string> {
  const { room_id: roomId } = await creator.client.createRoom({ preset: sdk.Preset.PublicChat, ...options });
  await joiner.client.joinRoom(roomId, { viaServers: [creator.server.name] });
  await waitFor(creator.client, () => membership(creator.client, roomId, joiner.account.userId) === 'join', 15_000, `${joiner.account.userId}'s join on ${creator.label}`);
  await waitFor(joiner.client, () => joiner.client.getRoom(roomId)?.getMyMembership() === 'join', 15_000, `the joined room on ${joiner.label}`);
  return roomId;
}

/** GET a room's state event on a server, as `account` sees it: status and content. */
export async function stateOn(server: InteropServer, account: Account, roomId: string, type: string, stateKey = ''): Promise<{ status: number; body: any }> {
  return api(server, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/state/${type}/${encodeURIComponent(stateKey)}`, { token: account.accessToken, unchecked: true });
}

/** GET one event of a room on a server, as `account` sees it. */
export async function eventOn(server: InteropServer, account: Account, roomId: string, eventId: string): Promise<{ status: number; body: any }> {
  return api(server, 'GET', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/event/${encodeURIComponent(eventId)}`, { token: account.accessToken, unchecked: true });
}

/** PUT a state event as `side`'s person; its ID. */
export async function putState(side: Side, roomId: string, type: string, content: Record<string, unknown>, stateKey = ''): Promise<string> {
  const r = await api(side.server, 'PUT', `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/state/${type}/${encodeURIComponent(stateKey)}`, { token: side.account.accessToken, body: content, unchecked: true });
  expect(r.status, `${side.label}: ${JSON.stringify(r.body)}`).toBe(200);
  return r.body.event_id;
}

/**
 * Asks until the answer satisfies `ok`, for views a server (Synapse) updates in the background after the
 * event that changes them (the room stats behind /publicRooms, the user directory): there is no
 * event of theirs to wait on, so the question is asked again, at most `tries` times, each
 * answered before the next is asked.
 */
export async function askUntil<T>(ask: () => Promise<T>, ok: (answer: T) => boolean, what: string, tries = 500): Promise<T> {
  let answer = await ask();
  for (let i = 1; i < tries && !ok(answer); i++) answer = await ask();
  if (!ok(answer)) throw new Error(`${what}: never came; last answer ${JSON.stringify(answer).slice(0, 300)}`);
  return answer;
}
