/**
 * The hand-written chat client behind the views' seam (../chat.ts): fetch (matrix.ts), room
 * state from /sync (store.ts), the sync loop (sync-loop.ts), sends with local echoes, and
 * Hearth's pending marks. Sessions are kept in localStorage (session.ts).
 */
import { MatrixApiError, MAX_MESSAGE_CONTENT_BYTES, MessageTooLarge, type ChatAccounts, type ChatChange, type ChatClient, type ChatRoom, type LocalEcho, type Member } from '../chat.ts';
import { MatrixApi } from './matrix.ts';
import { loadSession, saveSession, SESSION_KEY } from './session.ts';
import { Store, type LocalEcho as StoredEcho, type Room } from './store.ts';
import { runSyncLoop, sleep } from './sync-loop.ts';

/** How often the pending marks are refreshed while something waits. */
const PENDING_POLL_MS = 2_000;

export class HearthClient implements ChatClient {
  private readonly store: Store;
  private readonly listeners = new Set<(change: ChatChange) => void>();
  private readonly abort = new AbortController();
  private started = false;
  private stopped = false;
  private readonly receiptsSent = new Map<string, string>();
  /** Own events not yet delivered to every server of their room: event ID → the servers still owed it. */
  private pendingEvents = new Map<string, string[]>();
  private pendingTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly api: MatrixApi) {
    this.store = new Store(api.session!.userId);
  }

  get userId(): string {
    return this.store.userId;
  }

  subscribe(listener: (change: ChatChange) => void): void {
    this.listeners.add(listener);
  }

  private emit(change: ChatChange): void {
    for (const listener of this.listeners) listener(change);
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    void runSyncLoop(this.api, this.abort.signal, {
      apply: (response) => this.store.applySync(response),
      applied: () => {
        this.emit('synced');
        this.refreshPending();
      },
      onSignedOut: () => {
        saveSession(undefined);
        this.emit('signed-out');
      },
    });
  }

  stop(): void {
    this.stopped = true;
    this.abort.abort();
    clearTimeout(this.pendingTimer);
    this.pendingEvents = new Map();
  }

  async signOut(): Promise<void> {
    this.stop();
    // The session is forgotten at once; the token is revoked after, so a busy or slow homeserver
    // does not hold the page on a signed-out session (errors were ignored before as well).
    saveSession(undefined);
    await this.api.logout().catch(() => undefined);
  }

  sortedRooms(): ChatRoom[] {
    return this.store.sortedRooms();
  }

  room(roomId: string): ChatRoom | undefined {
    return this.store.rooms.get(roomId);
  }

  roomName(room: ChatRoom): string {
    return this.store.roomName(room as Room);
  }

  displayName(room: ChatRoom, userId: string): string {
    return this.store.displayName(room as Room, userId);
  }

  joinedMembers(room: ChatRoom): Member[] {
    return this.store.joinedMembers(room as Room);
  }

  canLoadOlder(room: ChatRoom): boolean {
    return !!(room as Room).prevBatch && !room.timeline.some((e) => e.type === 'm.room.create');
  }

  waitingFor(eventId: string): readonly string[] | undefined {
    return this.pendingEvents.get(eventId);
  }

  refreshPending(): void {
    void this.pollPending();
  }

  /** Asks the homeserver which of our events still wait for other servers; polls while any do. */
  private async pollPending(): Promise<void> {
    clearTimeout(this.pendingTimer);
    this.pendingTimer = undefined;
    if (this.stopped) return;
    let next: Map<string, string[]>;
    try {
      next = new Map(Object.entries(await this.api.pending()).map(([eventId, entry]) => [eventId, entry.destinations]));
    } catch {
      next = this.pendingEvents;
    }
    if (this.stopped) return;
    const changed = JSON.stringify([...next]) !== JSON.stringify([...this.pendingEvents]);
    this.pendingEvents = next;
    if (changed) this.emit('room');
    // Calls overlap (sync, send, peers): keep one timer.
    clearTimeout(this.pendingTimer);
    if (next.size > 0) this.pendingTimer = setTimeout(() => void this.pollPending(), PENDING_POLL_MS);
  }

  createRoom(name: string): Promise<string> {
    return this.api.createRoom(name);
  }

  join(roomIdOrAlias: string): Promise<string> {
    return this.api.join(roomIdOrAlias);
  }

  async leave(roomId: string): Promise<void> {
    await this.api.leave(roomId);
  }

  async invite(roomId: string, userId: string): Promise<void> {
    await this.api.invite(roomId, userId);
  }

  async loadOlder(roomId: string): Promise<void> {
    const room = this.store.rooms.get(roomId);
    if (!room?.prevBatch) return;
    const result = await this.api.messages(room.id, room.prevBatch);
    this.store.prepend(room.id, result.chunk, result.end);
    this.emit('room');
  }

  send(roomId: string, body: string): void {
    const room = this.store.rooms.get(roomId);
    if (!room) return;
    const echo: StoredEcho = { txnId: this.api.newTxnId(), body };
    room.localEchoes.push(echo);
    this.sendEcho(room, echo);
  }

  retry(roomId: string, echo: LocalEcho): void {
    const room = this.store.rooms.get(roomId);
    if (room?.localEchoes.includes(echo)) this.sendEcho(room, echo);
  }

  /** A failed message is dropped only when the person says so; its text stays until then. */
  discard(roomId: string, echo: LocalEcho): void {
    const room = this.store.rooms.get(roomId);
    if (!room) return;
    room.localEchoes = room.localEchoes.filter((e) => e !== echo);
    this.emit('room');
  }

  /** Sends (or resends, with the same transaction ID, so it is applied once) a local echo. */
  private sendEcho(room: Room, echo: StoredEcho): void {
    echo.failed = false;
    echo.error = undefined;
    // The homeserver would refuse it (events are limited to 64 KiB): say so without trying.
    const size = new TextEncoder().encode(JSON.stringify({ msgtype: 'm.text', body: echo.body })).length;
    if (size > MAX_MESSAGE_CONTENT_BYTES) {
      echo.failed = true;
      echo.error = new MessageTooLarge(size, MAX_MESSAGE_CONTENT_BYTES);
      return this.emit('room');
    }
    this.emit('room');
    this.api.sendText(room.id, echo.body, echo.txnId).then(
      (eventId) => {
        echo.eventId = eventId;
        this.refreshPending();
        // The sync may already have delivered it.
        if (room.timeline.some((e) => e.event_id === eventId)) room.localEchoes = room.localEchoes.filter((e) => e !== echo);
        this.emit('room');
      },
      (error) => {
        echo.failed = true;
        echo.error = error;
        this.emit('room');
      },
    );
  }

  setTyping(roomId: string, typing: boolean): void {
    void this.api.typing(roomId, typing).catch(() => undefined);
  }

  markRead(roomId: string): void {
    const room = this.store.rooms.get(roomId);
    if (!room) return;
    const last = room.timeline.filter((e) => e.event_id && e.sender !== this.userId).at(-1);
    if (!last?.event_id || this.receiptsSent.get(room.id) === last.event_id) return;
    this.receiptsSent.set(room.id, last.event_id);
    void this.api.readReceipt(room.id, last.event_id).catch(() => this.receiptsSent.delete(room.id));
  }
}

/** Sessions of the homeserver at `baseUrl`: the one kept in localStorage, and new ones. */
export class HearthAccounts implements ChatAccounts {
  constructor(private readonly baseUrl: string) {}

  /** The first answer from /versions means the service worker reaches a running core. */
  async waitForHomeserver(): Promise<void> {
    const api = new MatrixApi(this.baseUrl);
    for (let attempt = 0; ; attempt++) {
      try {
        await api.versions();
        return;
      } catch {
        await sleep(Math.min(2000, 100 * 2 ** attempt));
      }
    }
  }

  async resume(): Promise<ChatClient | undefined> {
    const session = loadSession();
    if (!session) return undefined;
    const api = new MatrixApi(this.baseUrl, session);
    try {
      await api.whoami();
    } catch (error) {
      // Only a refused token ends the session; a homeserver that does not answer keeps it.
      if (error instanceof MatrixApiError && error.status === 401) {
        saveSession(undefined);
        return undefined;
      }
    }
    return new HearthClient(api);
  }

  async register(username: string, password: string): Promise<ChatClient> {
    return this.signedIn(await new MatrixApi(this.baseUrl).register(username, password));
  }

  async login(username: string, password: string): Promise<ChatClient> {
    return this.signedIn(await new MatrixApi(this.baseUrl).login(username, password));
  }

  private signedIn(session: NonNullable<MatrixApi['session']>): ChatClient {
    saveSession(session);
    return new HearthClient(new MatrixApi(this.baseUrl, session));
  }

  onSessionChanged(listener: () => void): void {
    window.addEventListener('storage', (event) => {
      if (event.key === SESSION_KEY) listener();
    });
  }
}
