/**
 * The browser host's side of the page's host interface (`PageHost`, src/ui/host.ts): what
 * the built-in client may know of the service worker, the leader election, the core and the
 * leader's libp2p node, and nothing more. `worker/page.ts` creates it and hands it to the page.
 */
import * as Comlink from 'comlink';
import type { ArchiveProgress } from '../src/portable/index.ts';
import { twinSentence } from '../src/p2p/twin.ts';
import type { AddedPeers, HostStatus, KeepHost, MediaUpload, MediaUploadResult, NodeState, PageHost, PeerLink } from '../src/ui/host.ts';
import { BOOTSTRAP_PEERS_KEY, checkBootstrapAddress, loadAddedBootstrap, saveAddedBootstrap } from './bootstrap-peers.ts';
import type { BrowserHost } from './page-host.ts';

/** What the page hands the core at a time when it uploads: the core asks for the next once it has read this one. */
const UPLOAD_CHUNK_BYTES = 256 * 1024;

export class BrowserPageHost implements PageHost {
  readonly homeserverUrl = location.origin;
  readonly addedPeers: AddedPeers;
  private readonly listeners = new Set<(status: HostStatus) => void>();
  private readonly addedListeners = new Set<() => void>();

  constructor(private readonly host: BrowserHost) {
    host.subscribe(() => this.changed());
    this.addedPeers = {
      list: loadAddedBootstrap,
      add: (text) => {
        const address = checkBootstrapAddress(text);
        const added = loadAddedBootstrap();
        if (!added.includes(address)) saveAddedBootstrap([...added, address]);
        return address;
      },
      remove: (address) => saveAddedBootstrap(loadAddedBootstrap().filter((a) => a !== address)),
      onChange: (listener) => void this.addedListeners.add(listener),
    };
    // Another tab added or removed a peer: if this tab runs the node, dial what is new; the panel shows the list.
    let known = new Set(loadAddedBootstrap());
    window.addEventListener('storage', (event) => {
      if (event.key !== BOOTSTRAP_PEERS_KEY && event.key !== null) return;
      const now = loadAddedBootstrap();
      for (const address of now) {
        if (!known.has(address)) this.host.p2p?.dial(address).catch((error) => console.warn(`hearth: could not dial ${address}`, error));
      }
      known = new Set(now);
      for (const listener of this.addedListeners) listener();
    });
  }

  get status(): HostStatus {
    const { core, error, serverName } = this.host.state;
    const twin = this.host.p2p?.node.status().twin;
    return { core, error, serverName, node: this.nodeState(), webrtc: typeof RTCPeerConnection === 'function', ...(twin ? { federationPaused: twinSentence(twin) } : {}) };
  }

  /**
   * The leader's node is starting, running or failed to start. Kept on the body as well
   * (`data-p2p`), where tests read it.
   */
  setNodeState(state: 'starting' | 'running' | 'failed'): void {
    document.body.dataset.p2p = state;
    this.changed();
  }

  private nodeState(): NodeState {
    const state = document.body.dataset.p2p;
    if (state === 'starting' || state === 'running' || state === 'failed') return state;
    return this.host.state.role === 'follower' ? 'elsewhere' : 'none';
  }

  subscribe(listener: (status: HostStatus) => void): () => void {
    this.listeners.add(listener);
    listener(this.status);
    return () => this.listeners.delete(listener);
  }

  private changed(): void {
    const status = this.status;
    for (const listener of this.listeners) listener(status);
  }

  peers(): readonly PeerLink[] {
    return this.host.p2p?.node.peers() ?? [];
  }

  bootstrapPeers(): readonly string[] {
    return this.host.p2p?.bootstrap ?? [];
  }

  dial(address: string): Promise<string> | undefined {
    return this.host.p2p?.dial(address);
  }

  async storageEstimate(): Promise<{ usage: number; quota: number | undefined } | undefined> {
    const estimate = await navigator.storage?.estimate?.().catch(() => undefined);
    return estimate?.usage === undefined ? undefined : { usage: estimate.usage, quota: estimate.quota };
  }

  persistStorage(): Promise<boolean | undefined> {
    return navigator.storage?.persist?.().catch(() => undefined) ?? Promise.resolve(undefined);
  }

  /** Only the leader tab reaches the core (a follower's uploads go through the service worker). */
  uploadMedia({ data, ...upload }: MediaUpload, onProgress: (loaded: number) => void): Promise<MediaUploadResult> | undefined {
    const core = this.host.leaderCore;
    if (!core) return undefined;
    let offset = 0;
    // Asked for the chunk at `offset`: the core's upload route has read every byte before it.
    const next = async (): Promise<Uint8Array | undefined> => {
      onProgress(offset);
      if (offset >= data.size) return undefined;
      const chunk = new Uint8Array(await data.slice(offset, offset + UPLOAD_CHUNK_BYTES).arrayBuffer());
      offset += chunk.length;
      return Comlink.transfer(chunk, [chunk.buffer]);
    };
    return core.uploadMedia(upload, Comlink.proxy(next));
  }

  readonly keep: KeepHost = {
    persisted: async () => navigator.storage?.persisted?.().catch(() => undefined),
    interruptedImport: () => this.host.state.interruptedImport,
    exportHomeserver: async (passphrase, onProgress) => {
      const core = this.leaderCore();
      return core.exportArchive(passphrase, Comlink.proxy(({ doneBytes, totalBytes }: ArchiveProgress) => onProgress(totalBytes ? doneBytes / totalBytes : 1)));
    },
    importHomeserver: async (file, passphrase, onProgress) => {
      const core = this.leaderCore();
      try {
        await core.importArchive(file, passphrase, Comlink.proxy(({ phase, doneBytes, totalBytes }: ArchiveProgress) => onProgress((phase === 'checking' ? 0 : 0.5) + (totalBytes ? doneBytes / totalBytes : 1) / 2)));
      } catch (error) {
        // Failed after it began writing (IMPORT_INTERRUPTED in worker/portable.ts, named here so the page does not
        // bundle the archive code): the core has stopped; the next start removes what was written, and the card says so.
        if (error instanceof Error && error.name === 'ImportInterrupted') location.reload();
        throw error;
      }
      // The core stopped; the next one starts from what was imported. Another tab's session is of the old homeserver.
      localStorage.clear();
      location.reload();
    },
    resetHomeserver: async () => {
      await this.leaderCore().stopForReset();
      // Every IndexedDB database of this origin (the homeserver's and any client's), sessions, added peers.
      // A deletion that another connection still holds (this page's peer store) completes as the page unloads.
      const names = (await indexedDB.databases?.()) ?? [];
      await Promise.all(
        names.map(({ name }) => name && new Promise<void>((resolve) => {
          const request = indexedDB.deleteDatabase(name);
          request.onsuccess = request.onerror = request.onblocked = () => resolve();
        })),
      );
      localStorage.clear();
      location.reload();
    },
  };

  private leaderCore() {
    const core = this.host.leaderCore;
    if (!core) throw new Error('The homeserver runs in another tab of this browser: export, import and reset from that tab.');
    return core;
  }
}
