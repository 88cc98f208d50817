import { createClientApp } from './client/app.ts';
import { RateLimiter, type RateLimitConfig } from './http/rate-limit.ts';
import type { ClientServices } from './client/services.ts';
import { UserInteractiveAuth } from './client/uia.ts';
import { defaultEd25519Backend, type Ed25519Backend } from './crypto/ed25519.ts';
import { HEARTH_KEY_ID, serverNameFromPublicKey } from './crypto/identity.ts';
import { FederationClient } from './federation/client.ts';
import { toDeviceOutbox } from './federation/edus.ts';
import { Federation } from './federation/federation.ts';
import { OutgoingQueues, roomOutbox } from './federation/queue.ts';
import { Memberships } from './federation/memberships.ts';
import { federationSchema } from './federation/schema.ts';
import { KeyRing, type VerifyKeys } from './federation/keyring.ts';
import { SqlServerKeyStore, serverKeysSchema } from './federation/server-key-store.ts';
import { ServerKeys, transportKeyFetcher } from './federation/server-keys.ts';
import type { ServerSigningKeys } from './federation/signing-keys.ts';
import type { PushGateway } from './sync/push-delivery.ts';
import { FederationUnreachable, type FederationTransport } from './federation/transport.ts';
import { webRandomBytes, type RandomBytes } from './crypto/random.ts';
import { Keys, markRemoteListsStale } from './keys/keys.ts';
import { keysSchema } from './keys/schema.ts';
import { fileNameOf } from './media/http.ts';
import type { MediaConfig } from './media/config.ts';
import { Media } from './media/media.ts';
import { mediaSchema } from './media/schema.ts';
import { MemoryMediaStore, type MediaStore } from './media/store.ts';
import type { Thumbnailer } from './media/thumbnailer.ts';
import { KnownMailboxes } from './mailbox/known.ts';
import { MailboxHost } from './mailbox/host.ts';
import { Mailbox } from './mailbox/mailbox.ts';
import { MailNotices } from './mailbox/notices.ts';
import { MailSender } from './mailbox/sender.ts';
import { mailboxRoutes } from './mailbox/routes.ts';
import { mailboxSchema } from './mailbox/schema.ts';
import type { MailboxLimits } from './mailbox/store.ts';
import { updateMemberProfiles } from './rooms/profile-updates.ts';
import { roomsSchema } from './rooms/schema.ts';
import { Rooms } from './rooms/rooms.ts';
import { searchSchema } from './search/schema.ts';
import { SearchIndex } from './search/search-index.ts';
import { Search } from './search/search.ts';
import { hierarchyRoutes } from './federation/routes/hierarchy.ts';
import { SpaceHierarchy } from './spaces/hierarchy.ts';
import { remoteHierarchy } from './spaces/remote.ts';
import type { ComponentSchema, Database } from './storage/database.ts';
import { StreamChanges, streamSchema } from './storage/stream.ts';
import { syncSchema } from './sync/schema.ts';
import { Sync } from './sync/sync.ts';
import { RoomHistory, type Backfiller } from './sync/history.ts';
import { slidingSyncSchema } from './sliding-sync/schema.ts';
import { SlidingSync } from './sliding-sync/sliding-sync.ts';
import { usersSchema } from './users/schema.ts';
import { Users } from './users/users.ts';
import type { BackoffPolicy } from './util/backoff.ts';

/** Every component's schema, in dependency order: hosts open the database with these. */
export const homeserverSchemas: ComponentSchema[] = [streamSchema, usersSchema, roomsSchema, syncSchema, keysSchema, federationSchema, serverKeysSchema, mailboxSchema, mediaSchema, searchSchema, slidingSyncSchema];

/** A host with no federation transport (yet): every destination is unreachable. */
const NO_TRANSPORT: FederationTransport = {
  send: async (destination) => {
    throw new FederationUnreachable(destination, 'this homeserver has no federation transport');
  },
};

export interface HomeserverOptions {
  /** The database, opened by the host (with durable persistence) using homeserverSchemas. */
  database: Database;
  /** 32-byte ed25519 seed: the server's identity. */
  seed: Uint8Array;
  registrationEnabled?: boolean;
  /** Guest accounts (client-server §Guest access); off by default, and in the browser. */
  allowGuests?: boolean;
  /** Rate limits per device; false turns them off (test harnesses that register many users). */
  rateLimits?: RateLimitConfig | false;
  /** Rate limits per origin server on the federation API; false turns them off. */
  federationRateLimits?: RateLimitConfig | false;
  /** Cap on /sync long-polls. */
  maxSyncTimeoutMs?: number;
  passwordIterations?: number;
  now?: () => number;
  random?: RandomBytes;
  ed25519?: Ed25519Backend;
  log?: (message: string, error?: unknown) => void;
  /**
   * A server with a DNS name (the Node host's `--server-name`): that name, its own signing keys
   * (`ed25519:a_…`, kept by the host) and the notaries asked for the keys of a server that cannot
   * be reached (`--trusted-key-server`). Other servers' keys are then fetched and kept
   * (`ServerKeys`). Without it the name is the hex of the seed's public key, under `ed25519:hearth`,
   * and the seed signs.
   */
  dnsIdentity?: { serverName: string; signingKeys: ServerSigningKeys; trustedKeyServers?: string[] };
  /**
   * How this server reaches other servers; without it, nothing crosses servers. `backoff` is the
   * outgoing queues' after a failure, `deviceListBackoff` that of the resyncs of remote device lists.
   */
  federation?: { transport: FederationTransport; backoff?: BackoffPolicy; deviceListBackoff?: BackoffPolicy };
  /** How to reach push gateways (the Node host: fetch); without one, pushers are kept but nothing is pushed. */
  pushGateway?: PushGateway;
  /** Where /messages going back gets the history this server lacks: federation's /backfill unless given (a test's own room engine). */
  backfiller?: Backfiller;
  /** Hold mail for unreachable peers (a mailbox host: Node peers, never pages), within these limits (`true`: the defaults). */
  mailbox?: true | Partial<MailboxLimits>;
  /** Where media bytes go (default: memory), how thumbnails are made (default: none) and the limits. */
  media?: { store?: MediaStore; thumbnailer?: Thumbnailer; config?: Partial<MediaConfig> };
}

/** What a host hands the core for federation and is told by it. */
export interface HomeserverFederation {
  /**
   * An inbound server-server request; `remoteServerName` is the peer the transport authenticated
   * (the X-Matrix origin must be it), or undefined from a transport that authenticates no one
   * (HTTPS), where the X-Matrix signature with the origin's key is the whole authentication.
   */
  fetch(request: Request, remoteServerName: string | undefined): Promise<Response>;
  /** A peer connected or reconnected: its queue wakes at once. */
  peerConnected(serverName: string): void;
}

export interface Homeserver {
  readonly serverName: string;
  readonly keyId: string;
  readonly publicKey: Uint8Array;
  /** The client-server API: one Request → Response function. */
  fetch(request: Request): Promise<Response>;
  readonly services: ClientServices;
  readonly federation: HomeserverFederation & { readonly component: Federation };
  /** Store-and-forward: deposits for unreachable peers, collection, and (on mailbox hosts) the letters held. */
  readonly mailbox: Mailbox;
  /**
   * Before requests are served: removes media blobs no metadata names (a crash left them), and
   * builds search's first index if one is due. Then the mailbox (the mailboxes known, old opened
   * letters forgotten) and federation (the outgoing queues resumed, stale remote device lists
   * resynced) start. Hosts call it once, after createHomeserver.
   */
  start(): Promise<void>;
  close(): Promise<void>;
}

export const DEFAULT_RATE_LIMITS: RateLimitConfig = { perSecond: 10, burst: 50 };
/** Per origin server: well above what a busy peer's queue sends (a transaction carries up to 50 PDUs), far below a flood. */
export const DEFAULT_FEDERATION_RATE_LIMITS: RateLimitConfig = { perSecond: 50, burst: 250 };

/** A part of the homeserver that runs on its own between start and close. */
interface Lifecycle {
  start?(): Promise<void>;
  stop?(): void;
}

/** The composition root: wires the components together. Every host calls it. */
export async function createHomeserver(options: HomeserverOptions): Promise<Homeserver> {
  const now = options.now ?? Date.now;
  const random = options.random ?? webRandomBytes;
  const ed25519 = options.ed25519 ?? (await defaultEd25519Backend());
  const seedKey = await ed25519.keyFromSeed(options.seed);
  const named = options.dnsIdentity;
  const serverName = named?.serverName ?? serverNameFromPublicKey(seedKey.publicKey);
  const keyId = named?.signingKeys.keyId ?? HEARTH_KEY_ID;
  const signingKey = named?.signingKeys.signingKey ?? seedKey;
  const db = options.database;
  const transport = options.federation?.transport ?? NO_TRANSPORT;
  const log = options.log ?? (() => {});

  // Components report stream changes as they write; sync, which wakes the long-polls, takes them once made.
  const streamChanges = new StreamChanges();
  const { notify } = streamChanges;

  const users = new Users({ db, serverName, now, random, notify, passwordIterations: options.passwordIterations });
  // The room engine is given, at construction, the two hooks it calls inside each write: the
  // outgoing queues' outbox (local events leave in the write that made them, durable together)
  // and the search index (kept with the events, as durable as they are).
  const federationClient = new FederationClient(transport, serverName, keyId, signingKey);
  // Other servers' verify keys: the room engine checks remote events with them, the mailbox letters, federation requests.
  // A DNS-named server fetches other servers' keys (through the same transport) and is a notary; a hex name is its key.
  const keyRing: VerifyKeys = named
    ? new ServerKeys({ serverName, signingKeys: named.signingKeys, ed25519, store: new SqlServerKeyStore(db), fetcher: transportKeyFetcher(transport), trustedNotaries: named.trustedKeyServers, now, log })
    : new KeyRing(serverName, signingKey, now);
  // A transaction whose destination does not answer is left with the known mailboxes (Hearth peers only).
  const knownMailboxes = new KnownMailboxes(db, now);
  const mailSender = new MailSender({ serverName, keyId, signingKey, client: federationClient, known: knownMailboxes, log });
  const queues = new OutgoingQueues(db, federationClient, serverName, now, log, options.federation?.backoff, mailSender);
  // Holding mail for others (Node peers that are asked to); every server hears a mailbox's notice.
  const mailboxHost = options.mailbox === undefined ? undefined
    : new MailboxHost({ db, now, limits: options.mailbox === true ? {} : options.mailbox, ed25519, keyRing, client: federationClient });
  const mailNotices = new MailNotices();
  const searchIndex = new SearchIndex(db);
  const rooms = new Rooms({
    db,
    serverName,
    keyId,
    signingKey,
    ed25519,
    now,
    random,
    notify,
    resolveVerifyKey: (server, id, at) => keyRing.verifyKey(server, id, at),
    outbox: roomOutbox(queues),
    indexer: searchIndex,
    // A remote user we share no room with any more: their device list goes stale in that very write.
    unshared: markRemoteListsStale,
  });
  const sync = new Sync(db, rooms, users, now);
  streamChanges.deliverTo((change) => sync.notify(change));
  const search = new Search(rooms, searchIndex, sync.visibility, sync.formatter);
  // Keys sends to-device messages through federation's queues and fetches other servers' device lists with its client.
  const keys = new Keys({
    db, ed25519, notify, membership: rooms, users, log: options.log, now,
    deviceListBackoff: options.federation?.deviceListBackoff,
    toDeviceOutbox: toDeviceOutbox(queues),
    deviceListSource: federationClient,
  });
  users.addDeviceListener(keys);
  // A device's peeks go with it.
  users.addDeviceListener(sync.peeks);
  sync.addExtension(keys);
  // Remote media comes from its origin through the federation client.
  const media = new Media({
    db,
    store: options.media?.store ?? new MemoryMediaStore(),
    thumbnailer: options.media?.thumbnailer,
    serverName,
    random,
    now,
    config: options.media?.config,
    log,
    remote: {
      download: async (origin, mediaId, { timeoutMs }) => {
        const part = await federationClient.mediaDownload(origin, mediaId, { timeoutMs, maxBytes: media.config.remoteCacheBytes });
        const uploadName = fileNameOf(part.contentDisposition);
        return { bytes: part.bytes, contentType: part.contentType, ...(uploadName ? { uploadName } : {}) };
      },
      thumbnail: async (origin, mediaId, query) => {
        const part = await federationClient.mediaThumbnail(origin, mediaId, { ...query, maxBytes: media.config.maxThumbnailSourceBytes });
        return { bytes: part.bytes, contentType: part.contentType };
      },
    },
  });
  // One walker for both APIs; rooms held elsewhere are asked of the servers their m.space.child events name.
  const spaces = new SpaceHierarchy(rooms, remoteHierarchy(federationClient));
  const federation = new Federation({
    db,
    serverName,
    keyId,
    signingKey,
    ed25519,
    rooms,
    users,
    keys,
    sync,
    client: federationClient,
    queues,
    rateLimiter: options.federationRateLimits === false ? undefined : new RateLimiter(options.federationRateLimits ?? DEFAULT_FEDERATION_RATE_LIMITS, now),
    keyRing,
    media,
    now,
    log,
    routes: (app) => {
      mailboxRoutes(app, { host: mailboxHost, notices: mailNotices });
      hierarchyRoutes(app, spaces);
    },
  });
  // Collected letters go into federation's inbound path, as a transaction sent directly would.
  const mailbox = new Mailbox({
    db,
    serverName,
    ed25519,
    keyRing,
    client: federationClient,
    inbound: federation,
    known: knownMailboxes,
    sender: mailSender,
    notices: mailNotices,
    host: mailboxHost,
    now,
    log,
  });
  const history = new RoomHistory({ rooms, visibility: sync.visibility, formatter: sync.formatter, currentToken: () => sync.currentToken(), backfiller: options.backfiller ?? federation });
  if (options.pushGateway) await sync.deliverPushes(options.pushGateway, log);
  const memberships = new Memberships(rooms, users, federation);
  // A profile change is carried into the user's member events, through the memberships component.
  users.onProfileChange((userId) => updateMemberProfiles(rooms, userId, (roomId) => memberships.sendMembership(userId, roomId, userId, 'join')));
  // A deactivated account leaves its rooms and declines its invites before it is signed out.
  users.onDeactivate((userId) => memberships.leaveAll(userId));

  const slidingSync = new SlidingSync({ db, rooms, users, keys, sync, now });
  // A device's sliding sync connections go in the write that removes it.
  users.addDeviceListener(slidingSync);
  const services: ClientServices = {
    config: {
      registrationEnabled: options.registrationEnabled ?? true,
      guestsEnabled: options.allowGuests ?? false,
      maxSyncTimeoutMs: options.maxSyncTimeoutMs ?? 5 * 60 * 1000,
    },
    users,
    rooms,
    sync,
    history,
    slidingSync,
    keys,
    media,
    federation,
    memberships,
    spaces,
    search,
    uia: new UserInteractiveAuth(random, now),
    rateLimiter: options.rateLimits === false ? undefined : new RateLimiter(options.rateLimits ?? DEFAULT_RATE_LIMITS, now),
    random,
    now,
  };
  const app = createClientApp(services, options.log);

  // What runs beyond answering requests, started in this order once the host is ready and stopped in reverse.
  const lifecycle: Lifecycle[] = [
    // Before requests are served: a blob no metadata names was left by a crash.
    { start: () => media.sweepOrphans().then(() => undefined, (error: unknown) => log('media: the orphan sweep failed', error)) },
    // Events stored before search existed, indexed through the room engine's API (once; resumed if stopped).
    { start: () => searchIndex.buildFirstIndex(rooms) },
    mailbox,
    federation,
    sync,
  ];

  return {
    serverName,
    keyId,
    publicKey: signingKey.publicKey,
    fetch: async (request) => app.fetch(request),
    services,
    federation: {
      component: federation,
      fetch: (request, remoteServerName) => federation.fetch(request, remoteServerName),
      peerConnected: (name) => {
        federation.peerConnected(name);
        // Collect our mail if it is a mailbox (a peer that is not says so once, and is not asked again).
        mailbox.peerConnected(name);
      },
    },
    mailbox,
    start: async () => {
      for (const part of lifecycle) await part.start?.();
    },
    close: async () => {
      for (const part of [...lifecycle].reverse()) part.stop?.();
      await db.close();
    },
  };
}
