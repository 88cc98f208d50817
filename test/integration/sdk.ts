import { LoggerLevel, Tracing } from '@matrix-org/matrix-sdk-crypto-wasm';
import * as sdk from 'matrix-js-sdk';
import { CryptoEvent } from 'matrix-js-sdk/lib/crypto-api/index.js';
import { logger, type Logger } from 'matrix-js-sdk/lib/logger.js';
import type { Account } from './harness.ts';

// The SDK logs a great deal; tests want quiet.
(logger as unknown as { setLevel(level: string): void }).setLevel('silent');
// Child loggers (the Rust crypto glue makes some) do not inherit that level: give clients a silent one.
export const silentLogger: Logger = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, getChild: () => silentLogger };

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

/** Resolves when `check` (run on each of the client's events that may make it true, crypto's too; it may be async) holds. */
export function until(client: sdk.MatrixClient, check: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const events = [sdk.ClientEvent.Sync, sdk.RoomEvent.Timeline, sdk.MatrixEventEvent.Decrypted, sdk.RoomMemberEvent.Membership, sdk.RoomEvent.MyMembership, CryptoEvent.DevicesUpdated] as const;
  const emitter = client as unknown as NodeJS.EventEmitter;
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (error?: Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      for (const e of events) emitter.off(e, run);
      error ? reject(error) : resolve();
    };
    const run = () => {
      if (done) return;
      Promise.resolve(check()).then((ok) => ok && finish(), (error: Error) => finish(error));
    };
    const timer = setTimeout(() => finish(new Error(`timed out waiting for ${what}`)), timeoutMs);
    for (const e of events) emitter.on(e, run);
    run();
  });
}

/** The bodies of the encrypted messages a client has decrypted in a room's live timeline. */
export const decryptedBodies = (client: sdk.MatrixClient, roomId: string): string[] =>
  client.getRoom(roomId)?.getLiveTimeline().getEvents()
    .filter((e) => e.getType() === 'm.room.message' && e.isEncrypted() && !e.isDecryptionFailure())
    .map((e) => e.getContent()['body'] as string) ?? [];

/** The device IDs a client's crypto knows for a user, sorted. */
export async function knownDevices(client: sdk.MatrixClient, userId: string): Promise<string[]> {
  const devices = (await client.getCrypto()!.getUserDeviceInfo([userId])).get(userId);
  return [...(devices?.keys() ?? [])].sort();
}

/** An encrypted private room made by `inviter` (with `options` besides, a room version or `is_direct`), which `invitee` (on whichever server) is invited to and has joined; its ID. */
export async function startEncryptedRoom(inviter: sdk.MatrixClient, invitee: sdk.MatrixClient, options: Partial<sdk.ICreateRoomOpts> = {}): Promise<string> {
  const inviteeId = invitee.getUserId()!;
  const { room_id: roomId } = await inviter.createRoom({
    ...options,
    preset: sdk.Preset.PrivateChat,
    invite: [inviteeId],
    initial_state: [{ type: 'm.room.encryption', state_key: '', content: { algorithm: 'm.megolm.v1.aes-sha2' } }],
  });
  await until(invitee, () => invitee.getRoom(roomId)?.getMyMembership() === 'invite', `the invite of ${inviteeId}`);
  await invitee.joinRoom(roomId);
  await until(inviter, () => inviter.getRoom(roomId)?.getMember(inviteeId)?.membership === 'join', `${inviteeId}'s join seen by ${inviter.getUserId()}`);
  await until(invitee, () => invitee.getRoom(roomId)?.hasEncryptionStateEvent() ?? false, `the room encrypted for ${inviteeId}`);
  return roomId;
}

export { sdk };
