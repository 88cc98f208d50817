import { createHomeserver, type Homeserver, type HomeserverOptions } from '../../src/homeserver.ts';
import { startHttpServer } from '../../src/node/http-server.ts';
import { validateClientRequest, validateClientResponse } from '../support/spec-schema.ts';
import { openTestDatabase } from '../support/test-database.ts';

export interface TestServer {
  url: string;
  homeserver: Homeserver;
  close(): Promise<void>;
}

/** A homeserver on 127.0.0.1 over real HTTP, with an in-memory database and a random seed unless given others. */
export async function startTestServer(options: Partial<HomeserverOptions> = {}): Promise<TestServer> {
  const { database, cleanup } = options.database ? { database: options.database, cleanup: undefined } : await openTestDatabase();
  const homeserver = await createHomeserver({
    database,
    seed: options.seed ?? crypto.getRandomValues(new Uint8Array(32)),
    rateLimits: false,
    passwordIterations: 1000,
    log: (message, error) => console.error(message, error),
    ...options,
  });
  const http = await startHttpServer(homeserver.fetch);
  return {
    url: http.url,
    homeserver,
    close: async () => {
      await http.close();
      await homeserver.close();
      await cleanup?.();
    },
  };
}

/**
 * Resolves once one more /sync long-poll than now is listening on the server. Call it
 * before starting the long-poll; then a change made once it resolves wakes that poll.
 */
export function nextLongPoll(server: TestServer): Promise<void> {
  const notifier = server.homeserver.services.sync.notifier;
  return notifier.untilWaiting(notifier.waiting + 1);
}

/**
 * A long-poll timeout beyond any test's own (60 s) and within the server's cap (5 min): such a poll
 * ends in time only if what the test does wakes it, so no test need bound its duration by the clock.
 */
export const UNTIL_WOKEN_MS = 300_000;

export interface Account {
  userId: string;
  accessToken: string;
  deviceId: string;
}

/**
 * Raw HTTP against a test server, returning status and parsed body. Requests and
 * responses are checked against the spec's OpenAPI definitions unless `unchecked`
 * (for paths the spec does not define, or bodies that are wrong on purpose). A server with a
 * `fetch` of its own is asked through it (an HTTPS host under a test CA: test/support/https-fetch.ts).
 */
export async function api(
  server: { url: string; fetch?: typeof fetch },
  method: string,
  path: string,
  options: { token?: string; body?: unknown; rawBody?: string | Uint8Array<ArrayBuffer>; headers?: Record<string, string>; unchecked?: boolean } = {},
): Promise<{ status: number; body: any; headers: Headers }> {
  if (!options.unchecked && options.body !== undefined) validateClientRequest(method, path, options.body);
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (options.token) headers['authorization'] = `Bearer ${options.token}`;
  let body: string | Uint8Array<ArrayBuffer> | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] = 'application/json';
  }
  const response = await (server.fetch ?? fetch)(server.url + path, { method, headers, body });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: leave as text
  }
  if (!options.unchecked) validateClientResponse(method, path, response.status, parsed);
  return { status: response.status, body: parsed, headers: response.headers };
}

export async function register(server: { url: string; fetch?: typeof fetch }, username: string, password = 'correct horse battery staple'): Promise<Account> {
  const { status, body } = await api(server, 'POST', '/_matrix/client/v3/register', {
    body: { username, password, auth: { type: 'm.login.dummy' } },
  });
  if (status !== 200) throw new Error(`register ${username} failed: ${status} ${JSON.stringify(body)}`);
  return { userId: body.user_id, accessToken: body.access_token, deviceId: body.device_id };
}
