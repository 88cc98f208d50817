/**
 * The chat client behind the views' seam (../chat.ts), on matrix-js-sdk: its sync loop (sliding sync or /sync,
 * lazy-loaded members), rooms and timelines, pagination, and its Rust crypto (encryption.ts) with the store in
 * IndexedDB; sending, uploads, read markers and verification are parts of their own. Only the seam's types leave here.
 */
import { ClientEvent, EventType, HttpApiEvent, KnownMembership, PendingEventOrdering, RelationType, SyncState, type MatrixClient, type Room } from 'matrix-js-sdk';
import { LoggerLevel, Tracing } from '@matrix-org/matrix-sdk-crypto-wasm';
import { type ChatChange, type ChatClient, type ChatNotification, type ChatRoom, type ChatThread, type DeviceInfo, type EncryptionStatus, type LocalEcho, type MatrixEvent as ChatEvent, type MediaState, type Member, type Profile, type RoomSettings, type SearchResults, type SendOptions, type UserTrust, type Verification } from '../chat.ts';
import { editContent } from './content.ts';
import { chatCall } from './convert.ts';
import type { Encryption } from './encryption.ts';
import { MediaCache, type HostUpload } from './media.ts';
import { ReadMarkers } from './read-markers.ts';
import { NotificationWatcher } from './notify.ts';
import { PendingMarks } from './pending.ts';
import { canLoadOlder, chatRoom, loadBackTo, onRoomChanges, chatThread, chatThreadRoots, directRoomIds, displayName, joinedMembers, roomName } from './rooms.ts';
import { saveSession } from './session.ts';
import { PageSlidingSync, wantsSlidingSync } from './sliding.ts';
import { deviceList, Verifications } from './verification.ts';
import { Uploads } from './uploads.ts';
import { Sending } from './sending.ts';
import { ThreadPages } from './threads.ts';
import { createRoom, joinRoom, startDirect } from './room-entry.ts';
import { profile, roomSettings, search, uploadImage } from './settings.ts';

/** "Fill the screen": an opened room loads history until it shows this many messages, or its start. */
const FILL_MESSAGES = 20;
const PAGE = 30;

export interface ClientOptions {
  /** A session made here just now: the origin's crypto store belongs to an older one and is cleared first. */
  fresh: boolean;
  /** A new account: set up cross-signing and secret storage once synced (the password answers user-interactive auth). */
  newAccountPassword?: string;
}

export class SdkChatClient implements ChatClient {
  private readonly listeners = new Set<(change: ChatChange) => void>();
  private readonly notificationListeners = new Set<(notification: ChatNotification) => void>();
  private readonly pending: PendingMarks;
  private readonly sending: Sending;
  /** Rooms being filled with history as they are opened. */
  private readonly filling = new Set<string>();
  private readonly threadPages: ThreadPages;
  private readonly uploads: Uploads;
  private readonly readMarkers: ReadMarkers;
  private readonly mediaCache: MediaCache;
  private started = false;
  private stopped = false;
  private prepared = false;
  private emitQueued = false;
  /** Sliding sync, when the homeserver serves it (sliding.ts); /sync otherwise. */
  private sliding: PageSlidingSync | undefined;
  private readonly verifications: Verifications;

  constructor(
    private readonly client: MatrixClient,
    private readonly crypto: Encryption,
    private readonly options: ClientOptions,
    /** Attachments go to the host's core through it when given (media.ts). */
    private readonly hostUpload?: HostUpload,
  ) {
    this.pending = new PendingMarks(client, () => this.emit('room'));
    this.uploads = new Uploads(client, hostUpload, {
      encrypted: (roomId) => this.sdkRoom(roomId)?.hasEncryptionStateEvent() ?? false,
      changed: () => this.emit('room'),
      progressed: this.roomChanged,
      sent: () => this.refreshPending(),
    });
    this.readMarkers = new ReadMarkers(client);
    this.sending = new Sending(client, { changed: () => this.emit('room'), sent: () => this.refreshPending() });
    this.mediaCache = new MediaCache(client, this.roomChanged);
    this.verifications = new Verifications(client, () => this.emit('verification'));
    this.threadPages = new ThreadPages(client, PAGE, () => this.emit('room'));
  }

  get userId(): string {
    return this.client.getSafeUserId();
  }

  subscribe(listener: (change: ChatChange) => void): void {
    this.listeners.add(listener);
  }

  onNotification(listener: (notification: ChatNotification) => void): void {
    this.notificationListeners.add(listener);
  }

  private emit(change: ChatChange): void {
    if (this.stopped && change !== 'signed-out') return;
    for (const listener of this.listeners) listener(change);
  }

  /** Many SDK events come at once (a sync's timeline, decryptions): one redraw for them. */
  private roomChanged = (): void => {
    if (this.emitQueued) return;
    this.emitQueued = true;
    queueMicrotask(() => {
      this.emitQueued = false;
      this.emit('room');
    });
  };

  start(): void {
    if (this.started) return;
    this.started = true;
    void this.run();
  }

  private async run(): Promise<void> {
    const client = this.client;
    try {
      if (this.options.fresh) await client.clearStores();
      await client.initRustCrypto();
      // initRustCrypto turns the Rust crypto's tracing on at debug level: warnings are enough.
      new Tracing(LoggerLevel.Warn).turnOn();
      await this.crypto.attach(client);
      this.verifications.attach();
    } catch (error) {
      // Encrypted rooms cannot be read here; the rest works (encryption() says it is unavailable).
      console.error('hearth: end-to-end encryption could not start', error);
    }
    // Stopped while the crypto started: close its store now (stopClient does), so a next session can clear it.
    if (this.stopped) return this.client.stopClient();
    client.on(ClientEvent.Sync, (state) => {
      if (state !== SyncState.Prepared && state !== SyncState.Syncing) return;
      if (!this.prepared) {
        this.prepared = true;
        void this.afterFirstSync();
      }
      // Under sliding sync the SDK says an answer is in before it applies the answer's account data and receipts
      // (its extensions run right after, synchronously): a microtask later the rooms' read markers are there too,
      // so the view that opens a room on this change reads where its person left off, not nothing.
      queueMicrotask(() => {
        this.emit('synced');
        void this.pending.refresh();
      });
    });
    onRoomChanges(client, this.roomChanged);
    new NotificationWatcher(client, (notification) => {
      if (!this.stopped) for (const listener of this.notificationListeners) listener(notification);
    });
    client.on(HttpApiEvent.SessionLoggedOut, () => {
      saveSession(undefined);
      this.stop();
      this.emit('signed-out');
    });
    // Lazy-loaded members under sliding sync too: a room knows it may not hold all its members (a list sends
    // only this user's), so the crypto asks /members before it encrypts, as under /sync.
    const options = { lazyLoadMembers: true, pendingEventOrdering: PendingEventOrdering.Detached, threadSupport: true };
    if (await wantsSlidingSync(client)) {
      this.sliding = new PageSlidingSync(client, (roomId) => this.openRoom(roomId));
      if (this.stopped) return client.stopClient();
      return client.startClient({ ...options, slidingSync: this.sliding.slidingSync });
    }
    await client.startClient({ ...options, initialSyncLimit: PAGE });
  }

  private async afterFirstSync(): Promise<void> {
    const password = this.options.newAccountPassword;
    if (!password) return;
    if (!this.client.getCrypto()) return this.crypto.setUpAbandoned();
    try {
      await this.crypto.setUpNewAccount(password);
    } catch (error) {
      console.error('hearth: cross-signing or secret storage setup failed', error);
    }
  }

  /** Resolves unless the homeserver refuses the session (a `MatrixApiError` 401). */
  async checkSession(): Promise<void> {
    await chatCall(() => this.client.whoami());
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.client.stopClient();
    this.pending.stop();
    this.mediaCache.clear();
  }

  async signOut(): Promise<void> {
    this.stop();
    // The session is forgotten at once; the token is revoked after, so a busy or slow homeserver
    // does not hold the page on a signed-out session. The device's keys go with it.
    saveSession(undefined);
    this.crypto.confirmRecoveryKeySaved();
    await this.client.logout().catch(() => undefined);
    await this.client.clearStores().catch(() => undefined);
  }

  private sdkRoom(roomId: string): Room | null {
    return this.client.getRoom(roomId);
  }

  sortedRooms(): ChatRoom[] {
    const direct = directRoomIds(this.client);
    const rooms = this.client.getRooms().filter((r) => r.getMyMembership() === KnownMembership.Join || r.getMyMembership() === KnownMembership.Invite);
    const invite = (r: Room) => (r.getMyMembership() === KnownMembership.Invite ? -1 : 0);
    return rooms.sort((a, b) => invite(a) - invite(b) || b.getLastActiveTimestamp() - a.getLastActiveTimestamp()).map((r) => chatRoom(this.client, r, this.sending.refused, direct, this.uploads.of(r.roomId)));
  }

  room(roomId: string): ChatRoom | undefined {
    const room = this.sdkRoom(roomId);
    return room ? chatRoom(this.client, room, this.sending.refused, directRoomIds(this.client), this.uploads.of(roomId)) : undefined;
  }

  thread(roomId: string, rootId: string): ChatThread | undefined {
    const room = this.sdkRoom(roomId);
    return room ? chatThread(this.client, room, rootId) : undefined;
  }

  openThread(roomId: string, rootId: string): void {
    const room = this.sdkRoom(roomId);
    if (room) this.threadPages.open(room, rootId);
  }

  threads(roomId: string): ChatEvent[] {
    const room = this.sdkRoom(roomId);
    return room ? chatThreadRoots(this.client, room) : [];
  }

  loadThreads(roomId: string): void {
    const room = this.sdkRoom(roomId);
    if (room) this.threadPages.loadList(room);
  }

  media(content: Record<string, any>, kind: 'thumbnail' | 'full'): MediaState {
    return this.mediaCache.state(content, kind);
  }

  loadMedia(content: Record<string, any>, kind: 'thumbnail' | 'full'): Promise<string> {
    return this.mediaCache.load(content, kind);
  }

  sendFile(roomId: string, file: File, options: { threadId?: string; caption?: string } = {}): void {
    this.uploads.send(roomId, file, options);
  }

  retryUpload(roomId: string, uploadId: string): void {
    this.uploads.retry(roomId, uploadId);
  }

  discardUpload(roomId: string, uploadId: string): void {
    this.uploads.discard(roomId, uploadId);
  }

  roomName(room: ChatRoom): string {
    const sdkRoom = this.sdkRoom(room.id);
    return sdkRoom ? roomName(this.client, sdkRoom) : room.id;
  }

  displayName(room: ChatRoom, userId: string): string {
    return displayName(this.sdkRoom(room.id), userId);
  }

  joinedMembers(room: ChatRoom): Member[] {
    const sdkRoom = this.sdkRoom(room.id);
    return sdkRoom ? joinedMembers(sdkRoom) : [];
  }

  canLoadOlder(room: ChatRoom): boolean {
    const sdkRoom = this.sdkRoom(room.id);
    return !!sdkRoom && canLoadOlder(sdkRoom);
  }

  waitingFor(eventId: string): readonly string[] | undefined {
    return this.pending.waitingFor(eventId);
  }

  refreshPending(): void {
    void this.pending.refresh();
  }

  /** Encryption's status changed (encryption.ts). */
  encryptionChanged(): void {
    this.emit('encryption');
  }

  encryption(): EncryptionStatus {
    return this.crypto.current();
  }

  confirmRecoveryKeySaved(): void {
    this.crypto.confirmRecoveryKeySaved();
  }

  keysNotBackedUp(): Promise<number> {
    return chatCall(() => this.crypto.keysNotBackedUp());
  }

  keysBackedUp(): Promise<void> {
    return chatCall(() => this.crypto.keysBackedUp());
  }

  verifyWithRecoveryKey(recoveryKey: string): Promise<void> {
    return chatCall(() => this.crypto.verifyWithRecoveryKey(recoveryKey));
  }

  verification(): Verification | undefined {
    return this.verifications.current();
  }

  requestVerification(userId: string, roomId: string): Promise<void> {
    return chatCall(() => this.verifications.requestUser(userId, roomId));
  }

  verifyWithOtherDevice(): Promise<void> {
    return chatCall(() => this.verifications.requestOwnDevices());
  }

  acceptVerification(): void {
    this.verifications.accept();
  }

  cancelVerification(): void {
    this.verifications.cancel();
  }

  compareEmoji(match: boolean): void {
    this.verifications.compare(match);
  }

  dismissVerification(): void {
    this.verifications.dismiss();
  }

  userTrust(userId: string): UserTrust | undefined {
    return this.verifications.userTrust(userId);
  }

  createRoom(name: string, options: { public?: boolean } = {}): Promise<string> {
    return createRoom(this.client, name, options);
  }

  startDirect(userId: string): Promise<string> {
    return startDirect(this.client, userId);
  }

  async join(roomIdOrAlias: string): Promise<string> {
    const roomId = await joinRoom(this.client, roomIdOrAlias);
    this.openRoom(roomId);
    return roomId;
  }

  async leave(roomId: string, options: { forget?: boolean } = {}): Promise<void> {
    await chatCall(() => this.client.leave(roomId));
    if (options.forget) await chatCall(() => this.client.forget(roomId, true));
    this.emit('room');
  }

  leftRooms(): ChatRoom[] {
    const direct = directRoomIds(this.client);
    return this.client
      .getRooms()
      .filter((r) => r.getMyMembership() === KnownMembership.Leave || r.getMyMembership() === KnownMembership.Ban)
      .map((r) => chatRoom(this.client, r, this.sending.refused, direct, []));
  }

  async forget(roomId: string): Promise<void> {
    await chatCall(() => this.client.forget(roomId, true));
    this.emit('room');
  }

  roomSettings(roomId: string): RoomSettings | undefined {
    const room = this.sdkRoom(roomId);
    return room ? roomSettings(this.client, room) : undefined;
  }

  async setRoomName(roomId: string, name: string): Promise<void> {
    await chatCall(() => this.client.setRoomName(roomId, name));
  }

  async setRoomTopic(roomId: string, topic: string): Promise<void> {
    await chatCall(() => this.client.setRoomTopic(roomId, topic));
  }

  async setRoomAvatar(roomId: string, image: File): Promise<void> {
    const url = await uploadImage(this.client, image);
    await chatCall(() => this.client.sendStateEvent(roomId, EventType.RoomAvatar, { url }, ''));
  }

  profile(): Promise<Profile> {
    return profile(this.client);
  }

  async setDisplayName(name: string): Promise<void> {
    await chatCall(() => this.client.setDisplayName(name));
  }

  async setAvatar(image: File): Promise<void> {
    const url = await uploadImage(this.client, image);
    await chatCall(() => this.client.setAvatarUrl(url));
  }

  search(term: string, roomId?: string): Promise<SearchResults> {
    return search(this.client, term, roomId);
  }

  devices(userId: string): Promise<DeviceInfo[]> {
    return deviceList(this.client, userId);
  }

  async invite(roomId: string, userId: string): Promise<void> {
    await chatCall(() => this.client.invite(roomId, userId));
  }

  async loadOlder(roomId: string): Promise<void> {
    const room = this.sdkRoom(roomId);
    if (!room || !canLoadOlder(room)) return;
    await chatCall(() => this.client.scrollback(room, PAGE));
    this.emit('room');
  }

  openRoom(roomId: string): void {
    const room = this.sdkRoom(roomId);
    if (!room || room.getMyMembership() !== KnownMembership.Join) return;
    // Under sliding sync the open room is subscribed to (its longer timeline, all its state): filled once that is in.
    if (this.sliding && !this.sliding.subscribe(roomId)) return;
    if (this.filling.has(roomId) || !canLoadOlder(room)) return;
    const messages = room.getLiveTimeline().getEvents().filter((e) => e.getType() === EventType.RoomMessage || e.isEncrypted()).length;
    if (messages >= FILL_MESSAGES) return;
    this.filling.add(roomId);
    this.client.scrollback(room, PAGE).then(
      () => {
        this.filling.delete(roomId);
        this.emit('room');
        this.openRoom(roomId);
      },
      // A page that fails stays: "Load earlier messages" is still offered.
      () => this.filling.delete(roomId),
    );
  }

  send(roomId: string, body: string, options: SendOptions = {}): void {
    this.sending.send(roomId, body, options);
  }

  retry(roomId: string, echo: LocalEcho): void {
    this.sending.retry(roomId, echo);
  }

  /** A failed message is dropped only when the person says so; its text stays until then. */
  discard(roomId: string, echo: LocalEcho): void {
    this.sending.discard(roomId, echo);
  }

  async react(roomId: string, eventId: string, key: string): Promise<void> {
    const room = this.sdkRoom(roomId);
    const mine = room?.relations
      .getChildEventsForEvent(eventId, RelationType.Annotation, EventType.Reaction)
      ?.getRelations()
      .find((e) => e.getSender() === this.userId && !e.isRedacted() && e.getRelation()?.key === key);
    const mineId = mine?.getId();
    if (mineId) await chatCall(() => this.client.redactEvent(roomId, mineId));
    else await chatCall(() => this.client.sendEvent(roomId, EventType.Reaction, { 'm.relates_to': { rel_type: RelationType.Annotation, event_id: eventId, key } }));
  }

  async edit(roomId: string, eventId: string, body: string): Promise<void> {
    const original = this.sdkRoom(roomId)?.findEventById(eventId);
    const emote = original?.getContent()['msgtype'] === 'm.emote';
    await chatCall(() => this.client.sendMessage(roomId, editContent(eventId, body, emote) as never));
  }

  async redact(roomId: string, eventId: string): Promise<void> {
    await chatCall(() => this.client.redactEvent(roomId, eventId));
  }

  setTyping(roomId: string, typing: boolean): void {
    void this.client.sendTyping(roomId, typing, 30_000).catch(() => undefined);
  }

  markRead(roomId: string): void {
    const room = this.sdkRoom(roomId);
    if (room) this.readMarkers.read(room);
  }

  async loadUntil(roomId: string, eventId: string): Promise<boolean> {
    const room = this.sdkRoom(roomId);
    return room ? loadBackTo(this.client, room, eventId, PAGE, () => this.emit('room')) : false;
  }
}
