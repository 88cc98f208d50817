/**
 * Sessions on matrix-js-sdk: the one kept in localStorage (session.ts), account creation and
 * sign-in, and the SDK client each session runs (sdk-client.ts) with its encryption (encryption.ts).
 */
import { createClient, MatrixScheduler, type MatrixError } from 'matrix-js-sdk';
import { logger } from 'matrix-js-sdk/lib/logger.js';
import { MatrixApiError, type ChatAccounts, type ChatClient, type Session } from '../chat.ts';
import { chatCall } from './convert.ts';
import { letCryptoStoreBeDeleted } from './crypto-store.ts';
import { Encryption } from './encryption.ts';
import type { HostUpload } from './media.ts';
import { SdkChatClient, type ClientOptions } from './sdk-client.ts';
import { loadSession, saveSession, SESSION_KEY } from './session.ts';

const DEVICE_NAME = 'Hearth built-in client';

// The SDK logs every request at debug level: warnings are what a person debugging needs.
(logger as unknown as { setLevel(level: string): void }).setLevel('warn');

letCryptoStoreBeDeleted();

/** Through `globalThis.fetch` at each call, so what the page (or a test) puts there is used. */
const fetchFn: typeof fetch = (input, init) => globalThis.fetch(input, init);

/**
 * Sends are retried by the SDK only when rate-limited (after the time the homeserver asks); any
 * other failure shows at once as "not sent", with Retry, as the page did before.
 */
function retryRateLimitedOnly(...args: Parameters<typeof MatrixScheduler.RETRY_BACKOFF_RATELIMIT>): number {
  const [, attempts, error] = args;
  return (error as MatrixError | undefined)?.errcode === 'M_LIMIT_EXCEEDED' && attempts < 4 ? MatrixScheduler.RETRY_BACKOFF_RATELIMIT(...args) : -1;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Sessions of the homeserver at `baseUrl`: the one kept in localStorage, and new ones. */
export class SdkAccounts implements ChatAccounts {
  constructor(
    private readonly baseUrl: string,
    /** The page host's upload to its own core, when `baseUrl` is the host's homeserver; uploads go over HTTP without it. */
    private readonly hostUpload?: HostUpload,
  ) {}

  private anonymous() {
    return createClient({ baseUrl: this.baseUrl, fetchFn, scheduler: undefined });
  }

  /** The first answer from /versions means the service worker reaches a running core. */
  async waitForHomeserver(): Promise<void> {
    const client = this.anonymous();
    for (let attempt = 0; ; attempt++) {
      try {
        await client.getVersions();
        return;
      } catch {
        await sleep(Math.min(2000, 100 * 2 ** attempt));
      }
    }
  }

  async resume(): Promise<ChatClient | undefined> {
    const session = loadSession();
    if (!session) return undefined;
    const client = this.clientFor(session, { fresh: false });
    try {
      await client.checkSession();
    } catch (error) {
      // Only a refused token ends the session; a homeserver that does not answer keeps it.
      if (error instanceof MatrixApiError && error.status === 401) {
        saveSession(undefined);
        return undefined;
      }
    }
    return client;
  }

  async register(username: string, password: string): Promise<ChatClient> {
    const result = await chatCall(() => this.anonymous().registerRequest({ username, password, auth: { type: 'm.login.dummy' }, initial_device_display_name: DEVICE_NAME }));
    return this.signedIn({ userId: result.user_id, accessToken: result.access_token!, deviceId: result.device_id! }, { fresh: true, newAccountPassword: password });
  }

  async login(username: string, password: string): Promise<ChatClient> {
    const result = await chatCall(() => this.anonymous().loginRequest({ type: 'm.login.password', identifier: { type: 'm.id.user', user: username }, password, initial_device_display_name: DEVICE_NAME }));
    return this.signedIn({ userId: result.user_id, accessToken: result.access_token, deviceId: result.device_id }, { fresh: true });
  }

  private signedIn(session: Session, options: ClientOptions): ChatClient {
    saveSession(session);
    return this.clientFor(session, options);
  }

  private clientFor(session: Session, options: ClientOptions): SdkChatClient {
    let client: SdkChatClient | undefined;
    const encryption = new Encryption(session.userId, () => client?.encryptionChanged(), options.newAccountPassword !== undefined);
    const sdk = createClient({
      baseUrl: this.baseUrl,
      userId: session.userId,
      accessToken: session.accessToken,
      deviceId: session.deviceId,
      fetchFn,
      scheduler: new MatrixScheduler(retryRateLimitedOnly),
      cryptoCallbacks: encryption.callbacks,
      // The page compares emoji (SAS); it has no camera for QR codes.
      verificationMethods: ['m.sas.v1'],
    });
    client = new SdkChatClient(sdk, encryption, options, this.hostUpload);
    return client;
  }

  onSessionChanged(listener: () => void): void {
    window.addEventListener('storage', (event) => {
      if (event.key === SESSION_KEY) listener();
    });
  }
}
