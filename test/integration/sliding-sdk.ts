import { LoggerLevel, Tracing } from '@matrix-org/matrix-sdk-crypto-wasm';
import { SlidingSync, type MSC3575List } from 'matrix-js-sdk/lib/sliding-sync.js';
import type { Account } from './harness.ts';
import { sdk, silentLogger } from './sdk.ts';

/** The lists Element Web's SlidingSyncManager asks for: the room list by recency, and one of invites. */
export const ROOM_LIST: MSC3575List = {
  ranges: [[0, 19]],
  timeline_limit: 1,
  required_state: [
    ['m.room.join_rules', ''], ['m.room.avatar', ''], ['m.room.tombstone', ''], ['m.room.encryption', ''],
    ['m.room.create', ''], ['m.room.name', ''], ['m.room.topic', ''], ['m.room.member', '$ME'],
  ],
  filters: { not_room_types: ['m.space'] },
};

/** Element Web's subscription for an open room: all state, 50 events. */
export const ROOM_SUBSCRIPTION = { required_state: [['*', '*']], timeline_limit: 50 };

export interface SlidingClient {
  client: sdk.MatrixClient;
  slidingSync: SlidingSync;
  /** The paths of every request the client made. */
  paths: string[];
  stop(): void;
}

/** A matrix-js-sdk client on SlidingSync + SlidingSyncSdk (as Element Web runs it), once its first answer is in. */
export async function startSlidingClient(baseUrl: string, account: Account, options: { crypto?: boolean; lists?: Record<string, MSC3575List> } = {}): Promise<SlidingClient> {
  const paths: string[] = [];
  const fetchFn: typeof fetch = (input, init) => {
    paths.push(new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url).pathname);
    return fetch(input, init);
  };
  const client = sdk.createClient({ baseUrl, userId: account.userId, accessToken: account.accessToken, deviceId: account.deviceId, logger: silentLogger, fetchFn });
  if (options.crypto) {
    await client.initRustCrypto({ useIndexedDB: false });
    new Tracing(LoggerLevel.Error).turnOn();
  }
  const lists = new Map(Object.entries(options.lists ?? { rooms: ROOM_LIST, invites: { ...ROOM_LIST, filters: { is_invite: true } } }));
  const slidingSync = new SlidingSync(baseUrl, lists, ROOM_SUBSCRIPTION, client, 10_000);
  const ready = new Promise<void>((resolve, reject) => {
    const onSync = (state: sdk.SyncState) => {
      if (state === sdk.SyncState.Syncing) {
        client.off(sdk.ClientEvent.Sync, onSync);
        resolve();
      } else if (state === sdk.SyncState.Error) reject(new Error('sliding sync failed'));
    };
    client.on(sdk.ClientEvent.Sync, onSync);
  });
  await client.startClient({ slidingSync });
  await ready;
  return { client, slidingSync, paths, stop: () => client.stopClient() };
}
