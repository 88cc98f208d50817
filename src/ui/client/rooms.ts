/** matrix-js-sdk's rooms as the views read them (`ChatRoom`, ../chat.ts): a fresh snapshot at each call. */
import { ClientEvent, Direction, EventStatus, EventType, KnownMembership, MatrixEventEvent, NotificationCountType, RelationType, RoomEvent, RoomMemberEvent, RoomStateEvent, ThreadEvent, type MatrixClient, type MatrixEvent as SdkEvent, type Room } from 'matrix-js-sdk';
import type { ChatRoom, ChatThread, LocalEcho, MatrixEvent, Member, Reaction, Upload } from '../chat.ts';
import { chatCall, toChatError, toChatEvent } from './convert.ts';

/** `txnId` → a message refused before it was sent (too large): the SDK never saw it. */
export type RefusedEchoes = Map<string, LocalEcho[]>;

export function chatRoom(client: MatrixClient, room: Room, refused: RefusedEchoes, direct: ReadonlySet<string>, uploads: readonly Upload[]): ChatRoom {
  const me = client.getSafeUserId();
  const membership = room.getMyMembership();
  const myMember = room.currentState.getMember(me) ?? room.getMember(me);
  const receipts = new Map<string, string>();
  const typing: string[] = [];
  for (const member of room.getMembers()) {
    if (member.typing) typing.push(member.userId);
    const eventId = member.membership === KnownMembership.Join ? room.getEventReadUpTo(member.userId, true) : null;
    if (eventId) receipts.set(member.userId, eventId);
  }
  const localEchoes: LocalEcho[] = [
    // A thread's replies show in its pane, not in the room's timeline.
    ...pendingMessages(room, (event) => !event.threadRootId),
    ...(refused.get(room.roomId) ?? []),
  ];
  return {
    id: room.roomId,
    membership: membership === KnownMembership.Invite ? 'invite' : membership === KnownMembership.Join ? 'join' : 'leave',
    inviter: membership === KnownMembership.Invite ? myMember?.events.member?.getSender() : undefined,
    timeline: room.getLiveTimeline().getEvents().map((event) => chatEvent(room, event, me)),
    typing,
    receipts,
    fullyRead: fullyRead(room, me),
    localEchoes,
    uploads,
    encrypted: room.hasEncryptionStateEvent(),
    isPublic: room.getJoinRule() === 'public',
    isDirect: direct.has(room.roomId) || (membership === KnownMembership.Invite && myMember?.events.member?.getContent()['is_direct'] === true),
    unread: room.getUnreadNotificationCount(NotificationCountType.Total),
    highlights: room.getUnreadNotificationCount(NotificationCountType.Highlight),
  };
}

/** Where "new since you last read" starts: the `m.fully_read` marker, as Element reads it, or failing one this user's read receipt. */
function fullyRead(room: Room, me: string): string | undefined {
  const marker = room.getAccountData(EventType.FullyRead)?.getContent()['event_id'];
  if (typeof marker === 'string' && marker !== '') return marker;
  return room.getEventReadUpTo(me) ?? undefined;
}

/** This page's messages the homeserver has not taken yet. Messages only: an edit's or a reaction's echo shows on its target, not as a message of its own. */
function pendingMessages(room: Room, where: (event: SdkEvent) => boolean): LocalEcho[] {
  return room
    .getPendingEvents()
    .filter((event) => event.getType() === EventType.RoomMessage && !event.isRelation(RelationType.Replace) && where(event))
    .map((event) => ({
      txnId: event.getTxnId() ?? event.getId() ?? '',
      body: String(event.getContent()['body'] ?? ''),
      failed: event.status === EventStatus.NOT_SENT,
      error: event.error ? toChatError(event.error) : undefined,
    }));
}

/** A thread (matrix-js-sdk's, with threadSupport): its root, and its replies as far as fetched. */
export function chatThread(client: MatrixClient, room: Room, rootId: string): ChatThread {
  const me = client.getSafeUserId();
  const thread = room.getThread(rootId);
  const root = thread?.rootEvent ?? room.findEventById(rootId);
  const replies = (thread?.events ?? []).filter((e) => e.getId() !== rootId && !e.isSending() && e.status !== EventStatus.NOT_SENT);
  return {
    rootId,
    root: root ? chatEvent(room, root, me) : undefined,
    replies: replies.map((e) => chatEvent(room, e, me)),
    localEchoes: pendingMessages(room, (event) => event.threadRootId === rootId),
  };
}

/** Decrypts an event the SDK has not (yet): its Decrypted event redraws. */
function decryptWhenShown(room: Room, event: SdkEvent): void {
  if (event.shouldAttemptDecryption()) void room.client.decryptEventIfNeeded(event);
}

/** An event with what the SDK knows around it: its newest edit, its reactions, the message it answers, its thread. */
function chatEvent(room: Room, event: SdkEvent, me: string): MatrixEvent {
  // Under sliding sync the SDK decrypts only a room's newest events and those after the read receipt
  // (decryptCriticalEvents), and none that came bundled (an edit's replacement); the rest are decrypted
  // when shown, as Element does (their Decrypted event redraws). Until then an edited message has no content.
  decryptWhenShown(room, event);
  const replacement = event.replacingEvent();
  if (replacement) decryptWhenShown(room, replacement);
  const plain = toChatEvent(event);
  const id = event.getId();
  if (event.isRedacted()) return { ...plain, redacted: true };
  if (event.replacingEvent()) plain.edited = true;
  const annotations = id ? room.relations.getChildEventsForEvent(id, RelationType.Annotation, EventType.Reaction)?.getSortedAnnotationsByKey() : null;
  if (annotations?.length) {
    plain.reactions = annotations.map(([key, events]): Reaction => ({ key, count: events.size, mine: [...events].some((e) => e.getSender() === me && !e.isRedacted()) }));
  }
  const thread = id ? room.getThread(id) : null;
  if (thread && thread.length > 0) {
    const latest = thread.replyToEvent;
    // The latest reply may come bundled with the root, still encrypted: decrypted here (its Decrypted event redraws).
    if (latest?.isEncrypted() && latest.getType() === EventType.RoomMessageEncrypted) void room.client.decryptEventIfNeeded(latest);
    const body = latest?.getType() === EventType.RoomMessageEncrypted ? '\u2026' : String(latest?.getContent()['body'] ?? '');
    plain.thread = { count: thread.length, latest: latest ? { sender: latest.getSender() ?? '', body } : undefined };
  }
  const replyId = event.replyEventId;
  // A thread reply's `m.in_reply_to` is a fallback for clients without threads (`is_falling_back`), not a reply.
  // Read from the event's own relation: an edited reply's content is its `m.new_content`, which has none.
  if (replyId && !event.getRelation()?.is_falling_back) {
    const original = room.findEventById(replyId);
    plain.replyTo = { eventId: replyId, sender: original?.getSender(), body: original ? String(original.getContent()['body'] ?? '') : undefined };
  }
  return plain;
}

/** The room's threads the SDK knows (from timelines and `GET /threads`), the latest reply first, as their roots. */
export function chatThreadRoots(client: MatrixClient, room: Room): MatrixEvent[] {
  const me = client.getSafeUserId();
  const latest = (t: ReturnType<Room['getThreads']>[number]) => t.replyToEvent?.getTs() ?? t.rootEvent?.getTs() ?? 0;
  return room
    .getThreads()
    .filter((t) => t.rootEvent && t.length > 0)
    .sort((a, b) => latest(b) - latest(a))
    .map((t) => chatEvent(room, t.rootEvent!, me));
}

/** Rooms listed in this account's `m.direct` (user ID → room IDs). */
export function directRoomIds(client: MatrixClient): Set<string> {
  const content = (client.getAccountData(EventType.Direct)?.getContent() ?? {}) as Record<string, unknown>;
  return new Set(Object.values(content).flatMap((ids) => (Array.isArray(ids) ? ids.filter((id): id is string => typeof id === 'string') : [])));
}

export function displayName(room: Room | null, userId: string): string {
  const name = room?.getMember(userId)?.events.member?.getContent()['displayname'];
  return typeof name === 'string' && name !== '' ? name : (userId.replace(/^@/, '').split(':')[0] ?? userId);
}

/** The room's name, its alias, or who else is in it. */
export function roomName(client: MatrixClient, room: Room): string {
  const name = room.currentState.getStateEvents(EventType.RoomName, '')?.getContent()['name'];
  if (typeof name === 'string' && name !== '') return name;
  const alias = room.getCanonicalAlias();
  if (alias) return alias;
  const me = client.getSafeUserId();
  const others = room.getMembers().filter((m) => m.userId !== me && (m.membership === KnownMembership.Join || m.membership === KnownMembership.Invite));
  if (others.length > 0) return others.map((m) => displayName(room, m.userId)).join(', ');
  // Under sliding sync a listed room holds only this user's membership: the SDK names it from the homeserver's heroes.
  if (room.getMyMembership() !== KnownMembership.Invite && room.name && !room.name.startsWith('Empty room')) return room.name;
  // An invite: the inviter's name, if the stripped state says no more.
  if (room.getMyMembership() === KnownMembership.Invite) {
    const inviter = room.getMember(me)?.events.member?.getSender();
    return inviter ? displayName(room, inviter) : 'Invitation';
  }
  return 'Empty room';
}

export function joinedMembers(room: Room): Member[] {
  return room
    .getMembers()
    .filter((m) => m.membership === KnownMembership.Join || m.membership === KnownMembership.Invite)
    .map((m) => ({ userId: m.userId, displayName: m.events.member?.getContent()['displayname'] as string | undefined, membership: m.membership ?? 'join' }))
    .sort((a, b) => displayName(room, a.userId).localeCompare(displayName(room, b.userId)));
}

/** Events before the live timeline can be fetched, and its start (the create event) is not in it. */
export function canLoadOlder(room: Room): boolean {
  const timeline = room.getLiveTimeline();
  return timeline.getPaginationToken(Direction.Backward) !== null && !timeline.getEvents().some((e) => e.getType() === EventType.RoomCreate);
}

/**
 * Pages the live timeline back, `pageSize` events at a time, until it holds `eventId`: false when the room's start,
 * or a page that got no further back, comes first. `paged` is told after each page.
 */
export async function loadBackTo(client: MatrixClient, room: Room, eventId: string, pageSize: number, paged: () => void): Promise<boolean> {
  const held = () => room.getLiveTimeline().getEvents().some((e) => e.getId() === eventId);
  const token = () => room.getLiveTimeline().getPaginationToken(Direction.Backward);
  while (!held()) {
    const before = token();
    if (!canLoadOlder(room)) return false;
    await chatCall(() => client.scrollback(room, pageSize));
    paged();
    if (!held() && token() === before) return false;
  }
  return true;
}

/** The SDK's events that change what a room shows (threads' are their room's, not re-emitted by the client). */
export function onRoomChanges(client: MatrixClient, changed: () => void): void {
  for (const event of [RoomEvent.Timeline, RoomEvent.LocalEchoUpdated, RoomEvent.Receipt, RoomEvent.AccountData, RoomEvent.MyMembership, RoomMemberEvent.Typing, RoomStateEvent.Events, ClientEvent.AccountData, MatrixEventEvent.Decrypted, RoomEvent.TimelineReset, RoomEvent.Redaction, RoomEvent.UnreadNotifications] as const) {
    (client as unknown as { on(event: string, listener: () => void): void }).on(event, changed);
  }
  client.on(ClientEvent.Room, (room) => {
    for (const event of [ThreadEvent.New, ThreadEvent.Update, ThreadEvent.NewReply, ThreadEvent.Delete] as const) room.on(event, changed);
  });
}
