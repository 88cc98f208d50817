/**
 * One tab of the origin runs the chat client at a time (issue 25). Each client runs its own Rust
 * crypto on the origin's one IndexedDB crypto store, and two of them at once corrupt it over time
 * (Element allows one tab for the same reason). A Web Lock (`navigator.locks`) says which tab that
 * is: it is held while a client runs, other tabs wait for it (and take it when that tab closes or
 * signs out), and "Use here" steals it, which stops the client of the tab that had it.
 * This is not the homeserver's leader election among tabs (worker/page-host.ts): the core and the
 * chat client may well run in different tabs.
 */

export const CHAT_LOCK = 'hearth-chat-client';
/** How long "Use here" waits for the other tab to say its client stopped (a frozen background tab never answers). */
const STOP_WAIT_MS = 2_000;

export interface TabLockHandlers {
  /** This tab holds the lock now: start the client. */
  granted(): void;
  /** Another tab holds it: this one waits (and gets it when that tab lets go). */
  waiting(): void;
  /** Another tab took it ("Use here" there): stop the client at once. */
  lost(): void;
}

export class TabLock {
  private unlock: (() => void) | undefined;
  private queued: AbortController | undefined;

  /** Where a tab that lost the lock says its client has stopped. */
  private readonly channel = typeof BroadcastChannel === 'function' ? new BroadcastChannel(`${CHAT_LOCK}-handover`) : undefined;

  constructor(private readonly name = CHAT_LOCK) {}

  get held(): boolean {
    return this.unlock !== undefined;
  }

  /** Asks for the lock: at once if free (or taken from the other tab with `steal`), else waits for it. */
  request(handlers: TabLockHandlers, options: { steal?: boolean } = {}): void {
    this.cancelQueued();
    if (this.held) return handlers.granted();
    const locks = navigator.locks;
    // Without Web Locks (an old browser, an insecure origin) every tab runs its client, as before.
    if (!locks) return handlers.granted();
    // Each request's own grant: a rejection of another (a queued one aborted here) says nothing of this one.
    const grant = () => {
      let unlock: (() => void) | undefined;
      const hold = (lock: Lock | null): Promise<void> | undefined => {
        if (!lock) return undefined;
        return new Promise<void>((resolve) => {
          unlock = resolve;
          this.unlock = resolve;
          handlers.granted();
        });
      };
      const stolen = (error: unknown) => {
        if (!unlock || this.unlock !== unlock || (error as { name?: string } | undefined)?.name !== 'AbortError') return;
        this.unlock = undefined;
        handlers.lost();
        // The client here has stopped (lost() stops it): the tab that took the lock may start its crypto.
        this.channel?.postMessage('stopped');
      };
      return { hold, stolen };
    };
    if (options.steal) {
      // Taken from a running tab: its client is told by the lock's loss and stops within a task; this tab
      // starts once it says so (or after STOP_WAIT_MS, should it be frozen in the background and never answer).
      const stopped = this.otherStopped();
      const { hold, stolen } = grant();
      void locks.request(this.name, { steal: true }, (lock) => stopped.then(() => hold(lock))).catch(stolen);
      return;
    }
    const now = grant();
    void locks
      .request(this.name, { ifAvailable: true }, (lock) => {
        if (lock) return now.hold(lock);
        handlers.waiting();
        const queued = new AbortController();
        this.queued = queued;
        const later = grant();
        void locks.request(this.name, { signal: queued.signal }, later.hold).catch(later.stolen);
        return undefined;
      })
      .catch(now.stolen);
  }

  /** Lets go (signed out): a waiting tab gets it. */
  letGo(): void {
    this.cancelQueued();
    this.unlock?.();
    this.unlock = undefined;
  }

  /** Resolves when another tab says its client stopped, or after STOP_WAIT_MS. */
  private otherStopped(): Promise<void> {
    const channel = this.channel;
    if (!channel) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        channel.removeEventListener('message', done);
        resolve();
      };
      const timer = setTimeout(done, STOP_WAIT_MS);
      channel.addEventListener('message', done);
    });
  }

  private cancelQueued(): void {
    this.queued?.abort();
    this.queued = undefined;
  }
}
