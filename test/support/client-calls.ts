// The client-server calls integration tests make again and again (create a room,
// join it, send, set and read state, /sync, /messages), each checked against the
// spec by `api()` and expecting 200, bound to a test server. A file's server is
// made in beforeAll, so the calls take a getter and look it up when they run.
import { expect } from 'vitest';
import { api, register, type Account } from '../integration/harness.ts';

export const V3 = '/_matrix/client/v3';
export const PASSWORD = 'correct horse battery staple';
export const enc = encodeURIComponent;

/** The bodies of the m.room.message events among `events`, in order. */
export const bodies = (events: any[]): string[] => events.filter((e) => e.type === 'm.room.message').map((e) => e.content.body);

type Query = Record<string, string | number | object>;
const queryString = (query: Query) =>
  new URLSearchParams(Object.entries(query).map(([k, v]) => [k, typeof v === 'object' ? JSON.stringify(v) : String(v)]));

// One count per test file (vitest gives each file its own module), so users of
// every clientCalls in a file get distinct names.
let users = 0;

export function clientCalls(server: () => { url: string }) {
  const newUser = (name: string): Promise<Account> => register(server(), `${name}${++users}`);
  const createRoom = async (account: Account, body: object = {}): Promise<string> => {
    const r = await api(server(), 'POST', `${V3}/createRoom`, { token: account.accessToken, body });
    expect(r.status).toBe(200);
    return r.body.room_id as string;
  };
  const join = async (account: Account, roomId: string): Promise<void> => {
    const r = await api(server(), 'POST', `${V3}/join/${enc(roomId)}`, { token: account.accessToken, body: {} });
    expect(r.status).toBe(200);
  };
  const leave = async (account: Account, roomId: string): Promise<void> => {
    const r = await api(server(), 'POST', `${V3}/rooms/${enc(roomId)}/leave`, { token: account.accessToken, body: {} });
    expect(r.status).toBe(200);
  };
  const send = async (account: Account, roomId: string, body: string): Promise<string> => {
    const r = await api(server(), 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/${enc(`t${Math.random()}`)}`, {
      token: account.accessToken, body: { msgtype: 'm.text', body },
    });
    expect(r.status).toBe(200);
    return r.body.event_id as string;
  };
  const putState = async (account: Account, roomId: string, type: string, key: string, content: object): Promise<string> => {
    const r = await api(server(), 'PUT', `${V3}/rooms/${enc(roomId)}/state/${enc(type)}/${enc(key)}`, { token: account.accessToken, body: content });
    expect(r.status).toBe(200);
    return r.body.event_id as string;
  };
  const getState = async (account: Account, roomId: string, type: string, key = ''): Promise<any> =>
    (await api(server(), 'GET', `${V3}/rooms/${enc(roomId)}/state/${enc(type)}/${enc(key)}`, { token: account.accessToken })).body;
  const sync = async (account: Account, query: Query = {}): Promise<any> => {
    const r = await api(server(), 'GET', `${V3}/sync?${queryString(query)}`, { token: account.accessToken });
    expect(r.status).toBe(200);
    return r.body;
  };
  const messages = async (account: Account, roomId: string, query: Query = {}): Promise<any> => {
    const r = await api(server(), 'GET', `${V3}/rooms/${enc(roomId)}/messages?${queryString(query)}`, { token: account.accessToken });
    expect(r.status).toBe(200);
    return r.body;
  };
  /** Every timeline event of a room a user can page back to, oldest first. */
  const history = async (account: Account, roomId: string): Promise<any[]> => {
    const events: any[] = [];
    let from: string | undefined;
    for (;;) {
      const page = await messages(account, roomId, { dir: 'b', limit: 50, ...(from ? { from } : {}) });
      events.unshift(...[...page.chunk].reverse());
      if (!page.end) return events;
      from = page.end;
    }
  };
  const passwordAuth = (account: Account, password = PASSWORD, session?: string) => ({
    type: 'm.login.password', identifier: { type: 'm.id.user', user: account.userId }, password, ...(session ? { session } : {}),
  });
  /** A second sign-in (a new device) of the account. */
  const login = async (account: Account): Promise<Account> => {
    const r = await api(server(), 'POST', `${V3}/login`, { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: account.userId }, password: PASSWORD } });
    expect(r.status).toBe(200);
    return { userId: account.userId, accessToken: r.body.access_token as string, deviceId: r.body.device_id as string };
  };
  return { newUser, createRoom, join, leave, send, putState, getState, sync, messages, history, passwordAuth, login };
}
