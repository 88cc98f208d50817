/**
 * The page's part of the browser host (ARCHITECTURE.md, the shape):
 * - registers the service worker and makes sure it controls this page;
 * - elects one leader tab per origin with a Web Lock: the leader owns the
 *   core's Web Worker and hands the service worker ports to it; every other
 *   tab is a follower whose requests reach the leader's core through the
 *   (single, origin-wide) service worker, so all tabs see the same data at once;
 * - when the leader tab goes away its lock is released and a follower's
 *   waiting lock request is granted: that tab starts the core again from
 *   IndexedDB and hands the service worker a port to it.
 *
 * Nothing here talks Matrix: the built-in client, like any client, uses fetch.
 */
import * as Comlink from 'comlink';
import type { HearthStatus, PeerStatus } from '../src/p2p/node.ts';
import type { CoreState } from '../src/ui/host.ts';
import type { CoreApi, CoreConfig } from './homeserver.worker.ts';
import type { PageToServiceWorker, ServiceWorkerToPage } from './protocol.ts';

const LEADER_LOCK = 'hearth-core-leader';
const CHANNEL = 'hearth-host';

// Where the core runs, as this tab sees it: the same words the page's host interface uses.
export type { CoreState };

export interface HostState {
  role: 'leader' | 'follower' | 'electing';
  core: CoreState;
  serverName?: string;
  coreId?: string;
  /** Core start-up time (leader only), in milliseconds. */
  startMs?: number;
  /** This start removed what an import left when it stopped midway (leader only): the sentence to show. */
  interruptedImport?: string;
  error?: string;
}

export interface BrowserHostOptions {
  /** URL of the built service worker (module). */
  serviceWorkerUrl: string;
  coreConfig?: CoreConfig;
  /**
   * Runs in the leader tab once its core is up; its result is stopped when the
   * tab stops leading. This is the seam for federation: the libp2p node lives
   * here, in a window, because WebRTC (RTCPeerConnection) exists only in
   * windows, and it passes inbound federation requests to the core.
   */
  onLeader?: (core: Comlink.Remote<CoreApi>) => Promise<void> | void;
}

/**
 * What the page shows of this tab's libp2p node (issue 12): set in the leader tab once its
 * node runs (`BrowserHost.attachP2P`), absent in followers and while the node starts.
 */
export interface P2PView {
  readonly node: { readonly serverName: string; readonly peerId: string; multiaddrs(): string[]; peers(): PeerStatus[]; status(): HearthStatus };
  readonly reachable: ReadonlySet<string>;
  /** The bootstrap addresses the node dials: the site's config, then the peers added in the panel. */
  readonly bootstrap: readonly string[];
  /** Dials a bootstrap peer the person added (the peers panel); resolves with its server name. */
  dial(address: string): Promise<string>;
  subscribe(listener: () => void): () => void;
}

type ChannelMessage = { type: 'who-leads' } | { type: 'leader'; serverName: string; coreId: string };

export class BrowserHost {
  state: HostState = { role: 'electing', core: 'unknown' };
  /** The leader tab's libp2p node, once it runs. */
  p2p: P2PView | undefined;
  private readonly listeners = new Set<(state: HostState) => void>();
  private core: Comlink.Remote<CoreApi> | undefined;
  private coreId: string | undefined;
  private readonly channel = new BroadcastChannel(CHANNEL);

  constructor(private readonly options: BrowserHostOptions) {}

  /** The core's Worker, in the leader tab once it runs (export, import, reset: worker/portable.ts). */
  get leaderCore(): Comlink.Remote<CoreApi> | undefined {
    return this.state.role === 'leader' && this.state.core === 'running-here' ? this.core : undefined;
  }

  subscribe(listener: (state: HostState) => void): () => void {
    this.listeners.add(listener);
    listener(this.state);
    return () => this.listeners.delete(listener);
  }

  /** The leader's node started (or stopped, with undefined): listeners hear of it and of its peers changing. */
  attachP2P(view: P2PView | undefined): void {
    this.p2p = view;
    view?.subscribe(() => this.update({}));
    this.update({});
  }

  private update(patch: Partial<HostState>): void {
    this.state = { ...this.state, ...patch };
    for (const listener of this.listeners) listener(this.state);
  }

  /** Resolves once the service worker controls this page, so fetches to /_matrix/* reach the core. */
  async start(): Promise<void> {
    if (!('serviceWorker' in navigator) || !('locks' in navigator)) {
      this.update({ core: 'failed', error: 'This browser lacks service workers or Web Locks (a private window?), which Hearth needs.' });
      throw new Error(this.state.error);
    }
    const container = navigator.serviceWorker;
    container.addEventListener('message', (event) => this.onServiceWorkerMessage(event));
    // Messages from the service worker wait until the page says it listens.
    container.startMessages();
    container.addEventListener('controllerchange', () => {
      // A new service worker version took over: it has no port yet.
      if (container.controller) void this.handPort(container.controller);
    });
    this.channel.addEventListener('message', (event: MessageEvent<ChannelMessage>) => this.onChannelMessage(event.data));

    // Elect while the registration runs: on later visits register() waits for an
    // update check of sw.js, and the core need not wait for that.
    const registering = container.register(this.options.serviceWorkerUrl, { type: 'module' });
    this.elect();
    // Already controlled (any visit after the first): the page can go on while it registers.
    if (!container.controller) await registering;
    else registering.catch((error) => console.warn('hearth: service worker update failed', error));
    await this.controlled();
  }

  private elect(): void {
    void navigator.locks.request(LEADER_LOCK, { ifAvailable: true }, async (lock) => {
      if (lock) return this.lead();
      this.update({ role: 'follower', core: 'unknown' });
      this.channel.postMessage({ type: 'who-leads' } satisfies ChannelMessage);
      // Wait in line: granted when the leader tab closes.
      return navigator.locks.request(LEADER_LOCK, () => this.lead());
    });
  }

  /** Holds the lock for the life of this page: the returned promise never settles. */
  private async lead(): Promise<never> {
    this.update({ role: 'leader', core: 'starting', serverName: undefined, coreId: undefined });
    try {
      const worker = new Worker(new URL('./homeserver.worker.ts', import.meta.url), { type: 'module', name: 'hearth-core' });
      worker.addEventListener('error', (event) => this.update({ core: 'failed', error: `the homeserver worker failed: ${event.message}` }));
      const core = Comlink.wrap<CoreApi>(worker);
      this.core = core;
      this.coreId = await core.coreId;
      // Hand the service worker a port at once: requests wait in the core until it has started.
      const active = (await navigator.serviceWorker.ready).active;
      if (active) await this.handPort(active);
      const info = await core.start(this.options.coreConfig ?? {});
      this.update({ core: 'running-here', serverName: info.serverName, coreId: info.coreId, startMs: info.startMs, interruptedImport: info.interruptedImport });
      this.announce();
      await this.options.onLeader?.(core);
    } catch (error) {
      this.update({ core: 'failed', error: error instanceof Error ? error.message : String(error) });
    }
    return new Promise<never>(() => {});
  }

  private announce(): void {
    if (this.state.core !== 'running-here' || !this.state.serverName || !this.coreId) return;
    this.channel.postMessage({ type: 'leader', serverName: this.state.serverName, coreId: this.coreId } satisfies ChannelMessage);
  }

  private onChannelMessage(message: ChannelMessage): void {
    if (message.type === 'who-leads') this.announce();
    else if (message.type === 'leader' && this.state.role === 'follower') {
      this.update({ core: 'running-elsewhere', serverName: message.serverName, coreId: message.coreId });
    }
  }

  private onServiceWorkerMessage(event: MessageEvent<ServiceWorkerToPage>): void {
    if (event.data?.type !== 'hearth-need-port') return;
    // The service worker restarted (or a request found no port): only the leader can answer.
    if (event.source instanceof ServiceWorker) void this.handPort(event.source);
  }

  private async handPort(target: ServiceWorker): Promise<void> {
    const core = this.core;
    const coreId = this.coreId;
    if (!core || !coreId) return;
    const { port1, port2 } = new MessageChannel();
    await core.connect(Comlink.transfer(port1, [port1]));
    const message: PageToServiceWorker = { type: 'hearth-core-port', coreId, port: port2 };
    target.postMessage(message, [port2]);
  }

  /** Waits until the service worker controls this page (a hard reload leaves a page uncontrolled: ask it to claim). */
  private async controlled(): Promise<void> {
    const container = navigator.serviceWorker;
    if (container.controller) return;
    const changed = new Promise<void>((resolve) => container.addEventListener('controllerchange', () => resolve(), { once: true }));
    const ready = await container.ready;
    if (!container.controller) ready.active?.postMessage({ type: 'hearth-claim' } satisfies PageToServiceWorker);
    if (!container.controller) await changed;
  }
}

export async function startBrowserHost(options: BrowserHostOptions): Promise<BrowserHost> {
  const host = new BrowserHost(options);
  await host.start();
  return host;
}
