import { LoggerLevel, Tracing } from '@matrix-org/matrix-sdk-crypto-wasm';
import * as sdk from 'matrix-js-sdk';
import { logger, type Logger } from 'matrix-js-sdk/lib/logger.js';
import type { Account } from './harness.ts';

// The SDK logs a great deal; tests want quiet.
(logger as unknown as { setLevel(level: string): void }).setLevel('silent');
// Child loggers (the Rust crypto glue makes some) do not inherit that level: give clients a silent one.
const silentLogger: Logger = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, getChild: () => silentLogger };

export interface StartOptions {
  /** Start the Rust crypto stack (in memory) before syncing. */
  crypto?: boolean;
  /** A fetch the client sends its requests through (to observe them). */
  fetchFn?: typeof fetch;
}

/** Starts a matrix-js-sdk client for an account and waits for its first sync. */
export async function startClient(baseUrl: string, account: Account, options: StartOptions = {}): Promise<sdk.MatrixClient> {
  const client = sdk.createClient({
    baseUrl,
    userId: account.userId,
    accessToken: account.accessToken,
    deviceId: account.deviceId,
    logger: silentLogger,
    ...(options.fetchFn ? { fetchFn: options.fetchFn } : {}),
  });
  if (options.crypto) {
    await client.initRustCrypto({ useIndexedDB: false });
    // initRustCrypto turns the Rust crypto's tracing on at debug level; errors are enough here.
    new Tracing(LoggerLevel.Error).turnOn();
  }
  const ready = new Promise<void>((resolve, reject) => {
    const onSync = (state: sdk.SyncState) => {
      if (state === sdk.SyncState.Prepared || state === sdk.SyncState.Syncing) {
        client.off(sdk.ClientEvent.Sync, onSync);
        resolve();
      } else if (state === sdk.SyncState.Error) {
        reject(new Error('initial sync failed'));
      }
    };
    client.on(sdk.ClientEvent.Sync, onSync);
  });
  await client.startClient({ initialSyncLimit: 20 });
  await ready;
  return client;
}

/** Resolves when `predicate` holds, checking on every client event, or rejects after a timeout. */
export function waitFor<T>(client: sdk.MatrixClient, predicate: () => T | undefined | false, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const value = predicate();
      if (value) {
        cleanup();
        resolve(value);
      }
    };
    const events = [sdk.ClientEvent.Sync, sdk.RoomEvent.Timeline, sdk.RoomMemberEvent.Membership, sdk.RoomMemberEvent.Typing, sdk.RoomEvent.Receipt, sdk.RoomEvent.MyMembership, sdk.RoomEvent.Redaction, sdk.RoomStateEvent.Events, sdk.RoomMemberEvent.Name] as const;
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`timed out waiting for ${what}`));
    }, timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      for (const e of events) (client as unknown as NodeJS.EventEmitter).off(e, check);
    };
    for (const e of events) (client as unknown as NodeJS.EventEmitter).on(e, check);
    check();
  });
}

export { sdk };
