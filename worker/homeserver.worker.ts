/// <reference lib="webworker" />
/**
 * The homeserver core, in a Web Worker owned by the leader tab (ARCHITECTURE.md:
 * the shape). The page drives it with comlink; the service worker reaches its
 * client API through ports the page hands out (connect), speaking protocol.ts.
 */
import * as Comlink from 'comlink';
import { createHomeserver, type Homeserver } from '../src/homeserver.ts';
import { answerWire, pageTransport, type PageSend } from './federation-bridge.ts';
import { serverNameFromSeed } from '../src/crypto/identity.ts';
import { loadOrCreateSeed } from './identity.ts';
import { openIdbMediaStore } from './media-idb.ts';
import { CanvasThumbnailer } from './media-thumbnailer.ts';
import { openHomeserverDatabase } from './open-database.ts';
import { exportCore, IMPORT_INTERRUPTED, importIntoOrigin, recoverInterruptedImport } from './portable.ts';
import type { ArchiveProgress } from '../src/portable/index.ts';
import type { Database } from '../src/storage/database.ts';
import type { IdbMediaStore } from './media-idb.ts';
import type { WireRequest, WireResponse } from './protocol.ts';
import { servePort, type ServedPort } from './serve-port.ts';

/**
 * Long-polls must settle before the service worker is cut off: Chromium stops a
 * service worker whose fetch event has run 5 minutes. Clients usually ask for
 * 30 s; anything longer is trimmed to this, so a long-poll always ends (empty)
 * on its own well inside that window and the client simply polls again.
 */
export const SYNC_TIMEOUT_CAP_MS = 60_000;

export interface CoreConfig {
  /** Off for benchmarks that load thousands of events through the API. */
  rateLimits?: false;
}

export interface CoreInfo {
  /** Random per run of the core: the service worker tells a restarted core from the one it knew. */
  coreId: string;
  serverName: string;
  /** Time to open storage and start the homeserver, in milliseconds. */
  startMs: number;
  /** Set when an import had stopped midway and what it wrote was removed at this start: the sentence for the import card. */
  interruptedImport?: string;
}

const coreId = crypto.randomUUID();

// Ports may be connected before start() is called: their requests wait for it.
let startCalled = false;
let startWith: (config: CoreConfig) => void;
const startRequested = new Promise<CoreConfig>((resolve) => (startWith = resolve));
const started: Promise<Started> = startRequested.then(start);

interface Started {
  homeserver: Homeserver;
  info: CoreInfo;
  seed: Uint8Array;
  database: Database;
  mediaStore: IdbMediaStore;
}

// Outbound federation goes through the page's libp2p node; unreachable until the page attaches it.
const federation = pageTransport();

const served: ServedPort[] = [];
const SUPERSEDED_PORT_GRACE_MS = 60_000;

const log = (message: string, error?: unknown) => console.error(`hearth core: ${message}`, error ?? '');

async function start(config: CoreConfig): Promise<Started> {
  const t0 = performance.now();
  const seed = await loadOrCreateSeed();
  // Before the database opens: an import that stopped midway left part of another homeserver here (worker/portable.ts).
  const interruptedImport = await recoverInterruptedImport(await serverNameFromSeed(seed));
  const [database, mediaStore] = await Promise.all([openHomeserverDatabase(), openIdbMediaStore()]);
  const homeserver = await createHomeserver({
    database,
    seed,
    maxSyncTimeoutMs: SYNC_TIMEOUT_CAP_MS,
    ...(config.rateLimits === false ? { rateLimits: false as const } : {}),
    log,
    federation: { transport: federation.transport },
    // Media bytes as IndexedDB blobs of their own (hearth-media), not in the SQLite image.
    media: { store: mediaStore, thumbnailer: new CanvasThumbnailer() },
  });
  await homeserver.start();
  return { homeserver, seed, database, mediaStore, info: { coreId, serverName: homeserver.serverName, startMs: performance.now() - t0, ...(interruptedImport ? { interruptedImport } : {}) } };
}

const api = {
  coreId,

  /** Opens storage and starts the homeserver; later calls return the same run. */
  async start(config: CoreConfig = {}): Promise<CoreInfo> {
    startCalled = true;
    startWith(config);
    return (await started).info;
  },

  /**
   * Serves the client API on a port (for the service worker); requests wait for
   * start(). A new port means the service worker restarted (or asked twice): the
   * older ones are closed once idle, so ports to stopped service workers do not
   * pile up. Not at once: a service worker that has not received the new port
   * yet may still send on an old one.
   */
  connect(port: MessagePort): void {
    for (const older of served.splice(0)) setTimeout(() => older.closeWhenIdle(), SUPERSEDED_PORT_GRACE_MS);
    served.push(servePort(port, async (request) => (await started).homeserver.fetch(request), log));
  },

  /**
   * The identity seed, for the page's libp2p node: its peer ID is the server's key, and
   * the Noise handshake that proves it needs the private key in the page. That gives
   * the page nothing new: the seed sits in this origin's IndexedDB (identity.ts), which
   * the page, same-origin code that starts this Worker, can read already.
   */
  async p2pSeed(): Promise<Uint8Array> {
    return new Uint8Array((await started).seed);
  },

  /** An inbound server-server request from the page's node, authenticated by its libp2p peer. */
  async federationFetch(request: WireRequest, remoteServerName: string): Promise<WireResponse> {
    return answerWire((await started).homeserver.federation.fetch, request, remoteServerName);
  },

  /** The page's node connected to (or learnt the address of) a server: wake its queue, resync its device lists. */
  async peerConnected(serverName: string): Promise<void> {
    (await started).homeserver.federation.peerConnected(serverName);
  },

  /** Outbound federation goes to the page's node through `send` (a comlink proxy); undefined detaches it. */
  attachFederation(send: PageSend | undefined): void {
    federation.attach(send);
  },

  /**
   * An upload from the page, through the homeserver's own POST /_matrix/media/v3/upload (the same auth,
   * limits and errors), its body a stream that asks the page for each chunk only when the route has read
   * the one before (no buffer of its own: `highWaterMark` 0), so how far the page has handed it is how far
   * the upload has got. Where a request body cannot be a stream (Firefox), the chunks are gathered first,
   * up to one past the upload limit, so the route still answers a file too big with its 413 and this
   * Worker never holds more than the limit. Answers the route's status and JSON body.
   */
  async uploadMedia(upload: { accessToken: string; contentType: string; fileName?: string }, next: () => Promise<Uint8Array | undefined>): Promise<{ status: number; body: Record<string, unknown> }> {
    const { homeserver } = await started;
    const url = new URL('/_matrix/media/v3/upload', self.location.origin);
    if (upload.fileName) url.searchParams.set('filename', upload.fileName);
    const headers = { authorization: `Bearer ${upload.accessToken}`, 'content-type': upload.contentType };
    try {
      const init: RequestInit & { duplex?: 'half' } = REQUEST_BODY_STREAMS
        ? { method: 'POST', headers, body: pulledOnDemand(next), duplex: 'half' }
        : { method: 'POST', headers, body: await gathered(next, homeserver.services.media.config.maxUploadBytes) };
      const response = await homeserver.fetch(new Request(url, init));
      return { status: response.status, body: (await response.json().catch(() => ({}))) as Record<string, unknown> };
    } finally {
      (next as unknown as Comlink.Remote<unknown>)[Comlink.releaseProxy]();
    }
  },

  async close(): Promise<void> {
    if (startCalled) await (await started).homeserver.close();
  },

  /** The whole homeserver as one encrypted file (worker/portable.ts); it keeps serving meanwhile. */
  async exportArchive(passphrase: string, onProgress?: (progress: ArchiveProgress) => void): Promise<Blob> {
    const { seed, homeserver, database, mediaStore } = await started;
    return exportCore({ seed, serverName: homeserver.serverName, database, media: mediaStore }, passphrase, onProgress);
  },

  /**
   * Replaces this (empty) homeserver with an archive's, once the whole file has been checked;
   * the core stops, and the page must reload to start the imported one.
   */
  async importArchive(file: Blob, passphrase: string, onProgress?: (progress: ArchiveProgress) => void): Promise<{ serverName: string }> {
    const { homeserver, mediaStore } = await started;
    let writing = false;
    try {
      const manifest = await importIntoOrigin(file, passphrase, {
        anyAccount: () => homeserver.services.users.anyAccount(),
        stop: async () => {
          writing = true;
          await homeserver.close();
          mediaStore.close();
        },
      }, onProgress);
      return { serverName: manifest.serverName };
    } catch (error) {
      if (!writing) throw error;
      // Stopped after it began writing (the storage full, most likely): this core is closed, and the
      // next start removes what was written. The page reloads for that (Comlink passes the error's name).
      log('the import stopped after it began writing', error);
      throw Object.assign(new Error(`The import stopped before it finished: ${error instanceof Error ? error.message : String(error)}`), { name: IMPORT_INTERRUPTED });
    }
  },

  /** Stops the core and lets go of its storage, so the page can delete it (a reset). */
  async stopForReset(): Promise<void> {
    if (!startCalled) return;
    const { homeserver, mediaStore } = await started;
    await homeserver.close();
    mediaStore.close();
  },
};

/**
 * Whether a ReadableStream can be a request body here. Firefox 153's cannot: it takes the stream for
 * text and sends "[object ReadableStream]", silently. So it is asked, not assumed: an engine that
 * streams request bodies reads the `duplex` option, and gives a stream no Content-Type (text gets one).
 */
const REQUEST_BODY_STREAMS = (() => {
  let duplexRead = false;
  const init = {
    method: 'POST',
    body: new ReadableStream(),
    get duplex() {
      duplexRead = true;
      return 'half';
    },
  };
  const typed = new Request('http://streams.invalid/', init as RequestInit).headers.has('content-type');
  return duplexRead && !typed;
})();

/** A body stream that asks the page for each chunk only when the reader wants it. */
function pulledOnDemand(next: () => Promise<Uint8Array | undefined>): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const chunk = await next();
        if (chunk) controller.enqueue(chunk);
        else controller.close();
      },
    },
    { highWaterMark: 0 },
  );
}

/** Every chunk the page hands over, as one Blob, stopping once past `limit` (the route then refuses it by its size). */
async function gathered(next: () => Promise<Uint8Array | undefined>, limit: number): Promise<Blob> {
  const chunks: Uint8Array<ArrayBuffer>[] = [];
  let size = 0;
  for (let chunk = await next(); chunk; chunk = size > limit ? undefined : await next()) {
    chunks.push(chunk as Uint8Array<ArrayBuffer>);
    size += chunk.byteLength;
  }
  return new Blob(chunks);
}

export type CoreApi = typeof api;

Comlink.expose(api);
