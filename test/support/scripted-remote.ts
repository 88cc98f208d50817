// A homeserver of the test's own, not Hearth: a few hundred lines that speak the server-server
// API over real HTTPS under a name of their own (`localhost:PORT`), sign their requests and
// events with a key of their own, and answer each request as the test scripts it. Two Hearths
// agree with each other, so what crosses servers is also checked against this remote, which
// can do what a well-behaved Hearth never does: an update with a gap, a device with empty keys,
// a server that is down for one endpoint, an answer held back.
//
// It keeps rooms as simply as a server may when it is the only writer besides one peer: events
// in arrival order, the state as a map, no state resolution. That is enough to host a room,
// join one of Hearth's, send and receive its events, and let Hearth leave and join again. A test
// may also build events on any prev and auth events it likes, hold some back (the remote serves
// them, but Hearth is not sent them), and answer Hearth's fetches (/event, /state_ids, /state,
// /event_auth, /get_missing_events, /backfill) from what the remote holds, or as it scripts.
import { createServer as createHttpsServer } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { defaultEd25519Backend } from '../../src/crypto/ed25519.ts';
import { signJson } from '../../src/crypto/signing.ts';
import { webRandomBytes } from '../../src/crypto/random.ts';
import { computeEventId, referenceIds, signNewEvent, type PDU } from '../../src/events/pdu.ts';
import { redactEvent } from '../../src/events/redaction.ts';
import { requireRoomVersion, ROOM_VERSIONS } from '../../src/events/room-versions.ts';
import { FederationClient } from '../../src/federation/client.ts';
import { memorySigningKeyStorage, ServerSigningKeys } from '../../src/federation/signing-keys.ts';
import { authorizationHeader } from '../../src/federation/x-matrix.ts';
import { createHttpsFederationTransport, type HttpsFederationTransport } from '../../src/node/https-federation.ts';
import type { TestTls } from './https-hosts.ts';

/** One request the remote was sent. */
export interface RemoteRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  body: any;
}

export interface RemoteAnswer {
  status: number;
  body?: unknown;
}

type Responder = (request: RemoteRequest) => RemoteAnswer | Promise<RemoteAnswer>;

interface Route {
  method: string;
  pattern: RegExp;
  respond: Responder;
  /** Called once a scripted (one-time) answer has been given. */
  answered?: (request: RemoteRequest) => void;
}

/** A room as the remote holds it. */
export interface RemoteRoom {
  roomId: string;
  version: string;
  /** Every event of the room it holds and serves, held-back ones included. */
  events: Map<string, PDU>;
  /** Event IDs of its timeline, in the order the remote took them (held-back events are not in it). */
  order: string[];
  /** `type\0state_key` → event ID, after the last event of `order`. */
  state: Map<string, string>;
}

/** What a test may set on an event it builds; the rest comes from the room as the remote holds it. */
export interface EventFields {
  type: string;
  sender: string;
  content: Record<string, unknown>;
  state_key?: string;
  redacts?: string;
  /** Its parents: the remote's latest event when not given. */
  prev_events?: string[];
  /** Its auth events: the spec's selection from the remote's current state when not given. */
  auth_events?: string[];
  /** One more than its deepest parent when not given. */
  depth?: number;
}

const NOT_FOUND: RemoteAnswer = { status: 404, body: { errcode: 'M_UNRECOGNIZED', error: 'Unrecognized request' } };
const stateKey = (type: string, key: string) => `${type}\u0000${key}`;

export interface ScriptedRemote {
  /** `localhost:PORT`. */
  name: string;
  keys: ServerSigningKeys;
  client: FederationClient;
  /** Every request it was sent, in order. */
  received: RemoteRequest[];
  rooms: Map<string, RemoteRoom>;
  /**
   * The next request matching `method` and `pattern` is answered by `respond`; resolves with that
   * request once answered. Scripted answers are tried before defaults, oldest first.
   */
  answerNext(method: string, pattern: RegExp, respond: Responder): Promise<RemoteRequest>;
  /** Every request matching is answered by `respond`, unless a scripted answer takes it first. */
  answerAlways(method: string, pattern: RegExp, respond: Responder): void;
  /** What the remote answers to a request by default, with no script: for a script that alters it. */
  defaultAnswer(request: RemoteRequest): Promise<RemoteAnswer>;
  /** Resolves with the first request (received already, or to come) that `matches`. */
  waitFor(matches: (request: RemoteRequest) => boolean): Promise<RemoteRequest>;
  /** Resolves once a PDU that `matches` has arrived in a transaction (or has already). */
  waitForPdu(matches: (pdu: PDU) => boolean): Promise<PDU>;
  /** Resolves once an EDU that `matches` has arrived in a transaction (or has already). */
  waitForEdu(matches: (edu: { edu_type: string; content: any }) => boolean): Promise<{ edu_type: string; content: any }>;
  /**
   * One signed request to `destination`, its answer raw (a v1 endpoint's `[200, {...}]`, an error):
   * signed as `origin` when given (a name that is no server name, say), else as this server.
   */
  call(destination: string, method: 'GET' | 'PUT' | 'POST', path: string, body?: unknown, options?: { origin?: string }): Promise<{ status: number; body: any }>;
  /** Sends one EDU to `destination` in a transaction of its own. */
  sendEdu(destination: string, eduType: string, content: Record<string, unknown>): Promise<void>;
  /**
   * A new room on this server, created by `creator` (a user of this server), public to join;
   * `powerLevels: false` leaves out its m.room.power_levels event, `members` join after the creator.
   */
  createRoom(creator: string, options?: { version?: string; powerLevels?: boolean; members?: string[] }): Promise<string>;
  /**
   * `userId` (of this server) joins `roomId` through `via`: make_join, send_join (v2). The join kept
   * is the resident's copy when it answers one (countersigned, for a restricted room); resolves with it.
   */
  joinRoom(via: string, roomId: string, userId: string): Promise<PDU>;
  /** Signs an event of this server's for a room the remote holds, built on its latest event, without taking it or sending it anywhere. */
  signEvent(roomId: string, event: { type: string; sender: string; content: Record<string, unknown>; state_key?: string }): Promise<{ eventId: string; pdu: PDU }>;
  /** A new event by a user of this server, on top of the room's latest, sent to every other server in the room. */
  sendEvent(roomId: string, event: { type: string; sender: string; content: Record<string, unknown>; state_key?: string }): Promise<string>;
  /** `sender` (of this server) invites `target` of `destination` to a room the remote is in: /v2/invite, then the signed invite to the room's other servers. */
  invite(roomId: string, sender: string, target: string, destination: string): Promise<string>;
  /**
   * Builds and signs an event of the room without sending it. `hold: true` keeps it out of the
   * remote's timeline and state: the remote serves it when asked, but builds nothing on it.
   */
  createEvent(roomId: string, fields: EventFields, options?: { hold?: boolean }): Promise<{ eventId: string; pdu: PDU }>;
  /** Sends PDUs to `destination` in one transaction; its answer per event, refusals included. */
  sendPdus(destination: string, pdus: PDU[]): Promise<Record<string, { error?: string }>>;
  /** The IDs of the state before an event, as the remote reckons it (its timeline replayed, no resolution). */
  stateBefore(roomId: string, eventId: string): string[];
  /** The IDs of the auth chain of these events: every event reachable through auth_events. */
  authChainIds(roomId: string, eventIds: string[]): string[];
  /** Servers other than this one with a member joined to the room. */
  serversIn(roomId: string): string[];
  close(): Promise<void>;
}

/**
 * A remote on 127.0.0.1 with an OS-chosen port, serving the test's leaf and trusting its CA, named
 * `localhost:PORT`, or `127.0.0.1:PORT` with `host` (an IP literal: a server ACL can tell it from a
 * Hearth host named localhost, ACLs ignoring ports).
 */
export async function startScriptedRemote(tls: Pick<TestTls, 'leaf' | 'ca'>, options: { host?: 'localhost' | '127.0.0.1' } = {}): Promise<ScriptedRemote> {
  const keys = await ServerSigningKeys.open({ storage: memorySigningKeyStorage(), ed25519: await defaultEd25519Backend(), random: webRandomBytes, now: Date.now });
  /** One-time answers, oldest first, tried before the standing ones. */
  const scripted: Route[] = [];
  const standing: Route[] = [];
  const received: RemoteRequest[] = [];
  const watchers = new Set<(request: RemoteRequest) => void>();
  const rooms = new Map<string, RemoteRoom>();
  const transactionIds = { next: 0 };
  let name = '';


  async function handle(request: RemoteRequest): Promise<RemoteAnswer> {
    received.push(request);
    for (const watch of watchers) watch(request);
    const matches = (r: Route) => r.method === request.method && r.pattern.test(request.path);
    const once = scripted.findIndex(matches);
    const found = once >= 0 ? scripted.splice(once, 1)[0] : standing.find(matches);
    if (!found) return NOT_FOUND;
    const answer = await found.respond(request);
    found.answered?.(request);
    return answer;
  }

  const sockets = new Set<Socket>();
  const server = createHttpsServer(tls.leaf, (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'https://remote');
      const text = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      try {
        body = text === '' ? undefined : JSON.parse(text);
      } catch {
        body = text;
      }
      void handle({ method: req.method ?? 'GET', path: decodeURIComponent(url.pathname), query: url.searchParams, body }).then(
        (answer) => {
          res.writeHead(answer.status, { 'content-type': 'application/json' });
          res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
        },
        (error: unknown) => {
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ errcode: 'M_UNKNOWN', error: String(error) }));
        },
      );
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  name = `${options.host ?? 'localhost'}:${(server.address() as AddressInfo).port}`;
  const transport: HttpsFederationTransport = createHttpsFederationTransport({ extraCa: [tls.ca.cert] });
  const client = new FederationClient(transport, name, keys.keyId, keys.signingKey);

  const waitFor = (matches: (request: RemoteRequest) => boolean): Promise<RemoteRequest> => {
    const seen = received.find(matches);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => {
      const watch = (request: RemoteRequest) => {
        if (!matches(request)) return;
        watchers.delete(watch);
        resolve(request);
      };
      watchers.add(watch);
    });
  };
  const transactions = (request: RemoteRequest) => request.method === 'PUT' && request.path.startsWith('/_matrix/federation/v1/send/');
  const inTransactions = <T>(pick: (body: any) => T[], matches: (item: T) => boolean): Promise<T> =>
    waitFor((r) => transactions(r) && pick(r.body).some(matches)).then((r) => pick(r.body).find(matches)!);

  /** Takes an event into the room as it is (the remote trusts its one peer); held back, only into what it serves. */
  function take(room: RemoteRoom, eventId: string, pdu: PDU, hold = false): void {
    room.events.set(eventId, pdu);
    if (hold || room.order.includes(eventId)) return;
    room.order.push(eventId);
    if (typeof pdu.state_key === 'string') room.state.set(stateKey(pdu.type, pdu.state_key), eventId);
  }
  const latest = (room: RemoteRoom) => room.events.get(room.order.at(-1)!)!;
  const stateEvent = (room: RemoteRoom, type: string, key = '') => {
    const id = room.state.get(stateKey(type, key));
    return id === undefined ? undefined : { id, pdu: room.events.get(id)! };
  };
  /** The auth events the spec's rules pick for an event (server-server §Auth events selection, v1–v11). */
  function authEventsFor(room: RemoteRoom, event: { type: string; sender: string; state_key?: string; content: Record<string, unknown> }): string[] {
    const ids = [stateEvent(room, 'm.room.create'), stateEvent(room, 'm.room.power_levels'), stateEvent(room, 'm.room.member', event.sender)];
    if (event.type === 'm.room.member') {
      ids.push(stateEvent(room, 'm.room.member', event.state_key!));
      if (['join', 'invite'].includes(event.content['membership'] as string)) ids.push(stateEvent(room, 'm.room.join_rules'));
    }
    return [...new Set(ids.filter((e) => e !== undefined).map((e) => e!.id))];
  }
  /** The auth chain of the given events: every event reachable through auth_events. */
  function authChain(room: RemoteRoom, ids: string[]): PDU[] {
    const seen = new Set<string>();
    const walk = (id: string) => {
      if (seen.has(id) || !room.events.has(id)) return;
      seen.add(id);
      for (const next of referenceIds(room.events.get(id)!.auth_events)) walk(next);
    };
    for (const id of ids) for (const next of referenceIds(room.events.get(id)?.auth_events ?? [])) walk(next);
    return [...seen].map((id) => room.events.get(id)!);
  }
  /** The state after an event: its timeline replayed up to it, or for a held-back one the state after its first parent, plus itself. */
  function stateAfter(room: RemoteRoom, eventId: string): Map<string, string> {
    const at = room.order.indexOf(eventId);
    if (at >= 0) {
      const state = new Map<string, string>();
      for (const id of room.order.slice(0, at + 1)) {
        const pdu = room.events.get(id)!;
        if (typeof pdu.state_key === 'string') state.set(stateKey(pdu.type, pdu.state_key), id);
      }
      return state;
    }
    const pdu = room.events.get(eventId);
    if (!pdu) return new Map();
    const state = stateBeforeOf(room, eventId);
    if (typeof pdu.state_key === 'string') state.set(stateKey(pdu.type, pdu.state_key), eventId);
    return state;
  }
  function stateBeforeOf(room: RemoteRoom, eventId: string): Map<string, string> {
    const at = room.order.indexOf(eventId);
    if (at === 0) return new Map();
    if (at > 0) return stateAfter(room, room.order[at - 1]!);
    const first = referenceIds(room.events.get(eventId)?.prev_events ?? [])[0];
    return first === undefined ? new Map() : stateAfter(room, first);
  }
  /** Events between `earliest` and `latest` (neither included), walking prev_events back, shallowest first. */
  function missingEvents(room: RemoteRoom, earliest: string[], latest: string[], limit: number): PDU[] {
    const found: PDU[] = [];
    const seen = new Set([...earliest, ...latest]);
    const queue = latest.flatMap((id) => referenceIds(room.events.get(id)?.prev_events ?? []));
    while (queue.length > 0 && found.length < limit) {
      const id = queue.shift()!;
      if (seen.has(id)) continue;
      seen.add(id);
      const pdu = room.events.get(id);
      if (!pdu) continue;
      found.push(pdu);
      queue.push(...referenceIds(pdu.prev_events));
    }
    return found.sort((a, b) => a.depth - b.depth);
  }
  const roomOf = (roomId: string | undefined) => rooms.get(roomId ?? '');
  const eventAnywhere = (eventId: string): PDU | undefined => {
    for (const room of rooms.values()) {
      const pdu = room.events.get(eventId);
      if (pdu) return pdu;
    }
    return undefined;
  };
  const notFound = (what: string): RemoteAnswer => ({ status: 404, body: { errcode: 'M_NOT_FOUND', error: `${what} is unknown here` } });
  const serversIn = (roomId: string): string[] => {
    const room = rooms.get(roomId);
    if (!room) return [];
    const servers = new Set<string>();
    for (const [key, id] of room.state) {
      const pdu = room.events.get(id)!;
      if (pdu.type === 'm.room.member' && (pdu.content as { membership?: string }).membership === 'join') servers.add(key.split(':').slice(1).join(':'));
    }
    servers.delete(name);
    return [...servers];
  };
  async function build(room: RemoteRoom, fields: EventFields, hold = false): Promise<{ eventId: string; pdu: PDU }> {
    const { prev_events: prevs, auth_events: auths, depth, ...event } = fields;
    const prevEvents = prevs ?? (room.order.length > 0 ? [room.order.at(-1)!] : []);
    const parentDepth = Math.max(0, ...prevEvents.map((id) => eventAnywhere(id)?.depth ?? 0));
    const version = requireRoomVersion(room.version);
    const { event: signed, eventId } = await signNewEvent({
      ...event,
      room_id: room.roomId,
      origin: name,
      origin_server_ts: Date.now(),
      depth: depth ?? parentDepth + 1,
      prev_events: prevEvents,
      auth_events: auths ?? authEventsFor(room, event),
    }, version, name, keys.keyId, keys.signingKey);
    take(room, eventId, signed as unknown as PDU, hold);
    return { eventId, pdu: signed as unknown as PDU };
  }
  async function transact(destination: string, body: { pdus?: PDU[]; edus?: { edu_type: string; content: Record<string, unknown> }[] }): Promise<Record<string, { error?: string }>> {
    const answer = await client.sendTransaction(destination, `scripted-${Date.now()}-${transactionIds.next++}`, { origin: name, origin_server_ts: Date.now(), pdus: body.pdus ?? [], ...(body.edus ? { edus: body.edus } : {}) });
    return answer.pdus ?? {};
  }
  async function send(destination: string, body: { pdus?: PDU[]; edus?: { edu_type: string; content: Record<string, unknown> }[] }): Promise<void> {
    for (const [eventId, result] of Object.entries(await transact(destination, body))) if (result.error) throw new Error(`${destination} refused ${eventId}: ${result.error}`);
  }

  // What every server answers: its key, and what it is sent.
  const always = (method: string, pattern: RegExp, respond: Responder) => void standing.push({ method, pattern, respond });
  always('GET', /^\/_matrix\/key\/v2\/server$/, async () => ({ status: 200, body: await keys.document(name) }));
  always('PUT', /^\/_matrix\/federation\/v1\/send\//, (request) => {
    const results: Record<string, object> = {};
    for (const pdu of (request.body?.pdus ?? []) as PDU[]) {
      // A create event (the only one without room_id, from v12) never arrives in a transaction.
      const room = pdu.room_id === undefined ? undefined : rooms.get(pdu.room_id);
      if (!room) continue;
      const eventId = eventIdOfPdu(pdu, room.version);
      take(room, eventId, pdu);
      results[eventId] = {};
    }
    return { status: 200, body: { pdus: results } };
  });
  // An invite of one of ours to a room elsewhere: counter-signed, as any server does.
  always('PUT', /^\/_matrix\/federation\/v2\/invite\//, async (request) => {
    const { event, room_version: version } = request.body as { event: PDU; room_version: string };
    const signed = await signJson(redactEvent(event, requireRoomVersion(version)), name, keys.keyId, keys.signingKey);
    return { status: 200, body: { event: { ...event, signatures: signed.signatures } } };
  });
  for (const membership of ['join', 'leave']) {
    always('GET', new RegExp(`^/_matrix/federation/v1/make_${membership}/`), (request) => {
      const [, roomId, userId] = /^\/_matrix\/federation\/v1\/make_\w+\/([^/]+)\/([^/]+)$/.exec(request.path) ?? [];
      const room = rooms.get(roomId ?? '');
      if (!room || !userId) return { status: 404, body: { errcode: 'M_NOT_FOUND', error: 'no such room' } };
      const previous = latest(room);
      const template = { type: 'm.room.member', sender: userId, state_key: userId, content: { membership } };
      return {
        status: 200,
        body: {
          room_version: room.version,
          event: {
            ...template, room_id: room.roomId, origin: userId.split(':').slice(1).join(':'), origin_server_ts: Date.now(), depth: previous.depth + 1,
            prev_events: [room.order.at(-1)!], auth_events: authEventsFor(room, template),
          },
        },
      };
    });
  }
  /** send_join's answer: the room's state before the join and its auth chain; the join is taken. */
  const sendJoinAnswer = (request: RemoteRequest) => {
    const [, roomId, eventId] = /^\/_matrix\/federation\/v\d\/send_join\/([^/]+)\/([^/]+)$/.exec(request.path) ?? [];
    const room = rooms.get(roomId ?? '');
    if (!room || !eventId) return undefined;
    const stateIds = [...room.state.values()];
    const state = stateIds.map((id) => room.events.get(id)!);
    const chain = authChain(room, [...stateIds, ...referenceIds((request.body as PDU).auth_events)]);
    take(room, eventId, request.body as PDU);
    return { origin: name, state, auth_chain: chain, event: request.body, members_omitted: false, servers_in_room: [name] };
  };
  const noSuchRoom: RemoteAnswer = { status: 404, body: { errcode: 'M_NOT_FOUND', error: 'no such room' } };
  always('PUT', /^\/_matrix\/federation\/v2\/send_join\//, (request) => {
    const answer = sendJoinAnswer(request);
    return answer ? { status: 200, body: answer } : noSuchRoom;
  });
  // The v1 form older servers still serve: `[200, body]`, and no `event` in it.
  always('PUT', /^\/_matrix\/federation\/v1\/send_join\//, (request) => {
    const answer = sendJoinAnswer(request);
    if (!answer) return noSuchRoom;
    const { event: _event, ...v1 } = answer;
    return { status: 200, body: [200, v1] };
  });
  for (const prefix of ['v1', 'v2']) {
    always('PUT', new RegExp(`^/_matrix/federation/${prefix}/send_leave/`), (request) => {
      const [, roomId, eventId] = /^\/_matrix\/federation\/v\d\/send_leave\/([^/]+)\/([^/]+)$/.exec(request.path) ?? [];
      const room = rooms.get(roomId ?? '');
      if (!room || !eventId) return noSuchRoom;
      take(room, eventId, request.body as PDU);
      return { status: 200, body: prefix === 'v1' ? [200, {}] : {} };
    });
  }
  // What another server fetches of a room: answered from what the remote holds.
  always('GET', /^\/_matrix\/federation\/v1\/event\//, (request) => {
    const eventId = request.path.slice('/_matrix/federation/v1/event/'.length);
    const pdu = eventAnywhere(eventId);
    return pdu ? { status: 200, body: { origin: name, origin_server_ts: Date.now(), pdus: [pdu] } } : notFound(eventId);
  });
  always('GET', /^\/_matrix\/federation\/v1\/event_auth\//, (request) => {
    const [, roomId, eventId] = /^\/_matrix\/federation\/v1\/event_auth\/([^/]+)\/([^/]+)$/.exec(request.path) ?? [];
    const room = roomOf(roomId);
    if (!room || !eventId || !room.events.has(eventId)) return notFound(eventId ?? 'that event');
    return { status: 200, body: { auth_chain: authChain(room, [eventId]) } };
  });
  const stateAnswer = (request: RemoteRequest, ids: boolean): RemoteAnswer => {
    const room = roomOf(/^\/_matrix\/federation\/v1\/state(?:_ids)?\/([^/]+)$/.exec(request.path)?.[1]);
    const eventId = request.query.get('event_id');
    if (!eventId) return { status: 400, body: { errcode: 'M_MISSING_PARAM', error: 'event_id is required' } };
    if (!room || !room.events.has(eventId)) return notFound(eventId);
    const state = [...stateBeforeOf(room, eventId).values()];
    const chain = authChain(room, state).map((pdu) => eventIdOfPdu(pdu, room.version));
    if (ids) return { status: 200, body: { pdu_ids: state, auth_chain_ids: chain } };
    return { status: 200, body: { pdus: state.map((id) => room.events.get(id)!), auth_chain: chain.map((id) => room.events.get(id)!) } };
  };
  always('GET', /^\/_matrix\/federation\/v1\/state_ids\//, (request) => stateAnswer(request, true));
  always('GET', /^\/_matrix\/federation\/v1\/state\//, (request) => stateAnswer(request, false));
  always('POST', /^\/_matrix\/federation\/v1\/get_missing_events\//, (request) => {
    const room = roomOf(/^\/_matrix\/federation\/v1\/get_missing_events\/([^/]+)$/.exec(request.path)?.[1]);
    if (!room) return notFound('that room');
    const { earliest_events: earliest = [], latest_events: latestIds = [], limit = 10 } = request.body as { earliest_events?: string[]; latest_events?: string[]; limit?: number };
    return { status: 200, body: { events: missingEvents(room, earliest, latestIds, limit) } };
  });
  always('GET', /^\/_matrix\/federation\/v1\/backfill\//, (request) => {
    const room = roomOf(/^\/_matrix\/federation\/v1\/backfill\/([^/]+)$/.exec(request.path)?.[1]);
    if (!room) return notFound('that room');
    const from = request.query.getAll('v').filter((id) => room.events.has(id));
    const limit = Number(request.query.get('limit') ?? 10);
    const older = missingEvents(room, [], from, Math.max(0, limit - from.length));
    const pdus = [...from.map((id) => room.events.get(id)!), ...older].sort((a, b) => b.depth - a.depth);
    return { status: 200, body: { origin: name, origin_server_ts: Date.now(), pdus } };
  });

  // What it answers unscripted: the routes above, before any test adds its own.
  const defaults = [...standing];
  return {
    name,
    keys,
    client,
    received,
    rooms,
    answerNext: (method, pattern, respond) => new Promise((resolve) => void scripted.push({ method, pattern, respond, answered: resolve })),
    answerAlways: (method, pattern, respond) => void standing.unshift({ method, pattern, respond }),
    defaultAnswer: async (request) => {
      const route = defaults.find((r) => r.method === request.method && r.pattern.test(request.path));
      return route ? route.respond(request) : NOT_FOUND;
    },
    waitFor,
    waitForPdu: (matches) => inTransactions((body) => (body?.pdus ?? []) as PDU[], matches),
    waitForEdu: (matches) => inTransactions((body) => (body?.edus ?? []) as { edu_type: string; content: any }[], matches),
    async call(destination, method, path, body, options = {}) {
      const origin = options.origin ?? name;
      const authorization = await authorizationHeader(method, path, origin, destination, body, keys.keyId, keys.signingKey);
      const headers: Record<string, string> = { authorization };
      if (body !== undefined) headers['content-type'] = 'application/json';
      const response = await transport.send(destination, new Request(`http://${destination}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }));
      const text = await response.text();
      return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
    },
    sendEdu: (destination, eduType, content) => send(destination, { edus: [{ edu_type: eduType, content }] }),
    async createRoom(creator, createOptions = {}) {
      const version = createOptions.version ?? '10';
      const roomId = `!${Buffer.from(webRandomBytes(12)).toString('hex')}:${name}`;
      const room: RemoteRoom = { roomId, version, events: new Map(), order: [], state: new Map() };
      rooms.set(roomId, room);
      await build(room, { type: 'm.room.create', sender: creator, state_key: '', content: { creator, room_version: version } });
      await build(room, { type: 'm.room.member', sender: creator, state_key: creator, content: { membership: 'join' } });
      if (createOptions.powerLevels !== false) {
        await build(room, { type: 'm.room.power_levels', sender: creator, state_key: '', content: { users: { [creator]: 100 }, users_default: 0, events_default: 0, state_default: 50, ban: 50, kick: 50, redact: 50, invite: 0 } });
      }
      await build(room, { type: 'm.room.join_rules', sender: creator, state_key: '', content: { join_rule: 'public' } });
      await build(room, { type: 'm.room.history_visibility', sender: creator, state_key: '', content: { history_visibility: 'shared' } });
      for (const member of createOptions.members ?? []) await build(room, { type: 'm.room.member', sender: member, state_key: member, content: { membership: 'join' } });
      return roomId;
    },
    async joinRoom(via, roomId, userId) {
      const made = await client.makeJoin(via, roomId, userId, [...ROOM_VERSIONS.keys()]);
      const version = made.room_version ?? '1';
      const { event, eventId } = await signNewEvent({ ...made.event, origin: name, origin_server_ts: Date.now() }, requireRoomVersion(version), name, keys.keyId, keys.signingKey);
      const answer = await client.sendJoin(via, roomId, eventId, event as unknown as PDU);
      const room: RemoteRoom = rooms.get(roomId) ?? { roomId, version, events: new Map(), order: [], state: new Map() };
      rooms.set(roomId, room);
      const events = [...(answer.auth_chain ?? []), ...(answer.state ?? [])] as PDU[];
      events.sort((a, b) => a.depth - b.depth);
      for (const pdu of events) take(room, eventIdOfPdu(pdu, version), pdu);
      const join = (answer.event ?? event) as PDU;
      take(room, eventId, join);
      return join;
    },
    async signEvent(roomId, event) {
      const room = rooms.get(roomId);
      if (!room) throw new Error(`the scripted remote is not in ${roomId}`);
      const previous = latest(room);
      const { event: signed, eventId } = await signNewEvent({
        ...event, room_id: roomId, origin: name, origin_server_ts: Date.now(), depth: previous.depth + 1, prev_events: [room.order.at(-1)!], auth_events: authEventsFor(room, event),
      }, requireRoomVersion(room.version), name, keys.keyId, keys.signingKey);
      return { eventId, pdu: signed as unknown as PDU };
    },
    async sendEvent(roomId, event) {
      const room = rooms.get(roomId);
      if (!room) throw new Error(`the scripted remote is not in ${roomId}`);
      const { eventId, pdu } = await build(room, event);
      const servers = new Set(serversIn(roomId));
      // A member who just left is told too, as a server tells the one whose membership changed.
      if (event.type === 'm.room.member' && event.state_key && !event.state_key.endsWith(`:${name}`)) servers.add(event.state_key.split(':').slice(1).join(':'));
      for (const destination of servers) await send(destination, { pdus: [pdu] });
      return eventId;
    },
    async invite(roomId, sender, target, destination) {
      const room = rooms.get(roomId);
      if (!room) throw new Error(`the scripted remote is not in ${roomId}`);
      const version = requireRoomVersion(room.version);
      const previous = latest(room);
      const { event } = await signNewEvent({
        type: 'm.room.member', room_id: roomId, sender, state_key: target, content: { membership: 'invite' }, origin: name, origin_server_ts: Date.now(),
        depth: previous.depth + 1, prev_events: [room.order.at(-1)!], auth_events: authEventsFor(room, { type: 'm.room.member', sender, state_key: target, content: { membership: 'invite' } }),
      }, version, name, keys.keyId, keys.signingKey);
      const eventId = computeEventId(event, version);
      const answer = await client.request<{ event: PDU }>(destination, 'PUT', `/_matrix/federation/v2/invite/${encodeURIComponent(roomId)}/${encodeURIComponent(eventId)}`, {
        body: { event, room_version: room.version, invite_room_state: [] },
      });
      take(room, eventId, answer.event);
      for (const server of serversIn(roomId)) await send(server, { pdus: [answer.event] });
      return eventId;
    },
    async createEvent(roomId, fields, eventOptions = {}) {
      const room = rooms.get(roomId);
      if (!room) throw new Error(`the scripted remote is not in ${roomId}`);
      return build(room, fields, eventOptions.hold ?? false);
    },
    sendPdus: (destination, pdus) => transact(destination, { pdus }),
    stateBefore(roomId, eventId) {
      const room = rooms.get(roomId);
      if (!room) throw new Error(`the scripted remote is not in ${roomId}`);
      return [...stateBeforeOf(room, eventId).values()];
    },
    authChainIds(roomId, eventIds) {
      const room = rooms.get(roomId);
      if (!room) throw new Error(`the scripted remote is not in ${roomId}`);
      return authChain(room, eventIds).map((pdu) => eventIdOfPdu(pdu, room.version));
    },
    serversIn,
    async close() {
      transport.close();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const eventIdOfPdu = (pdu: PDU, version: string): string => computeEventId(pdu, requireRoomVersion(version));
