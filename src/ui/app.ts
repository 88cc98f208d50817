import { AccountForm, type AccountMode } from './account-form.ts';
import type { ChatAccounts, ChatClient } from './chat.ts';
import { ChatScreen } from './chat-screen.ts';
import { h } from './dom.ts';
import { loadEmojiFont } from './emoji-font.ts';
import type { PageHost } from './host.ts';
import { P2PPanel } from './p2p-panel.ts';
import { SignOutDialog } from './sign-out-dialog.ts';
import { TabLock } from './tab-lock.ts';
import { TopBar } from './top-bar.ts';
import { importCard, safariNote, StoragePanel } from './keep.ts';

/** The built-in client: a status bar, first-run account creation, then rooms and a timeline. */
export class App {
  private client: ChatClient | undefined;
  private readonly main = h('main', { class: 'main' });
  private readonly p2pPanel: P2PPanel;
  private readonly topBar: TopBar;
  private readonly accountForm: AccountForm;
  private readonly chat: ChatScreen;
  private readonly storagePanel: StoragePanel;
  /** The account form's place, beside "Import a homeserver". */
  private readonly accountArea = h('div', { class: 'account-area' });
  private readonly importCard: HTMLElement;
  /** One tab runs the chat client (its crypto and sync) at a time (tab-lock.ts). */
  private readonly lock = new TabLock();
  private readonly signOutDialog = new SignOutDialog();

  constructor(
    root: HTMLElement,
    host: PageHost,
    private readonly accounts: ChatAccounts,
  ) {
    this.p2pPanel = new P2PPanel(host);
    this.storagePanel = new StoragePanel(host, () => void this.topBar.refreshStorage());
    this.chat = new ChatScreen(
      this.p2pPanel,
      () => {
        this.topBar.refreshStorageIfStale();
        document.body.dataset.synced = 'true';
      },
      (client) => void this.signOut(client),
    );
    const views = this.chat.topBarButtons;
    this.topBar = new TopBar(host, { peersButton: views.peers, offlineBadge: this.p2pPanel.offlineBadge, settingsButton: views.settings }, () => void this.storagePanel.open());
    this.importCard = importCard(host);
    this.accountForm = new AccountForm(accounts, (client) => this.showChat(client), () => void host.persistStorage());
    root.replaceChildren(this.topBar.element, this.main);
    // A peer came or went: what waited for it may have gone.
    this.p2pPanel.onPeersChanged(() => this.client?.refreshPending());
    // An invite link (#invite=@user:server) opened while the page was already open.
    window.addEventListener('hashchange', () => this.chat.applyInviteLink());
    // Another tab signed in or out: follow it.
    accounts.onSessionChanged(() => void this.enter());
  }

  async run(): Promise<void> {
    this.main.replaceChildren(h('div', { class: 'card centered' }, h('div', { class: 'spinner', 'aria-hidden': 'true' }), h('p', {}, 'Starting your homeserver\u2026')));
    await this.accounts.waitForHomeserver();
    // Page load to first answer: what the browser benchmark reports as cold start.
    performance.mark('hearth-versions-answered');
    document.body.dataset.homeserver = 'ready';
    // Before any screen with an emoji (the rooms' attach button): Chromium would keep the first one a box (emoji-font.ts).
    await loadEmojiFont();
    await this.enter();
  }

  /** Shows the account screen or the rooms, depending on the kept session. */
  private async enter(): Promise<void> {
    this.dropClient();
    const client = await this.accounts.resume();
    if (!client) {
      this.lock.letGo();
      return this.showAccountForm('register');
    }
    this.showChat(client);
  }

  private dropClient(): void {
    // A sign-out still being asked about is moot once its client goes.
    this.signOutDialog.dismiss();
    this.client?.stop();
    this.client = undefined;
    this.chat.leave();
  }

  private showAccountForm(mode: AccountMode): void {
    this.topBar.showSignedOut();
    this.p2pPanel.showIdentity(undefined);
    this.main.replaceChildren(...[safariNote(), this.accountArea, this.importCard].filter((part): part is HTMLElement => part !== null));
    this.accountForm.show(this.accountArea, mode);
  }

  private showChat(client: ChatClient): void {
    this.dropClient();
    this.client = client;
    client.subscribe((change) => {
      // The homeserver no longer takes the session: the session is gone, show what is left.
      if (change === 'signed-out' && client === this.client) void this.enter();
    });
    this.topBar.showSignedIn(client.userId, () => void this.signOut(client));
    this.lock.request(this.lockHandlers(client));
  }

  /** What the chat lock does here: the client runs once this tab holds it, and stops when another tab takes it. */
  private lockHandlers(client: ChatClient | undefined) {
    return {
      // Granted later (the other tab closed or signed out, or "Use here"): the client is the kept session's, made again if it stopped.
      granted: () => (client && client === this.client ? this.chat.show(this.main, client) : void this.enter()),
      waiting: () => this.showElsewhere(),
      lost: () => {
        this.dropClient();
        this.showElsewhere();
        this.lock.request(this.lockHandlers(undefined));
      },
    };
  }

  /** Another tab runs the chat: say so, and offer to take it over. */
  private showElsewhere(): void {
    this.main.replaceChildren(
      h(
        'div',
        { class: 'card centered elsewhere', role: 'status' },
        h('h2', {}, 'Hearth is open in another tab'),
        h('p', {}, 'Your chats run in one tab at a time, so that their encryption keys stay sound. Use them here, and the other tab stops.'),
        h('button', { type: 'button', onclick: () => this.lock.request(this.lockHandlers(this.client), { steal: true }) }, 'Use here'),
      ),
    );
  }

  /**
   * Asks first, always (issue 38): what signing out does to this device's keys, or, while the recovery key
   * (shown only on this device until confirmed saved) is unsaved, that signing out loses it (issue 25).
   */
  private async signOut(client: ChatClient): Promise<void> {
    const keyUnsaved = client.encryption().recoveryKey !== undefined;
    if (!(await this.signOutDialog.ask(keyUnsaved))) return;
    // The recovery key opens on a later sign-in only what the key backup holds: keys not uploaded yet are saved first.
    // (With the key unsaved the dialog said the messages are lost: nothing is waited for.)
    if (!keyUnsaved && !(await this.signOutDialog.untilKeysBackedUp(client))) return;
    // Meanwhile the session may have ended another way.
    if (client !== this.client) return;
    this.dropClient();
    this.lock.letGo();
    const revoked = client.signOut();
    this.showAccountForm('login');
    await revoked;
  }
}
