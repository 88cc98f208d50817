import type { BrowserHost, HostState } from '../../worker/page-host.ts';
import { formatBytes, formatTime, h } from './dom.ts';
import { MatrixApi, MatrixApiError, type MatrixEvent, type Session } from './matrix.ts';
import { invitedUserFromHash, P2PPanel, serverOf, shortServerName, shortUserId } from './p2p-panel.ts';
import { Store, type Room } from './store.ts';

const SESSION_KEY = 'hearth-session';
/** Typing notices are refreshed this often while typing, and cleared after this much quiet. */
const TYPING_REFRESH_MS = 20_000;
const TYPING_IDLE_MS = 4_000;

function loadSession(): Session | undefined {
  try {
    const raw = localStorage.getItem(SESSION_KEY);
    return raw ? (JSON.parse(raw) as Session) : undefined;
  } catch {
    return undefined;
  }
}

function saveSession(session: Session | undefined): void {
  if (session) localStorage.setItem(SESSION_KEY, JSON.stringify(session));
  else localStorage.removeItem(SESSION_KEY);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A Matrix localpart as this homeserver takes it: lower case, a-z 0-9 . _ = - / (capitals are lower-cased first). */
export const USERNAME_PATTERN = /^[a-z0-9._=\-/]+$/;
/** The spec limits events to 64 KiB; the envelope (IDs, hashes, signatures) takes about 2 KiB of it. */
export const MAX_MESSAGE_CONTENT_BYTES = 65_536 - 2_048;

/** "event exceeds 65536 bytes" → "Event exceeds 65536 bytes." */
function sentence(text: string): string {
  const trimmed = text.trim();
  if (!trimmed) return 'Something went wrong.';
  return trimmed[0]!.toUpperCase() + trimmed.slice(1) + (/[.!?]$/.test(trimmed) ? '' : '.');
}

/** An error in words a person can act on, never a bare code. */
function describeError(error: unknown): string {
  if (error instanceof MatrixApiError) {
    const words: Record<string, string> = {
      M_USER_IN_USE: 'That username is taken. Choose another, or sign in to it.',
      M_INVALID_USERNAME: 'Usernames may use only the letters a\u2013z, digits and . _ = - /.',
      M_EXCLUSIVE: 'That username is reserved. Choose another.',
      M_LIMIT_EXCEEDED: 'Too many attempts in a short time. Wait a moment and try again.',
      M_TOO_LARGE: 'This is too large for the homeserver to accept.',
      M_UNKNOWN_TOKEN: 'You were signed out. Sign in again.',
      M_WEAK_PASSWORD: 'That password is too weak. Choose a longer one.',
    };
    if (words[error.errcode]) return words[error.errcode]!;
    if (error.status === 502 || error.status === 504) return 'The other server could not be reached: it is offline, or not known to any of your peers yet.';
    if (error.status === 503) return 'Your homeserver is busy starting or moving to another tab. Try again in a moment.';
    return sentence(error.message);
  }
  // fetch itself failed: the service worker or the core is not answering.
  if (error instanceof TypeError) return 'Could not reach your homeserver in this browser. Try again in a moment.';
  return sentence(error instanceof Error ? error.message : String(error));
}

/** A join that failed, said plainly: most often the room's server cannot be reached or does not know the room. */
function describeJoinError(error: unknown, target: string): string {
  const server = target.includes(':') ? serverOf(target) : '';
  if (error instanceof MatrixApiError && (error.status === 502 || error.status === 504)) {
    return `Could not reach the server of ${target.replace(server, shortServerName(server))}: it is offline or not found yet. You have not joined.`;
  }
  if (error instanceof MatrixApiError && error.errcode === 'M_NOT_FOUND') {
    // A remote alias that does not resolve: its server has none such, or could not be asked; the core cannot tell which.
    return `No room ${target.replace(server, shortServerName(server))} was found: its server has no such room, or could not be reached. You have not joined.`;
  }
  if (error instanceof MatrixApiError && error.errcode === 'M_FORBIDDEN') return `You may not join ${target}: you need an invite. ${sentence(error.message)}`;
  return `Could not join: ${describeError(error)}`;
}

/** An invite failure in words: most often the invitee's server is not reachable (a 502 from ours). */
function describeInviteError(error: unknown, userId: string): string {
  if (error instanceof MatrixApiError && error.status === 502) {
    return `Could not reach the server of ${shortUserId(userId)}: it is offline or not found yet. Try again once it is listed under Peers.`;
  }
  if (error instanceof MatrixApiError && error.errcode === 'M_INVALID_PARAM') return `\u201c${userId}\u201d is not a Matrix ID (it looks like @name:server).`;
  if (error instanceof MatrixApiError && error.errcode === 'M_NOT_FOUND') return `No user ${shortUserId(userId)} was found. Check the ID. Nobody was invited.`;
  return `Could not invite ${shortUserId(userId)}: ${describeError(error)}`;
}

/** How often the pending marks are refreshed while something waits. */
const PENDING_POLL_MS = 2_000;
const DEMO_ROOM_NAME = 'P2P demo';

/** The built-in client: a status bar, first-run account creation, then rooms and a timeline. */
export class App {
  private readonly api = new MatrixApi();
  private store: Store | undefined;
  private selectedRoomId: string | undefined;
  private syncAbort: AbortController | undefined;
  private readonly receiptsSent = new Map<string, string>();
  private typingSentAt = 0;
  private typingIdleTimer: ReturnType<typeof setTimeout> | undefined;
  private storageTimer: ReturnType<typeof setTimeout> | undefined;
  private storageCheckedAt = 0;

  // The frame is built once; sections are refreshed in place.
  private readonly status = h('span', { class: 'status', role: 'status', 'aria-live': 'polite' });
  private readonly serverName = h('code', { class: 'server-name', title: 'Your homeserver\u2019s name: its ed25519 public key' });
  private readonly storage = h('span', { class: 'storage', title: 'What this origin stores in your browser' });
  private readonly account = h('span', { class: 'account' });
  private readonly main = h('main', { class: 'main' });
  private readonly p2pPanel: P2PPanel;
  /** Own events not yet delivered to every server of their room: event ID → the servers still owed it. */
  private pendingEvents = new Map<string, string[]>();
  private pendingTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(root: HTMLElement, host: BrowserHost) {
    this.p2pPanel = new P2PPanel(host);
    root.replaceChildren(
      h('header', { class: 'topbar' }, h('span', { class: 'brand' }, 'Hearth'), this.serverName, this.status, this.p2pPanel.offlineBadge, h('span', { class: 'spacer' }), this.storage, this.account),
      this.main,
    );
    host.subscribe((state) => this.showHostState(state));
    // A peer came or went: what waited for it may have gone.
    this.p2pPanel.onPeersChanged(() => void this.refreshPending());
    // An invite link (#invite=@user:server) opened while the page was already open.
    window.addEventListener('hashchange', () => this.applyInviteLink());
    window.addEventListener('storage', (event) => {
      // Another tab signed in or out: follow it.
      if (event.key === SESSION_KEY) void this.enter();
    });
    document.addEventListener('visibilitychange', () => this.sendReadReceipt());
    void this.refreshStorage();
  }

  async run(): Promise<void> {
    this.main.replaceChildren(h('div', { class: 'card centered' }, h('div', { class: 'spinner', 'aria-hidden': 'true' }), h('p', {}, 'Starting your homeserver\u2026')));
    // The first answer from /versions means the service worker reaches a running core.
    for (let attempt = 0; ; attempt++) {
      try {
        await this.api.versions();
        break;
      } catch {
        await sleep(Math.min(2000, 100 * 2 ** attempt));
      }
    }
    // Page load to first answer: what the browser benchmark reports as cold start.
    performance.mark('hearth-versions-answered');
    document.body.dataset.homeserver = 'ready';
    await this.enter();
  }

  private showHostState(state: HostState): void {
    const text: Record<HostState['core'], string> = {
      unknown: 'Connecting to your homeserver\u2026',
      starting: 'Homeserver starting\u2026',
      'running-here': 'Homeserver running in this tab',
      'running-elsewhere': 'Homeserver running in another tab',
      failed: `Homeserver failed: ${state.error ?? 'unknown error'}`,
    };
    this.status.textContent = text[state.core];
    this.status.dataset.state = state.core;
    this.serverName.textContent = state.serverName ? `${state.serverName.slice(0, 8)}\u2026${state.serverName.slice(-4)}` : '';
    this.serverName.title = state.serverName ?? '';
  }

  private async refreshStorage(): Promise<void> {
    clearTimeout(this.storageTimer);
    this.storageCheckedAt = Date.now();
    const estimate = await navigator.storage?.estimate?.().catch(() => undefined);
    if (estimate?.usage !== undefined) {
      this.storage.textContent = `Stores ${formatBytes(estimate.usage)}`;
      this.storage.title = `This origin stores ${formatBytes(estimate.usage)} of its ${formatBytes(estimate.quota ?? 0)} quota`;
    }
    this.storageTimer = setTimeout(() => void this.refreshStorage(), 15_000);
  }

  /** Shows the account screen or the rooms, depending on the stored session. */
  private async enter(): Promise<void> {
    this.syncAbort?.abort();
    const session = loadSession();
    this.api.session = session;
    if (session) {
      try {
        await this.api.whoami();
      } catch (error) {
        if (error instanceof MatrixApiError && error.status === 401) {
          saveSession(undefined);
          this.api.session = undefined;
        }
      }
    }
    if (!this.api.session) return this.showAccountForm('register');
    this.showChat(this.api.session);
  }

  // ------------------------------------------------------------------ account

  /** What was typed on the account screen, kept when switching between sign-in and create-account. */
  private readonly accountDraft = { username: '', password: '', confirm: '' };

  private showAccountForm(mode: 'register' | 'login'): void {
    this.account.replaceChildren();
    this.p2pPanel.showIdentity(undefined);
    const draft = this.accountDraft;
    const error = h('p', { class: 'error', role: 'alert' });
    const username = h('input', { id: 'username', name: 'username', autocomplete: 'username', required: true, value: draft.username, 'aria-describedby': mode === 'register' ? 'username-hint' : undefined });
    const password = h('input', { id: 'password', name: 'password', type: 'password', autocomplete: mode === 'register' ? 'new-password' : 'current-password', required: true, value: draft.password });
    const confirm = h('input', { id: 'password-confirm', name: 'password-confirm', type: 'password', autocomplete: 'new-password', required: true, value: draft.confirm });
    username.oninput = () => (draft.username = username.value);
    password.oninput = () => (draft.password = password.value);
    confirm.oninput = () => (draft.confirm = confirm.value);
    const submit = h('button', { type: 'submit', class: 'primary' }, mode === 'register' ? 'Create account' : 'Sign in');
    const form = h(
      'form',
      {
        class: 'card auth',
        onsubmit: async (event: Event) => {
          event.preventDefault();
          error.textContent = '';
          // Matrix user IDs are lower case: take "Alice" as "alice", refuse what no localpart may hold.
          const name = username.value.trim().replace(/^@/, '').replace(/:.*$/, '').toLowerCase();
          if (mode === 'register' && !USERNAME_PATTERN.test(name)) {
            error.textContent = 'Usernames may use only the letters a\u2013z, digits and . _ = - / (no spaces).';
            return username.focus();
          }
          if (mode === 'register' && password.value !== confirm.value) {
            error.textContent = 'The two passwords do not match. Type the same password in both fields.';
            return confirm.focus();
          }
          submit.disabled = true;
          try {
            const session = mode === 'register' ? await this.api.register(name, password.value) : await this.api.login(name, password.value);
            draft.username = draft.password = draft.confirm = '';
            saveSession(session);
            // Ask the browser not to evict this origin's data under storage pressure: it is a homeserver.
            void navigator.storage?.persist?.().catch(() => false);
            this.showChat(session);
          } catch (e) {
            error.textContent = mode === 'login' && e instanceof MatrixApiError && e.errcode === 'M_FORBIDDEN' ? 'Wrong username or password.' : describeError(e);
            submit.disabled = false;
          }
        },
      },
      h('h1', {}, mode === 'register' ? 'Create your account' : 'Sign in'),
      h(
        'p',
        { class: 'hint' },
        mode === 'register'
          ? 'This homeserver runs in your browser. Your account, rooms and keys are stored here, on this device.'
          : 'Sign in to an account on this homeserver.',
      ),
      h('label', { for: 'username' }, 'Username'),
      username,
      mode === 'register' ? h('p', { id: 'username-hint', class: 'hint field-hint' }, 'Letters a\u2013z, digits and . _ = - /; capitals become lower case.') : null,
      h('label', { for: 'password' }, 'Password'),
      password,
      mode === 'register' ? h('label', { for: 'password-confirm' }, 'Confirm password') : null,
      mode === 'register' ? confirm : null,
      error,
      submit,
      h(
        'button',
        { type: 'button', class: 'link', onclick: () => this.showAccountForm(mode === 'register' ? 'login' : 'register') },
        mode === 'register' ? 'I already have an account here' : 'Create a new account instead',
      ),
    );
    this.main.replaceChildren(form);
    (username.value ? password : username).focus();
  }

  // --------------------------------------------------------------------- chat

  private readonly roomList = h('ul', { class: 'room-list', 'aria-label': 'Rooms' });
  private readonly roomPane = h('section', { class: 'room' });
  private readonly memberPane = h('aside', { class: 'members', 'aria-label': 'Members' });
  private readonly timeline = h('ol', { class: 'timeline', 'aria-label': 'Timeline', 'aria-live': 'polite' });
  private readonly typingLine = h('div', { class: 'typing', 'aria-live': 'polite' });
  private readonly roomTitle = h('h2', { class: 'room-title' });
  private readonly roomIdLine = h('code', { class: 'room-id' });
  private readonly sidebarError = h('p', { class: 'error', role: 'alert' });
  private readonly composerInput = h('input', { id: 'composer', name: 'message', autocomplete: 'off', placeholder: 'Write a message\u2026', 'aria-label': 'Message' });
  // Kept across renders, so a sync does not wipe what is being typed (or what an invite link filled in).
  private readonly inviteInput = h('input', { id: 'invite-user-id', placeholder: '@user:server', 'aria-label': 'User ID to invite', required: true });
  private readonly inviteError = h('p', { class: 'error', role: 'alert' });
  private readonly demoInvitee = h('input', { id: 'demo-invitee', placeholder: '@friend:server (optional)', 'aria-label': 'Invite to the demo room' });
  private readonly demoError = h('p', { class: 'error', role: 'alert' });
  private readonly inviteLinkNotice = h('p', { class: 'invite-notice', role: 'status' });
  /** The member list starts open on wide screens, folded at phone width (the invite form shows either way). */
  private membersOpen = !matchMedia('(max-width: 760px)').matches;

  private showChat(session: Session): void {
    this.api.session = session;
    this.store = new Store(session.userId);
    this.selectedRoomId = undefined;
    this.account.replaceChildren(
      h('span', { class: 'user-id', title: session.userId }, session.userId.split(':')[0]),
      h('button', { class: 'link', onclick: () => void this.signOut() }, 'Sign out'),
    );
    const newRoomName = h('input', { id: 'new-room-name', placeholder: 'Room name', 'aria-label': 'New room name', required: true });
    const joinId = h('input', { id: 'join-room-id', placeholder: '!room:server or #alias:server', 'aria-label': 'Room ID to join', required: true });
    const sidebar = h(
      'nav',
      { class: 'sidebar' },
      h('form', { class: 'inline', onsubmit: (e: Event) => this.guard(e, async () => this.selectRoom(await this.api.createRoom(newRoomName.value), () => (newRoomName.value = ''))) }, newRoomName, h('button', { type: 'submit' }, 'Create')),
      h(
        'form',
        {
          class: 'inline',
          onsubmit: (e: Event) =>
            this.guard(e, async () => {
              const target = joinId.value.trim();
              let roomId: string;
              try {
                roomId = await this.api.join(target);
              } catch (error) {
                // Kept in the field, and said plainly: the join did not happen.
                throw new Error(describeJoinError(error, target));
              }
              this.selectRoom(roomId, () => (joinId.value = ''));
            }),
        },
        joinId,
        h('button', { type: 'submit' }, 'Join'),
      ),
      this.sidebarError,
      this.p2pPanel.element,
      h('h3', {}, 'Rooms'),
      this.roomList,
    );
    this.roomPane.replaceChildren(
      h('header', { class: 'room-header' }, this.roomTitle, this.roomIdLine),
      this.timeline,
      this.typingLine,
      h(
        'form',
        { class: 'composer', onsubmit: (e: Event) => this.onSend(e) },
        this.composerInput,
        h('button', { type: 'submit', class: 'primary' }, 'Send'),
      ),
    );
    this.composerInput.oninput = () => this.onTyping();
    this.p2pPanel.showIdentity(session.userId);
    this.p2pPanel.setActions(
      h('h3', {}, 'Start a P2P demo room'),
      h('form', { class: 'inline demo-room', onsubmit: (e: Event) => this.onStartDemoRoom(e) }, this.demoInvitee, h('button', { type: 'submit' }, 'Start')),
      this.demoError,
      this.inviteLinkNotice,
    );
    this.main.replaceChildren(h('div', { class: 'chat' }, sidebar, this.roomPane, this.memberPane));
    this.renderRooms();
    this.renderRoom();
    this.applyInviteLink();
    void this.syncLoop();
  }

  /** `#invite=@user:server` in the address: fill both invite forms with it, for the person to confirm. */
  private applyInviteLink(): void {
    const userId = invitedUserFromHash(location.hash);
    if (!userId || !this.api.session) return;
    if (userId === this.api.session.userId) {
      this.inviteLinkNotice.textContent = 'This is your own invite link: send it to someone else.';
      return;
    }
    this.inviteInput.value = userId;
    this.demoInvitee.value = userId;
    this.p2pPanel.element.open = true;
    this.inviteLinkNotice.textContent = `Invite ${shortUserId(userId)}: start a P2P demo room with them, or invite them to the open room.`;
  }

  /** Creates a private room named "P2P demo" and, if given, invites someone to it. */
  private onStartDemoRoom(event: Event): void {
    event.preventDefault();
    const button = (event.target as HTMLFormElement).querySelector('button')!;
    if (button.disabled) return;
    this.demoError.textContent = '';
    const invitee = this.demoInvitee.value.trim();
    button.disabled = true;
    void (async () => {
      let roomId: string;
      try {
        roomId = await this.api.createRoom(DEMO_ROOM_NAME);
      } catch (error) {
        this.demoError.textContent = `Could not create the room: ${describeError(error)}`;
        return;
      }
      this.selectRoom(roomId);
      if (!invitee) return;
      try {
        // Invited apart from the creation, so an unreachable invitee leaves the room made and says why.
        await this.api.invite(roomId, invitee);
        this.demoInvitee.value = '';
        if (this.inviteInput.value.trim() === invitee) this.inviteInput.value = '';
        this.inviteLinkNotice.textContent = `Invited ${shortUserId(invitee)} to \u201c${DEMO_ROOM_NAME}\u201d.`;
        if (invitedUserFromHash(location.hash) === invitee) history.replaceState(null, '', location.pathname + location.search);
      } catch (error) {
        this.demoError.textContent = `The room was created, but the invite failed. ${describeInviteError(error, invitee)}`;
      }
    })().finally(() => (button.disabled = false));
  }

  /** Asks the homeserver which of our events still wait for other servers; polls while any do. */
  private async refreshPending(): Promise<void> {
    clearTimeout(this.pendingTimer);
    this.pendingTimer = undefined;
    if (!this.api.session || !this.store) return;
    let next: Map<string, string[]>;
    try {
      next = new Map(Object.entries(await this.api.pending()).map(([eventId, entry]) => [eventId, entry.destinations]));
    } catch {
      next = this.pendingEvents;
    }
    const changed = JSON.stringify([...next]) !== JSON.stringify([...this.pendingEvents]);
    this.pendingEvents = next;
    if (changed) this.renderRoom();
    // Calls overlap (sync, send, peers): keep one timer.
    clearTimeout(this.pendingTimer);
    if (next.size > 0) this.pendingTimer = setTimeout(() => void this.refreshPending(), PENDING_POLL_MS);
  }

  /** Runs a sidebar action, showing its error instead of throwing. */
  private guard(event: Event, action: () => Promise<void>): void {
    event.preventDefault();
    this.sidebarError.textContent = '';
    action().catch((error) => (this.sidebarError.textContent = describeError(error)));
  }

  private selectRoom(roomId: string, after?: () => void): void {
    this.selectedRoomId = roomId;
    after?.();
    this.renderRooms();
    this.renderRoom();
    this.composerInput.focus();
    this.sendReadReceipt();
  }

  private async signOut(): Promise<void> {
    this.syncAbort?.abort();
    clearTimeout(this.pendingTimer);
    this.pendingEvents = new Map();
    // The sign-in form shows at once; the token is revoked after, so a busy or slow homeserver
    // does not hold the page on a signed-out session (errors were ignored before as well).
    const leaving = new MatrixApi(this.api.session);
    saveSession(undefined);
    this.api.session = undefined;
    this.showAccountForm('login');
    await leaving.logout().catch(() => undefined);
  }

  private async syncLoop(): Promise<void> {
    const abort = new AbortController();
    this.syncAbort = abort;
    const store = this.store!;
    let since: string | undefined;
    let failures = 0;
    while (!abort.signal.aborted) {
      try {
        const response = await this.api.sync(since, since ? 30_000 : 0, abort.signal);
        if (abort.signal.aborted) return;
        store.applySync(response);
        since = response.next_batch;
        failures = 0;
        if (!this.selectedRoomId) this.selectedRoomId = store.sortedRooms().find((r) => r.membership === 'join')?.id;
        this.renderRooms();
        this.renderRoom();
        this.sendReadReceipt();
        void this.refreshPending();
        if (Date.now() - this.storageCheckedAt > 5000) void this.refreshStorage();
        document.body.dataset.synced = 'true';
      } catch (error) {
        if (abort.signal.aborted) return;
        if (error instanceof MatrixApiError && error.status === 401) {
          saveSession(undefined);
          return void this.enter();
        }
        // The service worker may have been stopped mid-poll, or the core is moving to another tab: poll again.
        failures++;
        await sleep(Math.min(5000, 250 * 2 ** Math.min(failures, 5)));
      }
    }
  }

  private renderRooms(): void {
    const store = this.store;
    if (!store) return;
    const items = store.sortedRooms().map((room) => {
      if (room.membership === 'invite') {
        return h(
          'li',
          { class: 'invite' },
          h('span', { class: 'name' }, store.roomName(room)),
          h('span', { class: 'hint' }, `invited by ${room.inviter ?? 'someone'}`),
          h('button', { onclick: () => void this.api.join(room.id).then(() => this.selectRoom(room.id)).catch((e) => (this.sidebarError.textContent = describeJoinError(e, room.id))) }, 'Accept'),
          h('button', { class: 'link', onclick: () => void this.api.leave(room.id).catch((e) => (this.sidebarError.textContent = describeError(e))) }, 'Decline'),
        );
      }
      const last = room.timeline.filter((e) => e.type === 'm.room.message').at(-1);
      return h(
        'li',
        {},
        h(
          'button',
          { class: room.id === this.selectedRoomId ? 'room-item selected' : 'room-item', 'aria-current': room.id === this.selectedRoomId ? 'true' : undefined, onclick: () => this.selectRoom(room.id) },
          h('span', { class: 'name' }, store.roomName(room)),
          h('span', { class: 'preview' }, last ? `${store.displayName(room, last.sender)}: ${String(last.content.body ?? '')}` : ''),
        ),
      );
    });
    this.roomList.replaceChildren(...(items.length > 0 ? items : [h('li', { class: 'hint' }, 'No rooms yet: create one, or join one by its ID.')]));
  }

  private selectedRoom(): Room | undefined {
    const room = this.selectedRoomId ? this.store?.rooms.get(this.selectedRoomId) : undefined;
    return room?.membership === 'join' ? room : undefined;
  }

  private renderRoom(): void {
    const store = this.store!;
    const room = this.selectedRoom();
    this.roomPane.classList.toggle('empty', !room);
    if (!room) {
      this.roomTitle.textContent = 'No room selected';
      this.roomIdLine.textContent = '';
      this.timeline.replaceChildren(h('li', { class: 'notice' }, 'Create a room, or join one by its ID, to start talking.'));
      this.typingLine.textContent = '';
      this.memberPane.replaceChildren();
      return;
    }
    this.roomTitle.textContent = store.roomName(room);
    this.roomIdLine.textContent = room.id;
    this.roomIdLine.title = 'Room ID: share it so others can join';

    const atBottom = this.timeline.scrollHeight - this.timeline.scrollTop - this.timeline.clientHeight < 40;
    // Which event each user has read up to, for the "seen by" line.
    const readers = new Map<string, string[]>();
    for (const [userId, eventId] of room.receipts) {
      if (userId === store.userId) continue;
      readers.set(eventId, [...(readers.get(eventId) ?? []), store.displayName(room, userId)]);
    }
    const items: HTMLElement[] = [];
    const startReached = room.timeline.some((e) => e.type === 'm.room.create');
    if (room.prevBatch && !startReached) items.push(h('li', { class: 'more' }, h('button', { class: 'link', onclick: () => void this.loadOlder(room) }, 'Load earlier messages')));
    for (const event of room.timeline) {
      const item = this.renderEvent(room, event);
      if (!item) continue;
      const seenBy = event.event_id ? readers.get(event.event_id) : undefined;
      if (seenBy) item.append(h('div', { class: 'receipts' }, `Seen by ${seenBy.join(', ')}`));
      items.push(item);
    }
    for (const echo of room.localEchoes) {
      items.push(
        h(
          'li',
          { class: echo.failed ? 'event pending failed' : 'event pending', 'data-txn-id': echo.txnId },
          h('div', { class: 'meta' }, h('span', { class: 'sender' }, store.displayName(room, store.userId)), h('span', { class: 'time' }, echo.failed ? 'not sent' : 'sending\u2026')),
          h('div', { class: 'body' }, echo.body),
          echo.failed
            ? h(
                'div',
                { class: 'send-failure' },
                h('span', { class: 'send-error', role: 'alert' }, echo.error ?? 'Not sent.'),
                h('button', { type: 'button', class: 'small', onclick: () => this.sendEcho(room, echo) }, 'Retry'),
                h('button', { type: 'button', class: 'small link', onclick: () => this.deleteEcho(room, echo) }, 'Delete'),
              )
            : null,
        ),
      );
    }
    this.timeline.replaceChildren(...items);
    if (atBottom) this.timeline.scrollTop = this.timeline.scrollHeight;

    const typing = room.typing.filter((userId) => userId !== store.userId).map((userId) => store.displayName(room, userId));
    this.typingLine.textContent = typing.length === 0 ? '' : `${typing.join(', ')} ${typing.length === 1 ? 'is' : 'are'} typing\u2026`;

    const invitee = this.inviteInput;
    const inviteError = this.inviteError;
    const members = store.joinedMembers(room);
    // A <details>, so on a narrow screen the list folds under the room and opens on a tap; kept open or shut across renders.
    const memberDetails = h(
      'details',
      { class: 'member-details', open: this.membersOpen, ontoggle: () => (this.membersOpen = memberDetails.open) },
      h('summary', {}, h('h3', {}, `Members (${members.length})`)),
      h(
        'ul',
        { class: 'member-list' },
        ...members.map((member) =>
          h('li', { title: member.userId }, h('span', { class: 'name' }, store.displayName(room, member.userId)), member.userId === store.userId ? h('span', { class: 'hint' }, ' (you)') : null, member.membership === 'invite' ? h('span', { class: 'hint' }, ' invited') : null),
        ),
      ),
    );
    this.memberPane.replaceChildren(
      memberDetails,
      h(
        'form',
        {
          class: 'inline',
          onsubmit: (e: Event) => {
            e.preventDefault();
            const userId = invitee.value.trim();
            inviteError.textContent = '';
            this.api.invite(room.id, userId).then(
              () => (invitee.value = ''),
              (error) => (inviteError.textContent = describeInviteError(error, userId)),
            );
          },
        },
        invitee,
        h('button', { type: 'submit' }, 'Invite'),
      ),
      inviteError,
    );
  }

  private renderEvent(room: Room, event: MatrixEvent): HTMLLIElement | undefined {
    const store = this.store!;
    const who = store.displayName(room, event.sender);
    if (event.type === 'm.room.message') {
      // Stored here but not yet with every server of the room ("pending" is the class of unsent echoes).
      const waitingFor = event.event_id ? this.pendingEvents.get(event.event_id) : undefined;
      return h(
        'li',
        { class: `${event.sender === store.userId ? 'event mine' : 'event'}${waitingFor ? ' undelivered' : ''}`, 'data-event-id': event.event_id, 'data-waiting-for': waitingFor?.length },
        h('div', { class: 'meta' }, h('span', { class: 'sender', title: event.sender }, who), h('time', { class: 'time' }, formatTime(event.origin_server_ts))),
        h('div', { class: 'body' }, typeof event.content.body === 'string' ? event.content.body : '(unsupported message)'),
        waitingFor
          ? h(
              'div',
              { class: 'pending-mark', title: `Not yet delivered to: ${waitingFor.join(', ')}. It goes when they are reachable.` },
              `pending: waiting for ${waitingFor.length} ${waitingFor.length === 1 ? 'peer' : 'peers'}`,
            )
          : null,
      );
    }
    let notice: string | undefined;
    if (event.type === 'm.room.create') notice = `${who} created the room`;
    else if (event.type === 'm.room.name') notice = `${who} named the room \u201c${String(event.content.name ?? '')}\u201d`;
    else if (event.type === 'm.room.topic') notice = `${who} set the topic: ${String(event.content.topic ?? '')}`;
    else if (event.type === 'm.room.member') {
      const target = event.state_key === event.sender ? who : store.displayName(room, event.state_key ?? '');
      const verb: Record<string, string> = { join: 'joined', leave: 'left', invite: 'was invited', ban: 'was banned', knock: 'knocked' };
      notice = `${target} ${verb[String(event.content.membership)] ?? 'changed membership'}`;
    }
    return notice ? h('li', { class: 'notice', 'data-event-id': event.event_id }, notice) : undefined;
  }

  private async loadOlder(room: Room): Promise<void> {
    if (!room.prevBatch) return;
    const result = await this.api.messages(room.id, room.prevBatch);
    this.store!.prepend(room.id, result.chunk, result.end);
    this.renderRoom();
  }

  private onSend(event: Event): void {
    event.preventDefault();
    const room = this.selectedRoom();
    const body = this.composerInput.value.trim();
    if (!room || !body) return;
    this.composerInput.value = '';
    this.stopTyping(room.id);
    const echo = { txnId: this.api.newTxnId(), body } as Room['localEchoes'][number];
    room.localEchoes.push(echo);
    this.sendEcho(room, echo);
  }

  /** A failed message is dropped only when the person says so; its text stays until then. */
  private deleteEcho(room: Room, echo: Room['localEchoes'][number]): void {
    room.localEchoes = room.localEchoes.filter((e) => e !== echo);
    this.renderRoom();
  }

  /** Sends (or resends, with the same transaction ID, so it is applied once) a local echo. */
  private sendEcho(room: Room, echo: Room['localEchoes'][number]): void {
    echo.failed = false;
    echo.error = undefined;
    // The homeserver would refuse it (events are limited to 64 KiB): say so without trying.
    const size = new TextEncoder().encode(JSON.stringify({ msgtype: 'm.text', body: echo.body })).length;
    if (size > MAX_MESSAGE_CONTENT_BYTES) {
      echo.failed = true;
      echo.error = `Message too large: it is ${formatBytes(size)}, and a message can be at most ${formatBytes(MAX_MESSAGE_CONTENT_BYTES)}. Shorten it or split it.`;
      return this.renderRoom();
    }
    this.renderRoom();
    this.api.sendText(room.id, echo.body, echo.txnId).then(
      (eventId) => {
        echo.eventId = eventId;
        void this.refreshPending();
        // The sync may already have delivered it.
        if (room.timeline.some((e) => e.event_id === eventId)) room.localEchoes = room.localEchoes.filter((e) => e !== echo);
        this.renderRoom();
      },
      (error) => {
        echo.failed = true;
        echo.error = error instanceof MatrixApiError && error.errcode === 'M_TOO_LARGE' ? 'Message too large: the homeserver refused it. Shorten it or split it.' : `Not sent. ${describeError(error)}`;
        this.renderRoom();
      },
    );
  }

  private onTyping(): void {
    const room = this.selectedRoom();
    if (!room) return;
    clearTimeout(this.typingIdleTimer);
    if (this.composerInput.value === '') return this.stopTyping(room.id);
    if (Date.now() - this.typingSentAt > TYPING_REFRESH_MS) {
      this.typingSentAt = Date.now();
      void this.api.typing(room.id, true).catch(() => undefined);
    }
    this.typingIdleTimer = setTimeout(() => this.stopTyping(room.id), TYPING_IDLE_MS);
  }

  private stopTyping(roomId: string): void {
    clearTimeout(this.typingIdleTimer);
    if (this.typingSentAt === 0) return;
    this.typingSentAt = 0;
    void this.api.typing(roomId, false).catch(() => undefined);
  }

  /** Marks the newest event of the open room as read, when this tab is visible. */
  private sendReadReceipt(): void {
    const room = this.selectedRoom();
    if (!room || document.visibilityState !== 'visible') return;
    const last = room.timeline.filter((e) => e.event_id && e.sender !== this.store?.userId).at(-1);
    if (!last?.event_id || this.receiptsSent.get(room.id) === last.event_id) return;
    this.receiptsSent.set(room.id, last.event_id);
    void this.api.readReceipt(room.id, last.event_id).catch(() => this.receiptsSent.delete(room.id));
  }
}
