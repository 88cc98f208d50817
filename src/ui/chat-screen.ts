import type { ChatChange, ChatClient, ChatRoom } from './chat.ts';
import { Composer } from './composer.ts';
import { DemoRoom } from './demo-room.ts';
import { h } from './dom.ts';
import { EncryptionPanel } from './encryption-panel.ts';
import { MembersPane } from './members.ts';
import { VerificationPanel } from './verification-panel.ts';
import type { P2PPanel } from './p2p-panel.ts';
import { Notifier } from './notifier.ts';
import { ProfilePanel } from './profile-panel.ts';
import { RoomSettingsPanel } from './room-settings.ts';
import { RoomView } from './room-view.ts';
import { SearchPanel } from './search-panel.ts';
import { Sidebar } from './sidebar.ts';
import { ThreadView } from './thread-view.ts';
import type { TimelineActions } from './timeline.ts';
import { ViewPane } from './view-pane.ts';

/**
 * What the screen shows. `peers` and `settings` are views of their own, in the open room's place (the room
 * list stays beside them on a wide screen). Below 760 px the screen holds one thing at a time: the room list,
 * the open room (or a thread of it), or one of those views; on a wider one `rooms`, `room` and `thread` look alike.
 */
type View = 'rooms' | 'room' | 'thread' | 'peers' | 'settings';
type PaneView = Extract<View, 'peers' | 'settings'>;
const isPane = (view: View): view is PaneView => view === 'peers' || view === 'settings';

/** Where no animation frame comes (a hidden tab), how soon a room change is redrawn all the same. */
const RENDER_FALLBACK_MS = 100;

/**
 * The signed-in screen: the sidebar, the open room and its members. It renders what the
 * client holds whenever the client says something changed, and keeps which room is open.
 * The views' elements live as long as the page, so fields keep what was typed across syncs.
 */
export class ChatScreen {
  private client: ChatClient | undefined;
  private selectedRoomId: string | undefined;
  private readonly sidebar = new Sidebar({ select: (roomId, after) => this.selectRoom(roomId, after) });
  /** Scrolled down to the newest: read up to it. */
  private readonly roomView = new RoomView(() => this.markRead());
  private readonly members = new MembersPane();
  private readonly encryptionPanel: EncryptionPanel;
  private readonly verificationPanel = new VerificationPanel();
  private readonly roomSettings = new RoomSettingsPanel();
  private readonly search = new SearchPanel({ select: (roomId) => this.selectRoom(roomId) });
  private readonly profile = new ProfilePanel();
  private readonly notifier = new Notifier((roomId) => this.selectRoom(roomId));
  private readonly composer = new Composer(() => {
    const room = this.selectedRoom();
    return room && this.client ? { client: this.client, room } : undefined;
  });
  /** The open thread's root, in the open room. */
  private threadRootId: string | undefined;
  /** The room's thread list is open in the thread pane (a thread opened from it goes Back to it). */
  private threadList = false;
  /** A redraw is asked for the next frame (`renderSoon`). */
  private renderQueued = false;
  private readonly threadView = new ThreadView(
    () => {
      const room = this.selectedRoom();
      return room && this.client && this.threadRootId ? { client: this.client, room, threadId: this.threadRootId } : undefined;
    },
    () => this.closeThread(),
  );
  private readonly demoRoom: DemoRoom;
  private readonly chat = h('div', { class: 'chat' });
  /** The phone's tabs: hidden on wider screens, where the room list and the room stand side by side and the top bar opens Peers. */
  private readonly tabs: Record<Exclude<View, 'thread' | 'settings'>, HTMLButtonElement> = {
    rooms: h('button', { type: 'button', class: 'tab', onclick: () => this.showView('rooms') }, 'Rooms'),
    room: h('button', { type: 'button', class: 'tab room-tab', onclick: () => this.showView('room') }, 'Room'),
    peers: h('button', { type: 'button', class: 'tab', 'aria-controls': 'peers-view', onclick: () => this.openView('peers') }, 'Peers'),
  };
  /** The views of their own, and the top bar's buttons that open them (shown while this screen is). */
  private readonly panes: Record<PaneView, ViewPane>;
  private readonly settingsButton = h('button', { type: 'button', class: 'link settings-button', 'aria-controls': 'settings-view', 'aria-expanded': 'false', title: 'Your profile and notifications', hidden: true }, 'Settings');
  private view: View = 'rooms';
  /** Where Close or Escape goes back to from a view of its own, and what had the focus when it opened. */
  private returnTo: Exclude<View, PaneView> = 'rooms';
  private opener: HTMLElement | undefined;

  constructor(
    private readonly p2pPanel: P2PPanel,
    /** After each /sync response has been shown. */
    private readonly onSynced: () => void,
    /** Sign out (asking first): offered by the recovery key dialog, which covers the top bar's button. */
    signOut: (client: ChatClient) => void,
  ) {
    this.encryptionPanel = new EncryptionPanel(signOut);
    const close = () => this.closeView();
    this.panes = {
      peers: new ViewPane('peers', 'Peers', close, this.p2pPanel.element),
      settings: new ViewPane(
        'settings',
        'Settings',
        close,
        this.profile.element,
        h(
          'section',
          { class: 'notification-settings', 'aria-labelledby': 'notification-settings-title' },
          h('h3', { id: 'notification-settings-title' }, 'Notifications'),
          h('p', { class: 'hint' }, 'While this tab is in the background, a new message that your notification rules say should notify you shows as a browser notification.'),
          this.notifier.setting,
        ),
      ),
    };
    this.p2pPanel.button.onclick = () => this.toggleView('peers');
    this.settingsButton.onclick = () => this.toggleView('settings');
    // Escape closes a view of its own, as it closes a dialog; a dialog open above it (the invite link's question), which holds
    // the focus while it is open, takes its own Escape.
    document.addEventListener('keydown', (event) => {
      if (event.key !== 'Escape' || event.defaultPrevented || event.isComposing || !this.client || !isPane(this.view)) return;
      if (event.target instanceof Element && event.target.closest('dialog')) return;
      event.preventDefault();
      this.closeView();
    });
    this.demoRoom = new DemoRoom({
      client: () => this.client,
      select: (roomId, options) => this.selectRoom(roomId, undefined, options),
      inviteInput: this.members.inviteInput,
      openPanel: () => this.openView('peers'),
      startDirect: (userId) => this.sidebar.startDirectWith(userId),
    });
    document.addEventListener('visibilitychange', () => {
      // Back on the tab: what came while it was hidden (the marker stayed) is new, and gets the line.
      if (document.visibilityState === 'visible') {
        this.roomView.rememberReadMarker();
        this.renderRoom();
      }
      this.markRead();
      this.renderRooms();
    });
  }

  /** The top bar's buttons that open the Peers view ("Peers · 2 connected") and Settings. */
  get topBarButtons(): { peers: HTMLButtonElement; settings: HTMLButtonElement } {
    return { peers: this.p2pPanel.button, settings: this.settingsButton };
  }

  /** Shows `client`'s rooms in `container` and starts its sync loop. */
  show(container: HTMLElement, client: ChatClient): void {
    this.client = client;
    this.selectedRoomId = undefined;
    // Until the first sync answers, the lists are not known to be empty: they say they are loading.
    this.roomView.loading = true;
    client.subscribe((change) => this.onChange(client, change));
    this.profile.show(client);
    this.notifier.attach(client);
    this.sidebar.build(client);
    this.roomView.build(this.composer, this.encryptionPanel.element, [this.roomSettings.element, this.search.element]);
    this.p2pPanel.showIdentity(client.userId);
    this.p2pPanel.setActions(...this.demoRoom.elements());
    this.chat.replaceChildren(
      h('nav', { class: 'phone-nav', 'aria-label': 'Show' }, this.tabs.rooms, this.tabs.room, this.tabs.peers),
      this.sidebar.element,
      this.roomView.element,
      this.members.element,
      this.threadView.element,
      this.panes.peers.element,
      this.panes.settings.element,
    );
    // A phone starts on the room list, even when a room is open behind it.
    this.showView('rooms');
    this.p2pPanel.button.hidden = this.settingsButton.hidden = false;
    container.replaceChildren(this.chat);
    this.renderRooms();
    this.renderRoom();
    this.encryptionPanel.render(client);
    this.verificationPanel.render(client);
    this.demoRoom.applyInviteLink();
    client.start();
  }

  /** The client signed out or is replaced: nothing it says is shown any more. */
  leave(): void {
    this.client = undefined;
    this.p2pPanel.button.hidden = this.settingsButton.hidden = true;
    this.encryptionPanel.leave();
    this.verificationPanel.leave();
    document.title = 'Hearth';
  }

  /** An invite link opened while the page was open. */
  applyInviteLink(): void {
    this.demoRoom.applyInviteLink();
  }

  private onChange(client: ChatClient, change: ChatChange): void {
    if (client !== this.client || change === 'signed-out') return;
    if (change === 'encryption') return this.encryptionPanel.render(client);
    if (change === 'verification') {
      this.verificationPanel.render(client);
      return this.renderRoom();
    }
    if (change === 'room') return this.renderSoon();
    this.roomView.loading = false;
    if (!this.selectedRoomId) this.selectedRoomId = client.sortedRooms().find((r) => r.membership === 'join')?.id;
    // A room opened before its join reached this page, or joined over federation: fill it from /messages.
    if (this.selectedRoomId) client.openRoom(this.selectedRoomId);
    this.renderRooms();
    this.renderRoom();
    // Page load to the first room list from /sync: what bench/page-client.bench.ts reports.
    if (performance.getEntriesByName('hearth-rooms-shown').length === 0) performance.mark('hearth-rooms-shown');
    this.markRead();
    this.onSynced();
  }

  private selectedRoom(): ChatRoom | undefined {
    const room = this.selectedRoomId ? this.client?.room(this.selectedRoomId) : undefined;
    return room?.membership === 'join' ? room : undefined;
  }

  /** Opens a room and shows it; `behind`: opened behind the view of its own that is showing, where Close goes back to. */
  private selectRoom(roomId: string, after?: () => void, { behind = false } = {}): void {
    if (roomId !== this.selectedRoomId) [this.threadRootId, this.threadList] = [undefined, false];
    this.selectedRoomId = roomId;
    this.client?.openRoom(roomId);
    after?.();
    if (behind && isPane(this.view)) this.returnTo = 'room';
    else this.showView('room');
    this.renderRooms();
    this.renderRoom();
    if (this.view === 'room') this.composer.input.focus();
    this.markRead();
  }

  /**
   * Room changes redraw once a frame. The SDK reports a sync answer's rooms one at a time (100 rooms: about as many
   * changes, each a microtask apart), and a redraw of the open room lays its timeline out: after a reload with 100
   * rooms on sliding sync, 1.6 s of redraws came before the open room's newest message showed (measured). A hidden
   * tab may get no frames, so a timer redraws there (the tab's title counts what is unread).
   */
  private renderSoon(): void {
    if (this.renderQueued) return;
    this.renderQueued = true;
    const render = () => this.renderQueued && this.renderNow();
    requestAnimationFrame(render);
    setTimeout(render, RENDER_FALLBACK_MS);
  }

  private renderNow(): void {
    this.renderQueued = false;
    this.renderRooms();
    this.renderRoom();
  }

  private renderRooms(): void {
    if (!this.client) return;
    // One snapshot of every room (each with its timeline) serves the list and the title.
    const rooms = this.client.sortedRooms();
    this.sidebar.renderRooms(this.client, rooms, this.selectedRoomId, this.roomView.loading);
    // The tab's title counts what is unread elsewhere ("(3) Hearth", "(3!) Hearth" with a mention).
    const others = rooms.filter((room) => room.id !== this.selectedRoomId || document.visibilityState !== 'visible');
    const unread = others.reduce((n, room) => n + room.unread, 0);
    const highlight = others.some((room) => room.highlights > 0);
    document.title = unread > 0 ? `(${unread}${highlight ? '!' : ''}) Hearth` : 'Hearth';
  }

  private renderRoom(): void {
    const client = this.client;
    if (!client) return;
    const room = this.selectedRoom();
    const actions: TimelineActions & { leave(): void; threads(): void; loadUntil(eventId: string): Promise<boolean> } = {
      // Drawn before it resolves: the view then scrolls to what was loaded.
      loadUntil: (eventId) => (room ? client.loadUntil(room.id, eventId).catch(() => false).then((found) => (this.renderNow(), found)) : Promise.resolve(false)),
      threads: () => room && this.openThreadList(room.id),
      // Left and forgotten: it goes from the list; nothing is open until another room is chosen.
      leave: () =>
        room &&
        void client.leave(room.id, { forget: true }).then(
          () => {
            if (this.selectedRoomId === room.id) this.selectedRoomId = undefined;
            this.renderRooms();
            this.renderRoom();
          },
          (error) => console.error('hearth: leave failed', error),
        ),
      loadOlder: () => room && void client.loadOlder(room.id),
      retry: (echo) => room && client.retry(room.id, echo),
      discard: (echo) => room && client.discard(room.id, echo),
      reply: (event) => room && this.composer.replyToEvent(room.id, event, client.displayName(room, event.sender)),
      edit: (event) => room && this.composer.editEvent(room.id, event),
      redact: (event) => room && event.event_id && void client.redact(room.id, event.event_id).catch((error) => console.error('hearth: delete failed', error)),
      react: (event, key) => room && event.event_id && void client.react(room.id, event.event_id, key).catch((error) => console.error('hearth: reaction failed', error)),
      openThread: (event) => room && event.event_id && this.openThread(room.id, event.event_id),
      retryUpload: (upload) => room && client.retryUpload(room.id, upload.id),
      discardUpload: (upload) => room && client.discardUpload(room.id, upload.id),
    };
    // Read once: the header shows its topic and avatar, the settings fold all of it.
    const settings = room && client.roomSettings(room.id);
    this.roomView.render(client, room, settings, actions);
    this.roomSettings.render(client, room, settings, {
      // Left, not forgotten: it moves to "Left rooms", where Forget takes it from every list.
      leave: () =>
        room &&
        void client.leave(room.id).then(
          () => {
            if (this.selectedRoomId === room.id) this.selectedRoomId = undefined;
            this.renderRooms();
            this.renderRoom();
          },
          (error) => console.error('hearth: leave failed', error),
        ),
    });
    this.search.render(client, room);
    this.members.render(client, room);
    const thread = room && this.threadRootId ? client.thread(room.id, this.threadRootId) : undefined;
    const threadList = room && this.threadList && !thread;
    this.chat.dataset.thread = thread || threadList ? 'open' : 'closed';
    if (room && threadList) this.threadView.renderList(client, room, client.threads(room.id), actions);
    else if (room && thread) {
      // In the pane, Reply and Edit go to the thread's own composer.
      const composer = this.threadView.composer;
      this.threadView.render(client, room, thread, {
        ...actions,
        reply: (event) => composer.replyToEvent(room.id, event, client.displayName(room, event.sender)),
        edit: (event) => composer.editEvent(room.id, event),
      });
    } else if (this.view === 'thread') this.showView('room');
    this.tabs.room.textContent = room ? client.roomName(room) : 'Room';
    this.tabs.room.disabled = !room;
  }

  private openThread(roomId: string, rootId: string): void {
    this.threadRootId = rootId;
    this.client?.openThread(roomId, rootId);
    this.showView('thread');
    this.renderRoom();
    this.threadView.composer.input.focus();
  }

  /** The room's threads in the thread pane, fetched from the homeserver. */
  private openThreadList(roomId: string): void {
    [this.threadRootId, this.threadList] = [undefined, true];
    this.client?.loadThreads(roomId);
    this.showView('thread');
    this.renderRoom();
  }

  /** Back: from a thread opened from the list to the list, otherwise the pane closes. */
  private closeThread(): void {
    if (this.threadRootId && this.threadList) {
      this.threadRootId = undefined;
      return this.renderRoom();
    }
    [this.threadRootId, this.threadList] = [undefined, false];
    this.showView('room');
    this.renderRoom();
  }

  /**
   * Shows `view`: CSS shows the room list, the open room or a view of its own below 760 px, and above it the room list
   * beside the room or beside that view. The tabs and the top bar's buttons say which is showing.
   */
  private showView(view: View): void {
    const wasPane = isPane(this.view);
    this.view = view;
    this.chat.dataset.view = view;
    for (const pane of Object.values(this.panes)) pane.element.hidden = pane.name !== view;
    for (const [name, tab] of Object.entries(this.tabs)) tab.setAttribute('aria-pressed', String(name === view || (name === 'room' && view === 'thread')));
    this.p2pPanel.button.setAttribute('aria-expanded', String(view === 'peers'));
    this.settingsButton.setAttribute('aria-expanded', String(view === 'settings'));
    if (!isPane(view)) this.opener = undefined;
    // Back on the room after a view of its own: what came meanwhile is read now that it shows.
    if (wasPane && !isPane(view)) this.markRead();
  }

  /** Opens the Peers view or Settings (from the top bar, the phone's Peers tab, an invite link), its heading focused. */
  private openView(view: PaneView): void {
    if (!isPane(this.view)) this.returnTo = this.view;
    const focused = document.activeElement;
    const opener = focused instanceof HTMLElement && focused !== document.body && !this.panes[view].element.contains(focused) ? focused : undefined;
    this.showView(view);
    this.opener = opener;
    if (view === 'settings') this.profile.refresh();
    this.panes[view].heading.focus();
  }

  /** Close or Escape: back to where the person was, the focus back on what opened the view. */
  private closeView(): void {
    if (!isPane(this.view)) return;
    const opener = this.opener;
    this.showView(this.returnTo);
    const shown = (element: HTMLElement | undefined): element is HTMLElement => element !== undefined && element.isConnected && element.getClientRects().length > 0;
    if (shown(opener)) opener.focus();
    else if (shown(this.composer.input)) this.composer.input.focus();
  }

  /** The top bar's buttons: open their view, or close it when it is the one showing. */
  private toggleView(view: PaneView): void {
    if (this.view === view) this.closeView();
    else this.openView(view);
  }

  /**
   * The open room is read up to its newest event when the person sees it: this tab visible, the room on screen,
   * its timeline at the end. Never while hidden, so the next look shows what came meanwhile as new.
   */
  private markRead(): void {
    const room = this.selectedRoom();
    if (!room || document.visibilityState !== 'visible' || !this.roomView.seesNewest) return;
    this.client?.markRead(room.id);
  }
}
