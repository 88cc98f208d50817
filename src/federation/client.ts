import type { SigningKey } from '../crypto/ed25519.ts';
import { isValidServerName } from '../events/identifiers.ts';
import type { PDU } from '../events/pdu.ts';
import type { PublicRoomsPage } from '../rooms/directory.ts';
import { decodeMediaMultipart, type MediaPart } from '../media/multipart.ts';
import { FederationUnreachable, type FederationTransport } from './transport.ts';
import { authorizationHeader } from './x-matrix.ts';
import { CodedError } from '../util/coded-error.ts';
import { readBounded } from '../http/bounded-body.ts';
import { splitJsonObject, type JsonElements, type SplitJsonObject } from '../util/json-elements.ts';

/** A server answered an error, or its answer made no sense. */
export class FederationRequestError extends Error {
  override name = 'FederationRequestError';
  constructor(
    readonly destination: string,
    readonly status: number,
    readonly errcode: string,
    message: string,
    /** From Retry-After or retry_after_ms, when the server asked us to wait. */
    readonly retryAfterMs?: number,
    /** The error's JSON object as the server answered it (`room_version` of M_INCOMPATIBLE_ROOM_VERSION, say); undefined when it answered none. */
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/**
 * Whether a server answered that it does not serve an endpoint (server-server §API standards since
 * Matrix 1.6: 404 or 405 `M_UNRECOGNIZED`; older servers answer 404 with no JSON, or 400
 * `M_UNRECOGNIZED`, as Synapse counts them), so that the older form of the endpoint is worth a try.
 */
export function isUnknownEndpoint(error: unknown): boolean {
  if (!(error instanceof FederationRequestError)) return false;
  if (error.status === 404 || error.status === 405) return error.details === undefined || error.errcode === 'M_UNRECOGNIZED';
  return error.status === 400 && error.errcode === 'M_UNRECOGNIZED';
}

export interface MakeMembershipResponse {
  room_version?: string;
  event: Record<string, unknown>;
}

/**
 * send_join's answer, its state and auth chain kept as elements, each parsed when read: 18 MiB for
 * a room of 10,000 members, and three times that parsed (undefined when the answer lacks one).
 */
export interface SendJoinResponse {
  state: JsonElements | undefined;
  auth_chain: JsonElements | undefined;
  /** The join as the resident server signed it too (restricted joins), unchecked. */
  event?: unknown;
}

/** /state's answer, its events kept as elements as send_join's are. */
export interface StateResponse {
  pdus: JsonElements | undefined;
  auth_chain: JsonElements | undefined;
}

export interface TransactionBody {
  origin: string;
  origin_server_ts: number;
  pdus: PDU[];
  edus?: { edu_type: string; content: Record<string, unknown> }[];
}

const enc = encodeURIComponent;

/**
 * Outbound server-server requests, signed with X-Matrix and carried by the host's
 * transport. One typed method per endpoint we call.
 */
/** The bound on an answer carrying a room's state and auth chain (Synapse allows send_join 500 MiB; Matrix HQ's is ~100 MiB). */
export const ROOM_STATE_ANSWER_BYTES = 256 * 1024 * 1024;

export class FederationClient {
  constructor(
    private readonly transport: FederationTransport,
    private readonly origin: string,
    private readonly keyId: string,
    private readonly signingKey: SigningKey,
  ) {}

  async request<T = Record<string, unknown>>(
    destination: string,
    method: 'GET' | 'PUT' | 'POST',
    path: string,
    options: { query?: Record<string, string | string[] | undefined>; body?: unknown; signal?: AbortSignal; maxResponseBytes?: number; v1Answer?: boolean } = {},
  ): Promise<T> {
    const response = await this.signedExchange(destination, method, path, options);
    const text = await response.text();
    if (!response.ok) throw requestError(destination, method, path, response, text);
    let body: unknown;
    try {
      body = text === '' ? {} : JSON.parse(text);
    } catch {
      throw new FederationRequestError(destination, response.status, 'M_NOT_JSON', `${method} ${path}: the response is not JSON`);
    }
    // The v1 send_join, send_leave and invite answer `[200, body]` (their old definitions; the spec kept them until MSC4376).
    if (options.v1Answer) body = Array.isArray(body) && body.length === 2 && body[0] === 200 ? body[1] : undefined;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new FederationRequestError(destination, response.status, 'M_BAD_JSON', `${method} ${path}: the response is not a JSON object`);
    }
    return body as T;
  }

  /**
   * A request whose answer carries a room's state: the answer's named arrays are kept as
   * elements (splitJsonObject), not parsed whole, and its other members parsed.
   */
  private async requestElements(
    destination: string,
    method: 'GET' | 'PUT',
    path: string,
    arrayKeys: readonly string[],
    options: { query?: Record<string, string | string[] | undefined>; body?: unknown; v1Answer?: boolean },
  ): Promise<SplitJsonObject> {
    const response = await this.signedExchange(destination, method, path, { ...options, maxResponseBytes: ROOM_STATE_ANSWER_BYTES });
    if (!response.ok) throw requestError(destination, method, path, response, await response.text());
    try {
      // Read as it came (one buffer, from the transport's bodyOver), not copied again.
      const bytes = (await readBounded(response.body, ROOM_STATE_ANSWER_BYTES)) ?? new Uint8Array();
      return splitJsonObject(options.v1Answer ? v1AnswerBody(bytes) : bytes, arrayKeys);
    } catch (error) {
      if (!(error instanceof SyntaxError)) throw error;
      throw new FederationRequestError(destination, response.status, 'M_NOT_JSON', `${method} ${path}: the response is not a JSON object (${error.message})`);
    }
  }

  /** Signs one request with X-Matrix and has the transport carry it; the answer, whatever its status. */
  private async signedExchange(
    destination: string,
    method: 'GET' | 'PUT' | 'POST',
    path: string,
    options: { query?: Record<string, string | string[] | undefined>; body?: unknown; signal?: AbortSignal; maxResponseBytes?: number },
  ): Promise<Response> {
    if (destination === this.origin) throw new FederationUnreachable(destination, 'a server does not federate with itself');
    // A name a client gave (`?server=`, `via`): one that is no server name is the caller's mistake, not a request to make.
    if (!isValidServerName(destination)) throw new CodedError(400, 'M_INVALID_PARAM', `${JSON.stringify(destination.slice(0, 300))} is not a server name`);
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(options.query ?? {})) {
      for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) search.append(name, v);
    }
    const uri = path + (search.size > 0 ? `?${search}` : '');
    const authorization = await authorizationHeader(method, uri, this.origin, destination, options.body, this.keyId, this.signingKey);
    const headers: Record<string, string> = { authorization };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const request = new Request(`http://${destination}${uri}`, {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    return this.transport.send(destination, request, { signal: options.signal, ...(options.maxResponseBytes ? { maxResponseBytes: options.maxResponseBytes } : {}) });
  }

  sendTransaction(destination: string, txnId: string, body: TransactionBody): Promise<{ pdus?: Record<string, { error?: string }> }> {
    return this.request(destination, 'PUT', `/_matrix/federation/v1/send/${enc(txnId)}`, { body });
  }

  makeJoin(destination: string, roomId: string, userId: string, versions: string[]): Promise<MakeMembershipResponse> {
    return this.request(destination, 'GET', `/_matrix/federation/v1/make_join/${enc(roomId)}/${enc(userId)}`, { query: { ver: versions } });
  }

  /** send_join v2, or v1 when the server does not serve v2 (as Synapse falls back). */
  async sendJoin(destination: string, roomId: string, eventId: string, event: PDU): Promise<SendJoinResponse> {
    const path = (v: string) => `/_matrix/federation/${v}/send_join/${enc(roomId)}/${enc(eventId)}`;
    const split = await this.requestElements(destination, 'PUT', path('v2'), ['state', 'auth_chain'], { body: event }).catch((error: unknown) => {
      if (!isUnknownEndpoint(error)) throw error;
      return this.requestElements(destination, 'PUT', path('v1'), ['state', 'auth_chain'], { body: event, v1Answer: true });
    });
    return { state: split.arrays.get('state'), auth_chain: split.arrays.get('auth_chain'), event: split.fields['event'] };
  }

  makeLeave(destination: string, roomId: string, userId: string): Promise<MakeMembershipResponse> {
    return this.request(destination, 'GET', `/_matrix/federation/v1/make_leave/${enc(roomId)}/${enc(userId)}`);
  }

  /** send_leave v2, or v1 when the server does not serve v2. */
  async sendLeave(destination: string, roomId: string, eventId: string, event: PDU): Promise<Record<string, unknown>> {
    const path = (v: string) => `/_matrix/federation/${v}/send_leave/${enc(roomId)}/${enc(eventId)}`;
    return this.request(destination, 'PUT', path('v2'), { body: event }).catch((error: unknown) => {
      if (!isUnknownEndpoint(error)) throw error;
      return this.request(destination, 'PUT', path('v1'), { body: event, v1Answer: true });
    });
  }

  makeKnock(destination: string, roomId: string, userId: string, versions: string[]): Promise<MakeMembershipResponse> {
    return this.request(destination, 'GET', `/_matrix/federation/v1/make_knock/${enc(roomId)}/${enc(userId)}`, { query: { ver: versions } });
  }

  sendKnock(destination: string, roomId: string, eventId: string, event: PDU): Promise<{ knock_room_state?: Record<string, unknown>[] }> {
    return this.request(destination, 'PUT', `/_matrix/federation/v1/send_knock/${enc(roomId)}/${enc(eventId)}`, { body: event });
  }

  invite(destination: string, roomId: string, eventId: string, body: { room_version: string; event: PDU; invite_room_state: unknown[] }): Promise<{ event: PDU }> {
    return this.request(destination, 'PUT', `/_matrix/federation/v2/invite/${enc(roomId)}/${enc(eventId)}`, { body });
  }

  /** The v1 invite, for servers without v2 and rooms of versions 1 and 2: the event is the body, the stripped state in its `unsigned`. */
  inviteV1(destination: string, roomId: string, eventId: string, event: PDU, inviteRoomState: unknown[]): Promise<{ event: PDU }> {
    return this.request(destination, 'PUT', `/_matrix/federation/v1/invite/${enc(roomId)}/${enc(eventId)}`, { body: { ...event, unsigned: { invite_room_state: inviteRoomState } }, v1Answer: true });
  }

  event(destination: string, eventId: string): Promise<{ pdus: PDU[] }> {
    return this.request(destination, 'GET', `/_matrix/federation/v1/event/${enc(eventId)}`);
  }

  async state(destination: string, roomId: string, eventId: string): Promise<StateResponse> {
    const { arrays } = await this.requestElements(destination, 'GET', `/_matrix/federation/v1/state/${enc(roomId)}`, ['pdus', 'auth_chain'], { query: { event_id: eventId } });
    return { pdus: arrays.get('pdus'), auth_chain: arrays.get('auth_chain') };
  }

  stateIds(destination: string, roomId: string, eventId: string): Promise<{ pdu_ids: string[]; auth_chain_ids: string[] }> {
    return this.request(destination, 'GET', `/_matrix/federation/v1/state_ids/${enc(roomId)}`, { query: { event_id: eventId }, maxResponseBytes: ROOM_STATE_ANSWER_BYTES });
  }

  eventAuth(destination: string, roomId: string, eventId: string): Promise<{ auth_chain: PDU[] }> {
    return this.request(destination, 'GET', `/_matrix/federation/v1/event_auth/${enc(roomId)}/${enc(eventId)}`, { maxResponseBytes: ROOM_STATE_ANSWER_BYTES });
  }

  backfill(destination: string, roomId: string, fromEventIds: string[], limit: number): Promise<{ pdus: PDU[] }> {
    return this.request(destination, 'GET', `/_matrix/federation/v1/backfill/${enc(roomId)}`, { query: { v: fromEventIds, limit: String(limit) } });
  }

  getMissingEvents(
    destination: string,
    roomId: string,
    body: { earliest_events: string[]; latest_events: string[]; limit: number; min_depth: number },
  ): Promise<{ events: PDU[] }> {
    return this.request(destination, 'POST', `/_matrix/federation/v1/get_missing_events/${enc(roomId)}`, { body });
  }

  queryProfile(destination: string, userId: string, field?: 'displayname' | 'avatar_url'): Promise<{ displayname?: string; avatar_url?: string }> {
    return this.request(destination, 'GET', '/_matrix/federation/v1/query/profile', { query: { user_id: userId, field } });
  }

  /** Another server's public room directory (server-server §Public room directory): POST when searching. */
  publicRooms(destination: string, query: { limit?: number; since?: string | null; term?: string }): Promise<PublicRoomsPage> {
    if (query.term !== undefined) {
      return this.request(destination, 'POST', '/_matrix/federation/v1/publicRooms', { body: { limit: query.limit, since: query.since ?? undefined, filter: { generic_search_term: query.term } } });
    }
    return this.request(destination, 'GET', '/_matrix/federation/v1/publicRooms', { query: { limit: query.limit?.toString(), since: query.since ?? undefined } });
  }

  queryDirectory(destination: string, alias: string): Promise<{ room_id: string; servers: string[] }> {
    return this.request(destination, 'GET', '/_matrix/federation/v1/query/directory', { query: { room_alias: alias } });
  }

  userDevices(destination: string, userId: string, signal?: AbortSignal): Promise<Record<string, unknown>> {
    return this.request(destination, 'GET', `/_matrix/federation/v1/user/devices/${enc(userId)}`, { signal });
  }

  userKeysQuery(destination: string, deviceKeys: Record<string, string[]>): Promise<Record<string, unknown>> {
    return this.request(destination, 'POST', '/_matrix/federation/v1/user/keys/query', { body: { device_keys: deviceKeys } });
  }

  userKeysClaim(destination: string, oneTimeKeys: Record<string, Record<string, string>>, signal?: AbortSignal): Promise<Record<string, unknown>> {
    return this.request(destination, 'POST', '/_matrix/federation/v1/user/keys/claim', { body: { one_time_keys: oneTimeKeys }, signal });
  }

  /** GET /media/download/{mediaId} (spec v1.11): the bytes from the multipart/mixed answer. */
  mediaDownload(destination: string, mediaId: string, options: { timeoutMs?: number; maxBytes: number }): Promise<MediaPart> {
    return this.requestMedia(destination, `/_matrix/federation/v1/media/download/${enc(mediaId)}`, { timeout_ms: options.timeoutMs?.toString() }, options.maxBytes);
  }

  /** GET /media/thumbnail/{mediaId} (spec v1.11). */
  mediaThumbnail(
    destination: string,
    mediaId: string,
    query: { width: number; height: number; method: 'crop' | 'scale'; timeoutMs?: number; maxBytes: number },
  ): Promise<MediaPart> {
    return this.requestMedia(
      destination,
      `/_matrix/federation/v1/media/thumbnail/${enc(mediaId)}`,
      { width: String(query.width), height: String(query.height), method: query.method, timeout_ms: query.timeoutMs?.toString() },
      query.maxBytes,
    );
  }

  /** A signed GET whose answer is multipart/mixed media rather than JSON. */
  private async requestMedia(destination: string, path: string, query: Record<string, string | undefined>, maxBytes: number): Promise<MediaPart> {
    const response = await this.signedExchange(destination, 'GET', path, { query });
    if (!response.ok) throw requestError(destination, 'GET', path, response, await response.text());
    const bytes = new Uint8Array(await response.arrayBuffer());
    let part: MediaPart;
    try {
      part = decodeMediaMultipart(response.headers.get('content-type'), bytes, maxBytes);
    } catch (error) {
      throw new FederationRequestError(destination, 502, 'M_UNKNOWN', `GET ${path}: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (part.location !== undefined) throw new FederationRequestError(destination, 502, 'M_UNKNOWN', `GET ${path}: the origin redirected to ${part.location}, which a peer cannot follow`);
    return part;
  }
}

/**
 * The object inside a v1 answer's `[200, {...}]`, as a view of the same bytes: only its bounds are
 * found here; splitJsonObject checks that it is one JSON object.
 */
function v1AnswerBody(bytes: Uint8Array): Uint8Array {
  const text = new TextDecoder().decode(bytes.subarray(0, 32));
  const head = /^\s*\[\s*200\s*,\s*/.exec(text);
  let end = bytes.length;
  while (end > 0 && /\s/.test(String.fromCharCode(bytes[end - 1]!))) end--;
  if (!head || bytes[end - 1] !== 0x5d) throw new SyntaxError('a v1 answer is [200, {...}]');
  return bytes.subarray(new TextEncoder().encode(head[0]).length, end - 1);
}

/** A refusal from another server, with its errcode and how long it asks us to wait (Retry-After or retry_after_ms). */
function requestError(destination: string, method: string, path: string, response: Response, text: string): FederationRequestError {
  let error: { errcode?: unknown; error?: unknown; retry_after_ms?: unknown } = {};
  let details: Record<string, unknown> | undefined;
  try {
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) details = error = parsed as Record<string, unknown>;
  } catch {
    // not JSON: the status says enough
  }
  const retryAfter = Number(response.headers.get('retry-after'));
  const retryAfterMs = Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : typeof error.retry_after_ms === 'number' ? error.retry_after_ms : undefined;
  return new FederationRequestError(
    destination,
    response.status,
    typeof error.errcode === 'string' ? error.errcode : 'M_UNKNOWN',
    `${method} ${path} → ${response.status}: ${typeof error.error === 'string' ? error.error : text.slice(0, 200)}`,
    retryAfterMs,
    details,
  );
}
