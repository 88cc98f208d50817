import { copyText, h } from './dom.ts';
import type { HostStatus, PageHost } from './host.ts';
import { storageLabel } from './keep.ts';
import { shortUserId } from './ids.ts';

/** How often the storage figure is refreshed; a sync refreshes it too when it is older than STORAGE_STALE_MS. */
const STORAGE_REFRESH_MS = 15_000;
const STORAGE_STALE_MS = 5_000;

/**
 * The top bar: the host's status, the server name, the Peers button with the connection state at a glance and the
 * offline indicator, what this origin stores, and who is signed in, with Settings and Sign out.
 */
export class TopBar {
  readonly element: HTMLElement;
  private readonly status = h('span', { class: 'status', role: 'status', 'aria-live': 'polite' });
  private readonly serverName = h('code', { class: 'server-name', title: 'Your homeserver\u2019s name: its ed25519 public key' });
  /** What this site stores (the homeserver's database, media and keys): it opens the storage panel (keep.ts). */
  private readonly storage = h('button', { type: 'button', class: 'link storage', title: 'What this site keeps in your browser: your homeserver\u2019s database, media and keys' });
  private readonly account = h('span', { class: 'account' });
  private readonly settingsButton: HTMLElement;
  private storageTimer: ReturnType<typeof setTimeout> | undefined;
  private storageCheckedAt = 0;

  constructor(
    private readonly host: PageHost,
    views: {
      /** Opens the Peers view, saying how many peers are connected (p2p-panel.ts). */
      peersButton: HTMLElement;
      /** The peers panel's offline indicator. */
      offlineBadge: HTMLElement;
      /** Opens Settings (your profile, notifications); beside your ID once signed in. */
      settingsButton: HTMLElement;
    },
    /** Opens the storage panel. */
    openStorage: () => void = () => undefined,
  ) {
    this.storage.onclick = openStorage;
    this.settingsButton = views.settingsButton;
    this.element = h(
      'header',
      { class: 'topbar' },
      h('span', { class: 'brand' }, 'Hearth'),
      this.serverName,
      this.status,
      views.peersButton,
      views.offlineBadge,
      h('span', { class: 'spacer' }),
      this.storage,
      this.account,
    );
    host.subscribe((status) => this.showHostStatus(status));
    void this.refreshStorage();
  }

  private showHostStatus(status: HostStatus): void {
    const text: Record<HostStatus['core'], string> = {
      unknown: 'Connecting to your homeserver\u2026',
      starting: 'Homeserver starting\u2026',
      'running-here': 'Homeserver running in this tab',
      'running-elsewhere': 'Homeserver running in another tab',
      failed: `Homeserver failed: ${status.error ?? 'unknown error'}`,
    };
    this.status.textContent = status.federationPaused ? 'Federation paused: another copy of this homeserver is online' : text[status.core];
    this.status.title = status.federationPaused ?? '';
    this.status.dataset.state = status.federationPaused ? 'twin' : status.core;
    this.serverName.textContent = status.serverName ? `${status.serverName.slice(0, 8)}\u2026${status.serverName.slice(-4)}` : '';
    this.serverName.title = status.serverName ?? '';
  }

  /** After a sync: the figure moves as the database grows. */
  refreshStorageIfStale(): void {
    if (Date.now() - this.storageCheckedAt > STORAGE_STALE_MS) void this.refreshStorage();
  }

  async refreshStorage(): Promise<void> {
    clearTimeout(this.storageTimer);
    this.storageCheckedAt = Date.now();
    const estimate = await this.host.storageEstimate();
    if (estimate) {
      const label = storageLabel(estimate);
      this.storage.textContent = label.text;
      this.storage.title = label.title;
      this.storage.classList.toggle('warn', label.warn);
    }
    this.storageTimer = setTimeout(() => void this.refreshStorage(), STORAGE_REFRESH_MS);
  }

  /** Nobody is signed in. */
  showSignedOut(): void {
    this.account.replaceChildren();
  }

  /** The signed-in user, with Settings and Sign out. */
  showSignedIn(userId: string, signOut: () => void): void {
    // Shortened here, with the whole ID on hover and copied by its button (issue 38 item 7).
    const shown = h('span', { class: 'user-id', title: userId }, shortUserId(userId));
    const copy: HTMLButtonElement = h('button', { type: 'button', class: 'small link', 'aria-label': 'Copy user ID', onclick: () => void copyText(userId, shown, copy) }, 'Copy');
    this.account.replaceChildren(shown, copy, this.settingsButton, h('button', { class: 'link', onclick: signOut }, 'Sign out'));
  }
}
