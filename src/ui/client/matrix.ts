/**
 * A minimal Matrix client-server API client for the built-in page: plain fetch
 * to the host's homeserver URL (this origin's /_matrix/*, which the service worker
 * routes to the core), as it would for any other client.
 */
import { MatrixApiError, type MatrixEvent, type Session } from '../chat.ts';


export interface SyncRoom {
  timeline?: { events: MatrixEvent[]; limited?: boolean; prev_batch?: string };
  state?: { events: MatrixEvent[] };
  ephemeral?: { events: MatrixEvent[] };
  invite_state?: { events: MatrixEvent[] };
}

export interface SyncResponse {
  next_batch: string;
  rooms?: { join?: Record<string, SyncRoom>; invite?: Record<string, SyncRoom>; leave?: Record<string, SyncRoom> };
}

const CLIENT = '/_matrix/client/v3';

export class MatrixApi {
  session: Session | undefined;
  private txnCounter = 0;

  /** `baseUrl`: the homeserver's, without a trailing slash (the host's `homeserverUrl`). */
  constructor(
    private readonly baseUrl: string,
    session?: Session,
  ) {
    this.session = session;
  }

  async request<T = any>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const headers: Record<string, string> = {};
    if (this.session) headers['authorization'] = `Bearer ${this.session.accessToken}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(this.baseUrl + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
    const text = await response.text();
    let parsed: any;
    try {
      parsed = text ? JSON.parse(text) : {};
    } catch {
      throw new MatrixApiError(response.status, 'M_UNKNOWN', `unexpected response (${response.status}): ${text.slice(0, 200)}`);
    }
    if (!response.ok) throw new MatrixApiError(response.status, parsed.errcode ?? 'M_UNKNOWN', parsed.error ?? response.statusText);
    return parsed as T;
  }

  versions(): Promise<{ versions: string[] }> {
    return this.request('GET', '/_matrix/client/versions');
  }

  async register(username: string, password: string): Promise<Session> {
    const body = { username, password, auth: { type: 'm.login.dummy' }, initial_device_display_name: 'Hearth built-in client' };
    const result = await this.request('POST', `${CLIENT}/register`, body);
    return { userId: result.user_id, accessToken: result.access_token, deviceId: result.device_id };
  }

  async login(username: string, password: string): Promise<Session> {
    const body = { type: 'm.login.password', identifier: { type: 'm.id.user', user: username }, password, initial_device_display_name: 'Hearth built-in client' };
    const result = await this.request('POST', `${CLIENT}/login`, body);
    return { userId: result.user_id, accessToken: result.access_token, deviceId: result.device_id };
  }

  whoami(): Promise<{ user_id: string }> {
    return this.request('GET', `${CLIENT}/account/whoami`);
  }

  logout(): Promise<unknown> {
    return this.request('POST', `${CLIENT}/logout`, {});
  }

  sync(since: string | undefined, timeoutMs: number, signal?: AbortSignal): Promise<SyncResponse> {
    const filter = JSON.stringify({ room: { timeline: { limit: 50 } } });
    const query = new URLSearchParams({ timeout: String(timeoutMs), filter });
    if (since) query.set('since', since);
    return this.request('GET', `${CLIENT}/sync?${query}`, undefined, signal);
  }

  async createRoom(name: string): Promise<string> {
    const result = await this.request('POST', `${CLIENT}/createRoom`, { name, preset: 'private_chat' });
    return result.room_id;
  }

  /** Hearth's own: the caller's events that some server in their room has not received yet. */
  async pending(): Promise<Record<string, { room_id: string; destinations: string[] }>> {
    const result = await this.request('GET', '/_matrix/client/unstable/org.hearth/pending');
    return result.pending ?? {};
  }

  async join(roomIdOrAlias: string): Promise<string> {
    const result = await this.request('POST', `${CLIENT}/join/${encodeURIComponent(roomIdOrAlias)}`, {});
    return result.room_id;
  }

  invite(roomId: string, userId: string): Promise<unknown> {
    return this.request('POST', `${CLIENT}/rooms/${encodeURIComponent(roomId)}/invite`, { user_id: userId });
  }

  leave(roomId: string): Promise<unknown> {
    return this.request('POST', `${CLIENT}/rooms/${encodeURIComponent(roomId)}/leave`, {});
  }

  /** A transaction ID unique to this page, so a retried send is applied once. */
  newTxnId(): string {
    return `hearth-${Date.now().toString(36)}-${(this.txnCounter++).toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  }

  async sendText(roomId: string, body: string, txnId = this.newTxnId()): Promise<string> {
    const path = `${CLIENT}/rooms/${encodeURIComponent(roomId)}/send/m.room.message/${encodeURIComponent(txnId)}`;
    const result = await this.request('PUT', path, { msgtype: 'm.text', body });
    return result.event_id;
  }

  typing(roomId: string, typing: boolean): Promise<unknown> {
    const userId = this.session?.userId ?? '';
    const body = typing ? { typing: true, timeout: 30_000 } : { typing: false };
    return this.request('PUT', `${CLIENT}/rooms/${encodeURIComponent(roomId)}/typing/${encodeURIComponent(userId)}`, body);
  }

  readReceipt(roomId: string, eventId: string): Promise<unknown> {
    return this.request('POST', `${CLIENT}/rooms/${encodeURIComponent(roomId)}/receipt/m.read/${encodeURIComponent(eventId)}`, {});
  }

  messages(roomId: string, from: string, limit = 30): Promise<{ chunk: MatrixEvent[]; end?: string; state?: MatrixEvent[] }> {
    const query = new URLSearchParams({ dir: 'b', from, limit: String(limit) });
    return this.request('GET', `${CLIENT}/rooms/${encodeURIComponent(roomId)}/messages?${query}`);
  }
}
