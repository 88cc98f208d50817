/**
 * What the page needs from whatever hosts it: the one way src/ui reaches its host.
 * The browser host (worker/page-ui-host.ts) implements it and hands it to `startPage`
 * (main.ts); nothing under src/ui imports worker/.
 */

/** Where the homeserver's core runs, as this tab sees it. */
export type CoreState =
  /** Not known yet: electing, or a follower waiting to hear from the leader. */
  | 'unknown'
  /** This tab runs the core and it is starting. */
  | 'starting'
  /** This tab runs the core and it is serving. */
  | 'running-here'
  /** Another tab runs the core; requests go to it. */
  | 'running-elsewhere'
  | 'failed';

/** This tab's libp2p node: `elsewhere` when another tab hosts the homeserver (and the node), `none` before any start. */
export type NodeState = 'starting' | 'running' | 'failed' | 'elsewhere' | 'none';

export interface HostStatus {
  core: CoreState;
  /** Why the core failed, in words. */
  error?: string;
  /** The homeserver's name (its ed25519 public key), once known. */
  serverName?: string;
  node: NodeState;
  /** Why federation is paused, in words: another copy of this homeserver is online (move, don't copy). */
  federationPaused?: string;
  /** Whether this browser has WebRTC; without it (WebKitGTK as Debian builds it) other browsers are reached only through a relay peer. */
  webrtc: boolean;
}

/** A peer this tab's node is connected to, and how it is reached. */
export interface PeerLink {
  server_name: string;
  via: 'direct' | 'relayed';
  /** Its libp2p peer ID, to tell which of the bootstrap addresses it is. */
  peer_id?: string;
  /** The addresses of the connections to it (what they run over: WebSockets, WebRTC, a relay). */
  multiaddrs?: readonly string[];
}

/**
 * Bootstrap peers the person added in the peers panel, kept by the host for every tab of
 * the origin; every later node dials them at start.
 */
export interface AddedPeers {
  list(): string[];
  /** Checks what the person pasted and keeps it; throws an Error whose message says what to fix. Returns the address as kept. */
  add(text: string): string;
  remove(address: string): void;
  /** Runs `listener` when another tab changed the list (the host dials what is new if this tab runs the node). */
  onChange(listener: () => void): void;
}

/**
 * Keep, move and reset the homeserver (issue 22): the whole homeserver as one encrypted file,
 * made from the running core or restored into an empty one. Only the tab that runs the core can;
 * elsewhere each call rejects with an Error that says so.
 */
export interface KeepHost {
  /** Whether the browser keeps this origin's data under storage pressure; undefined where it does not say. */
  persisted(): Promise<boolean | undefined>;
  /** The archive as a Blob; `onProgress` gets the fraction done (0 to 1). */
  exportHomeserver(passphrase: string, onProgress: (fraction: number) => void): Promise<Blob>;
  /**
   * Checks the whole file, then replaces this homeserver (which must hold no account) with the
   * archive's, and reloads the page; rejects with a sentence (wrong passphrase, damaged, not empty…).
   */
  importHomeserver(file: Blob, passphrase: string, onProgress: (fraction: number) => void): Promise<void>;
  /** When this start removed what an import left as it stopped midway: a sentence saying so (the import card shows it). */
  interruptedImport(): string | undefined;
  /** Deletes everything this origin stores (the homeserver, sessions, keys) and reloads the page. */
  resetHomeserver(): Promise<void>;
}

/** A file for `PageHost.uploadMedia`: the bytes, and what POST /_matrix/media/v3/upload would be sent with. */
export interface MediaUpload {
  data: Blob;
  accessToken: string;
  contentType: string;
  fileName?: string;
}

/** The media API's answer to an upload, as its HTTP response would carry it: `{ content_uri }`, or a Matrix error body. */
export interface MediaUploadResult {
  status: number;
  body: Record<string, unknown>;
}

export interface PageHost {
  /** The base URL of the homeserver's client-server API (this page's origin, through the service worker). */
  readonly homeserverUrl: string;
  readonly status: HostStatus;
  /** Calls `listener` now and whenever the status or this tab's peers change. */
  subscribe(listener: (status: HostStatus) => void): () => void;
  /** The peers this tab's node is connected to (none when this tab runs no node). */
  peers(): readonly PeerLink[];
  /** The bootstrap addresses this tab's node dials (the site's hearth-config.json, then the peers added here); none when it runs no node. */
  bootstrapPeers?(): readonly string[];
  /** Dials an added peer now, resolving with its server name; undefined when this tab runs no node. */
  dial(address: string): Promise<string> | undefined;
  readonly addedPeers: AddedPeers;
  /** What this origin stores in the browser, and its quota; undefined where the browser does not say. */
  storageEstimate(): Promise<{ usage: number; quota: number | undefined } | undefined>;
  /** Asks the browser not to evict this origin's data under storage pressure (after an account is made, and from the storage panel); resolves with its answer. */
  persistStorage(): Promise<boolean | undefined>;
  readonly keep: KeepHost;
  /**
   * Uploads to the homeserver at `homeserverUrl` straight to its core, through the same media API as
   * POST /_matrix/media/v3/upload (auth, rate limit, type, size limit, quota; the same errors), handing it
   * the bytes a chunk at a time: `onProgress` gets the bytes the core has taken so far (the browser reports
   * no upload progress for a request its service worker answers). Undefined when this tab cannot reach its
   * core so (another tab runs it): upload over HTTP then.
   */
  uploadMedia(upload: MediaUpload, onProgress: (loaded: number) => void): Promise<MediaUploadResult> | undefined;
}
