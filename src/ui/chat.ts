/**
 * The seam between the chat client and the views. The views (account form, room list,
 * room view, composer, demo room) use only what is declared here; the client behind it
 * (client/, on matrix-js-sdk and its Rust crypto) keeps the session, runs the sync loop,
 * sends, encrypts, and holds the rooms' state. The views never import matrix-js-sdk.
 */

export interface Session {
  userId: string;
  accessToken: string;
  deviceId: string;
}

/** The homeserver answered with an error. A `TypeError` instead means it could not be reached at all. */
export class MatrixApiError extends Error {
  override name = 'MatrixApiError';
  constructor(
    readonly status: number,
    readonly errcode: string,
    message: string,
  ) {
    super(message);
  }
}

/** The spec limits events to 64 KiB; the envelope (IDs, hashes, signatures) takes about 2 KiB of it. */
export const MAX_MESSAGE_CONTENT_BYTES = 65_536 - 2_048;

/** A message refused before it was sent: the homeserver would refuse it. */
export class MessageTooLarge extends Error {
  override name = 'MessageTooLarge';
  constructor(
    readonly size: number,
    readonly limit: number,
  ) {
    super(`message content is ${size} bytes, over ${limit}`);
  }
}

/** An event as the client-server API gives it. */
export interface MatrixEvent {
  event_id?: string;
  type: string;
  sender: string;
  state_key?: string;
  origin_server_ts?: number;
  content: Record<string, any>;
  unsigned?: Record<string, any>;
  /** Sent encrypted (`m.room.encrypted` on the wire); `type` and `content` are the decrypted ones. */
  encrypted?: boolean;
  /** Still being decrypted: `type` is `m.room.encrypted`. */
  decrypting?: boolean;
  /** It could not be decrypted, and why: the views say it in words. */
  undecryptable?: DecryptionProblem;
  /** Replaced by an edit (`m.replace`): `content` is the newest version's. */
  edited?: boolean;
  /** Deleted (redacted): its content is gone. */
  redacted?: boolean;
  /** The message this one answers (`m.in_reply_to`), as far as this page knows it. */
  replyTo?: { eventId: string; sender: string | undefined; body: string | undefined };
  /** Reactions (`m.annotation`) by key, in the order first given. */
  reactions?: readonly Reaction[];
  /** A thread's root: how many replies it has, and the latest. */
  thread?: ThreadSummary;
}

export interface ThreadSummary {
  readonly count: number;
  readonly latest: { readonly sender: string; readonly body: string } | undefined;
}

/** A thread as its pane shows it: the root, its replies (oldest first), and this page's replies not yet taken. */
export interface ChatThread {
  readonly rootId: string;
  readonly root: MatrixEvent | undefined;
  readonly replies: readonly MatrixEvent[];
  readonly localEchoes: readonly LocalEcho[];
}

/** A file being uploaded from this page (then sent as an `m.image` / `m.file` message). */
export interface Upload {
  readonly id: string;
  readonly name: string;
  readonly size: number;
  /** What the person wrote under it, if anything. */
  readonly caption?: string;
  /** Bytes sent so far. */
  readonly loaded: number;
  readonly failed?: boolean;
  /** Why it failed (`FileTooLarge`, `MatrixApiError`, a `TypeError` when unreachable): the views say it in words. */
  readonly error?: unknown;
}

/** A file over the homeserver's upload limit (`m.upload.size`), refused before or by the upload. */
export class FileTooLarge extends Error {
  override name = 'FileTooLarge';
  constructor(
    readonly size: number,
    readonly limit: number | undefined,
  ) {
    super(`the file is ${size} bytes, over the upload limit${limit === undefined ? '' : ` of ${limit}`}`);
  }
}

/** An attachment's bytes as the page shows them: fetched with the access token (and decrypted), as an object URL. */
export type MediaState = { readonly status: 'loading' } | { readonly status: 'ready'; readonly url: string } | { readonly status: 'failed'; readonly error: unknown };

export interface Reaction {
  readonly key: string;
  readonly count: number;
  /** This user's own reaction with this key, if any (undoing it redacts that event). */
  readonly mine: boolean;
}

/** How a message is sent: as an answer to another, or as an action (`/me`, `m.emote`). */
export interface SendOptions {
  replyTo?: string;
  emote?: boolean;
  /** In the thread of this root event (`m.thread`). */
  threadId?: string;
}

/**
 * Why an encrypted message cannot be read (after matrix-js-sdk's DecryptionFailureCode):
 * `no-keys` the sender's device has not shared its key with this one (yet); `withheld` the sender
 * refused to share it (`withheld-unverified`: because this device is not verified); `later-index`
 * the key this device has starts after this message; `before-join` sent before you joined;
 * `backup-missing` sent before this device existed and not in the key backup; `backup-unset` sent
 * before this device existed and no backup is set up here (verify this device); `backup-working`
 * the backup is being read; `identity-changed` the sender's verified identity changed; `unsigned-device`
 * `unknown-device` the sender's device is not signed by its owner or not known; `other` anything else.
 */
export type DecryptionProblem =
  | 'no-keys'
  | 'withheld'
  | 'withheld-unverified'
  | 'later-index'
  | 'before-join'
  | 'backup-missing'
  | 'backup-unset'
  | 'backup-working'
  | 'identity-changed'
  | 'unsigned-device'
  | 'unknown-device'
  | 'other';

export interface Member {
  userId: string;
  displayName: string | undefined;
  membership: string;
}

/** A message sent from this page that the homeserver has not echoed back yet. */
export interface LocalEcho {
  readonly txnId: string;
  readonly body: string;
  readonly failed?: boolean;
  /** Why it was not sent (a `MatrixApiError`, `MessageTooLarge`, …): the views say it in words. */
  readonly error?: unknown;
}

/** What the views read of a room. */
export interface ChatRoom {
  readonly id: string;
  readonly membership: 'join' | 'invite' | 'leave';
  /** Who invited us (invites only). */
  readonly inviter: string | undefined;
  readonly timeline: readonly MatrixEvent[];
  /** Who is typing now. */
  readonly typing: readonly string[];
  /** Latest m.read receipt of each user: user ID → event ID. */
  readonly receipts: ReadonlyMap<string, string>;
  /**
   * This user's fully-read marker (`m.fully_read` room account data, shared by their devices), or failing one
   * their own read receipt: the events after it are new to them. Undefined when they have none in this room.
   */
  readonly fullyRead: string | undefined;
  readonly localEchoes: readonly LocalEcho[];
  /** Files being uploaded from this page, or whose upload failed. */
  readonly uploads: readonly Upload[];
  /** Messages are end-to-end encrypted (the room has `m.room.encryption`). */
  readonly encrypted: boolean;
  /** Anyone may join (join rule `public`). */
  readonly isPublic: boolean;
  /** A direct message: listed in `m.direct`, or invited to one. */
  readonly isDirect: boolean;
  /** Unread notifications and highlights (mentions) as the homeserver counts them. */
  readonly unread: number;
  readonly highlights: number;
}

/** One of a user's devices, as this device's crypto knows it. */
export interface DeviceInfo {
  readonly deviceId: string;
  readonly displayName: string | undefined;
  /** Signed by its owner's cross-signing key (the owner verified it), or verified by this user. */
  readonly verified: boolean;
}

/** What this device knows of another user's identity (cross-signing). */
export interface UserTrust {
  /** This user verified them (emoji verification signed their identity), and it has not changed since. */
  readonly verified: boolean;
  /** Verified once, by this user or before an identity change: their new devices deserve a warning. */
  readonly wasVerified: boolean;
  /** Devices of theirs that they have not verified (not signed by their own identity): when `wasVerified`, a new session to warn of. */
  readonly unverifiedDevices: readonly DeviceInfo[];
}

/**
 * An emoji verification (SAS, issue 38) with another user, or between two devices of this user (`ownDevice`).
 * `incoming`: asked of this device, to accept or decline; `waiting`: asked of them, not answered yet;
 * `starting`: accepted, the emoji are being agreed; `compare`: `emoji` are shown, to compare with theirs;
 * `confirmed`: they match here, waiting for the other side; `done`: verified; `cancelled`: by `cancelledBy`, with `reason`.
 */
export interface Verification {
  readonly otherUserId: string;
  /** The other user's name as a room shows it (their user ID when no room does). */
  readonly otherName: string;
  readonly ownDevice: boolean;
  /** The other device, when known (one's own other device, or the one that answered). */
  readonly otherDeviceId: string | undefined;
  readonly phase: 'incoming' | 'waiting' | 'starting' | 'compare' | 'confirmed' | 'done' | 'cancelled';
  /** The 7 emoji both sides show, each with its name (from the SAS). */
  readonly emoji: readonly { readonly symbol: string; readonly name: string }[];
  readonly cancelledBy?: 'me' | 'them';
  /** Why it was cancelled, as the spec's code says it (`m.mismatched_sas`, `m.user`, `m.timeout`, …). */
  readonly cancelCode?: string;
}

/** A message that deserves a notification, with what a notification may say of it. */
export interface ChatNotification {
  readonly roomId: string;
  readonly roomName: string;
  /** The sender's display name in the room. */
  readonly sender: string;
  /** The message's text (for a file, its name). */
  readonly body: string;
  readonly encrypted: boolean;
}

/** This device's end-to-end encryption, as the page shows it. */
export interface EncryptionStatus {
  /** The Rust crypto runs here (false: it could not start, encrypted rooms cannot be read). */
  readonly available: boolean;
  /** This device is signed by its owner's cross-signing key: other devices trust it. */
  readonly verified: boolean;
  /** The account has cross-signing keys, and this device could verify with the recovery key. */
  readonly canVerify: boolean;
  /** The recovery key made with this account, shown until the person says it is saved. */
  readonly recoveryKey: string | undefined;
  /** A new account's cross-signing and recovery key are being made: the key comes next. */
  readonly settingUp: boolean;
}

/** The recovery key typed does not open the account's secret storage. */
export class WrongRecoveryKey extends Error {
  override name = 'WrongRecoveryKey';
}

/**
 * What changed: `synced` after each /sync response (rooms, timelines, typing, receipts),
 * `room` when only what a room shows changed here (a send's state, pending marks, older
 * events, decryptions), `signed-out` when the homeserver no longer takes the session,
 * `encryption` when this device's encryption status changed, `verification` when a verification or
 * what this device knows of someone's identity (`userTrust`) changed.
 */
export type ChatChange = 'synced' | 'room' | 'signed-out' | 'encryption' | 'verification';

/** A signed-in client. */
export interface ChatClient {
  readonly userId: string;
  /** Starts the sync loop (once). */
  start(): void;
  /** Stops the sync loop and every timer: another session takes over, or none. */
  stop(): void;
  /** Stops, forgets the session at once, and then revokes it on the homeserver. */
  signOut(): Promise<void>;
  subscribe(listener: (change: ChatChange) => void): void;
  /** A new message that the account's push rules say deserves a notification (not one's own, not the past). */
  onNotification(listener: (notification: ChatNotification) => void): void;

  /** Invites first, then by the newest event. */
  sortedRooms(): ChatRoom[];
  room(roomId: string): ChatRoom | undefined;
  roomName(room: ChatRoom): string;
  displayName(room: ChatRoom, userId: string): string;
  /** Joined and invited members, by name. */
  joinedMembers(room: ChatRoom): Member[];
  /** Events before the timeline can be loaded (`loadOlder`): the room's start is not reached. */
  canLoadOlder(room: ChatRoom): boolean;
  /** The servers an own event has not reached yet (Hearth's pending list); undefined when delivered. */
  waitingFor(eventId: string): readonly string[] | undefined;
  /** Asks again which own events wait for other servers (peers came or went); polls while any do. */
  refreshPending(): void;

  /** Creates a room: private and encrypted, or public and not. */
  createRoom(name: string, options?: { public?: boolean }): Promise<string>;
  /**
   * Starts an encrypted direct message with `userId` (listed in `m.direct`) and invites them; returns the room even when the invite failed (`DirectInviteFailed`).
   * Their profile is asked first (over federation for another server's user): when it cannot be had, nothing is created (`DirectTargetUnknown`).
   */
  startDirect(userId: string): Promise<string>;
  /** The room is shown: loads its history from /messages until the screen is filled or its start is reached. */
  openRoom(roomId: string): void;
  encryption(): EncryptionStatus;
  /** The person saved the recovery key: it is not shown again. */
  confirmRecoveryKeySaved(): void;
  /**
   * How many of this device's room keys are not in the account's key backup yet (0 with no backup on). The SDK uploads
   * a new key up to 10 s after it is made: signing out before then would lose the messages only that key opens.
   */
  keysNotBackedUp(): Promise<number>;
  /** Resolves once every room key of this device is in the key backup (or the backup is off). */
  keysBackedUp(): Promise<void>;
  /** Verifies this device with the account's recovery key: it is cross-signed, and the key backup is restored. Throws `WrongRecoveryKey`. */
  verifyWithRecoveryKey(recoveryKey: string): Promise<void>;
  /** The emoji verification going on, or the last one until dismissed. */
  verification(): Verification | undefined;
  /** Asks `userId` to verify by emoji in `roomId` (an encrypted room they are in): they are asked there. */
  requestVerification(userId: string, roomId: string): Promise<void>;
  /** Asks this user's other devices to verify this one by emoji (instead of the recovery key); whichever accepts goes on. */
  verifyWithOtherDevice(): Promise<void>;
  /** Answers a verification asked of this device: it goes on to the emoji. */
  acceptVerification(): void;
  /** Cancels the verification going on (declines one asked of this device). */
  cancelVerification(): void;
  /** The emoji shown are the same as the other side's (`match`), or not: then the verification is cancelled. */
  compareEmoji(match: boolean): void;
  /** The finished or cancelled verification is no longer shown. */
  dismissVerification(): void;
  /** What this device knows of `userId`'s identity; undefined until fetched (a `verification` change tells when). */
  userTrust(userId: string): UserTrust | undefined;
  join(roomIdOrAlias: string): Promise<string>;
  /** Leaves the room (declines an invite); `forget` also drops it from this account's list. */
  leave(roomId: string, options?: { forget?: boolean }): Promise<void>;
  /** Rooms left (or kicked from) and not forgotten: they can still be forgotten. */
  leftRooms(): ChatRoom[];
  /** Forgets a room already left: it goes from every list. */
  forget(roomId: string): Promise<void>;
  roomSettings(roomId: string): RoomSettings | undefined;
  setRoomName(roomId: string, name: string): Promise<void>;
  setRoomTopic(roomId: string, topic: string): Promise<void>;
  /** Uploads the image and makes it the room's avatar (`m.room.avatar`). */
  setRoomAvatar(roomId: string, image: File): Promise<void>;
  profile(): Promise<Profile>;
  setDisplayName(name: string): Promise<void>;
  /** Uploads the image and makes it this user's avatar. */
  setAvatar(image: File): Promise<void>;
  /** Searches one room, or all (`roomId` undefined): the homeserver's search, and in encrypted rooms the messages decrypted here. */
  search(term: string, roomId?: string): Promise<SearchResults>;
  /** A user's devices, fetched from their homeserver if not known yet (empty when encryption does not run here). */
  devices(userId: string): Promise<DeviceInfo[]>;
  invite(roomId: string, userId: string): Promise<void>;
  loadOlder(roomId: string): Promise<void>;
  /** Sends a text message (markdown: bold, italic, code and links go as `formatted_body`), shown as a local echo until the homeserver has it. */
  send(roomId: string, body: string, options?: SendOptions): void;
  /**
   * Uploads a file (encrypted first in an encrypted room) and sends it as an image or file message, with
   * `caption` as its caption (Matrix v1.10: `body` the caption, `filename` the name); its progress is in `ChatRoom.uploads`.
   */
  sendFile(roomId: string, file: File, options?: { threadId?: string; caption?: string }): void;
  /** Tries a failed upload again. */
  retryUpload(roomId: string, uploadId: string): void;
  /** Drops a failed upload. */
  discardUpload(roomId: string, uploadId: string): void;
  /** An image or file message's bytes (`full`) or its thumbnail, loaded once per page (a `room` change tells when it is ready). */
  media(content: Record<string, any>, kind: 'thumbnail' | 'full'): MediaState;
  /** The same, as a promise (a download the person asked for). */
  loadMedia(content: Record<string, any>, kind: 'thumbnail' | 'full'): Promise<string>;
  /** A thread of the room: its root and replies as far as known (`openThread` fetches them). */
  thread(roomId: string, rootId: string): ChatThread | undefined;
  /** The thread pane is shown: fetches its replies from the homeserver. */
  openThread(roomId: string, rootId: string): void;
  /** The room's threads as far as known, the latest reply first: their roots, each with its summary (`thread`). */
  threads(roomId: string): MatrixEvent[];
  /** The thread list is shown: fetches the room's threads from the homeserver (`GET /threads`). */
  loadThreads(roomId: string): void;
  /** Reacts with `key`, or takes this user's reaction back if there is one. */
  react(roomId: string, eventId: string, key: string): Promise<void>;
  /** Replaces an own message's text (`m.replace`). */
  edit(roomId: string, eventId: string, body: string): Promise<void>;
  /** Deletes (redacts) an own message. */
  redact(roomId: string, eventId: string): Promise<void>;
  /** Sends a failed echo again (the same transaction ID, so it is applied once). */
  retry(roomId: string, echo: LocalEcho): void;
  /** Drops a failed echo. */
  discard(roomId: string, echo: LocalEcho): void;
  setTyping(roomId: string, typing: boolean): void;
  /**
   * The person has seen the room's newest event: the fully-read marker moves up to it (`m.fully_read`, through
   * POST /read_markers) and the read receipt to the newest event from others, each once per event.
   */
  markRead(roomId: string): void;
  /** Loads older history until `eventId` is in the room's timeline or its start is reached; resolves whether it is. */
  loadUntil(roomId: string, eventId: string): Promise<boolean>;
}

/** What a room's settings panel shows, and what this user may change (from the room's power levels). */
export interface RoomSettings {
  readonly name: string;
  readonly topic: string;
  /** An http(s) URL of the avatar's thumbnail, if the room has one. */
  readonly avatarUrl: string | undefined;
  /** Per setting: undefined when this user may change it, else why not (the power levels it takes and theirs). */
  readonly denied: { readonly name?: string; readonly topic?: string; readonly avatar?: string };
}

/** This user's own profile (the profile API). */
export interface Profile {
  readonly displayName: string | undefined;
  readonly avatarUrl: string | undefined;
}

/** A message found by search: by the homeserver (`POST /search`), or among what this page decrypted (`local`). */
export interface SearchHit {
  readonly roomId: string;
  readonly eventId: string;
  readonly sender: string;
  readonly body: string;
  readonly ts: number | undefined;
  readonly local: boolean;
}

export interface SearchResults {
  readonly hits: readonly SearchHit[];
  /** Encrypted rooms searched here only in the messages this page has loaded and decrypted: the server cannot see them. */
  readonly encryptedRooms: number;
}

/** A direct message room was made, but its invite failed: `roomId` exists, `cause` says why. */
/** A direct message not started: the other user's homeserver did not answer for them (`cause`), so nothing was created. */
export class DirectTargetUnknown extends Error {
  override name = 'DirectTargetUnknown';
  constructor(
    readonly userId: string,
    override readonly cause: unknown,
  ) {
    super(`no answer for ${userId}: nothing was created`);
  }
}

export class DirectInviteFailed extends Error {
  override name = 'DirectInviteFailed';
  constructor(
    readonly roomId: string,
    override readonly cause: unknown,
  ) {
    super('the direct message was created, but the invite failed');
  }
}

/** Sessions: the one kept for this origin, and new ones. */
export interface ChatAccounts {
  /** Resolves once the homeserver answers. */
  waitForHomeserver(): Promise<void>;
  /** The client of the kept session, unless the homeserver no longer takes it. */
  resume(): Promise<ChatClient | undefined>;
  register(username: string, password: string): Promise<ChatClient>;
  login(username: string, password: string): Promise<ChatClient>;
  /** Runs `listener` when another tab signed in or out. */
  onSessionChanged(listener: () => void): void;
}
