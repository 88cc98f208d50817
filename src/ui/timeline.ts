import { attachmentBody, isAttachment } from './attachment.ts';
import type { ChatClient, ChatRoom, ChatThread, DecryptionProblem, LocalEcho, MatrixEvent, Upload } from './chat.ts';
import { formatBytes, formatTime, h } from './dom.ts';
import { describeSendError, describeUploadError } from './errors.ts';
import { messageBody } from './message-body.ts';

/** What the timeline's buttons do. */
export interface TimelineActions {
  loadOlder(): void;
  retry(echo: LocalEcho): void;
  discard(echo: LocalEcho): void;
  reply(event: MatrixEvent): void;
  edit(event: MatrixEvent): void;
  redact(event: MatrixEvent): void;
  react(event: MatrixEvent, key: string): void;
  /** Opens the thread of this root (a new one if it has none). */
  openThread(event: MatrixEvent): void;
  retryUpload(upload: Upload): void;
  discardUpload(upload: Upload): void;
}

/** The reactions offered on every message (with any others already given). */
export const QUICK_REACTIONS = ['\u{1F44D}', '\u2764\uFE0F', '\u{1F602}', '\u{1F389}', '\u{1F62E}', '\u{1F622}'];

/**
 * Where "new since you last read" starts in a room, from the fully-read marker as it was when the person
 * opened it: the first message from someone else after the marker (`eventId`); `above` when the marker is
 * older than the history loaded and others wrote in what is loaded; undefined when nothing is new (or there
 * is no marker).
 */
export type FirstUnread = { eventId: string } | 'above' | undefined;

export function firstUnread(client: ChatClient, room: ChatRoom, marker: string | undefined): FirstUnread {
  if (!marker) return undefined;
  const fromOthers = (event: MatrixEvent) => !!event.event_id && event.sender !== client.userId && (event.type === 'm.room.message' || event.type === 'm.room.encrypted') && !isEdit(event);
  const at = room.timeline.findIndex((event) => event.event_id === marker);
  if (at === -1) return client.canLoadOlder(room) && room.timeline.some(fromOthers) ? 'above' : undefined;
  const first = room.timeline.slice(at + 1).find(fromOthers);
  return first ? { eventId: first.event_id! } : undefined;
}

const isEdit = (event: MatrixEvent) => event.content['m.relates_to']?.rel_type === 'm.replace';

/**
 * A room's timeline as list items: "Load earlier messages" while the start is not reached,
 * each event (with who has read up to it), then this page's messages the homeserver has not
 * taken yet ("sending…", or failed with Retry and Delete). `newFrom`: the first unread
 * message, which the "New" line goes before.
 */
export function timelineItems(client: ChatClient, room: ChatRoom, actions: TimelineActions, newFrom?: string): HTMLElement[] {
  // Which event each user has read up to, for the "seen by" line.
  const readers = new Map<string, string[]>();
  for (const [userId, eventId] of room.receipts) {
    if (userId === client.userId) continue;
    readers.set(eventId, [...(readers.get(eventId) ?? []), client.displayName(room, userId)]);
  }
  const items: HTMLElement[] = [];
  if (client.canLoadOlder(room)) items.push(h('li', { class: 'more' }, h('button', { class: 'link', onclick: () => actions.loadOlder() }, 'Load earlier messages')));
  for (const event of room.timeline) {
    const item = eventItem(client, room, event, actions);
    if (!item) continue;
    if (newFrom && event.event_id === newFrom) items.push(readMarkerLine());
    const seenBy = event.event_id ? readers.get(event.event_id) : undefined;
    if (seenBy) item.append(h('div', { class: 'receipts' }, `Seen by ${seenBy.join(', ')}`));
    items.push(item);
  }
  for (const echo of room.localEchoes) items.push(echoItem(client, room, echo, actions));
  for (const upload of room.uploads) items.push(uploadItem(client, room, upload, actions));
  return items;
}

/** The line before the first message the person has not read ("new since you last read"). */
function readMarkerLine(): HTMLLIElement {
  return h('li', { class: 'read-marker', role: 'separator', 'aria-label': 'New since you last read' }, h('span', { 'aria-hidden': 'true' }, 'New'));
}

/** A thread's pane: its root, its replies, and this page's replies not yet taken. */
export function threadItems(client: ChatClient, room: ChatRoom, thread: ChatThread, actions: TimelineActions): HTMLElement[] {
  const items: HTMLElement[] = [];
  const root = thread.root && eventItem(client, room, thread.root, actions, true);
  items.push(root ? (root.classList.add('thread-root'), root) : h('li', { class: 'notice' }, 'Loading the thread…'));
  for (const event of thread.replies) {
    const item = eventItem(client, room, event, actions, true);
    if (item) items.push(item);
  }
  for (const echo of thread.localEchoes) items.push(echoItem(client, room, echo, actions));
  return items;
}

/** A message, or a notice for the state events people care about; undefined for the rest. */
function eventItem(client: ChatClient, room: ChatRoom, event: MatrixEvent, actions: TimelineActions, inThread = false): HTMLLIElement | undefined {
  const who = client.displayName(room, event.sender);
  // Edits show on the message they replace; reactions and redactions under and on theirs.
  if (event.type === 'm.room.message' && isEdit(event)) return undefined;
  if (event.redacted && (event.type === 'm.room.message' || event.type === 'm.room.encrypted')) {
    return h('li', { class: 'event redacted', 'data-event-id': event.event_id }, h('div', { class: 'meta' }, h('span', { class: 'sender', title: event.sender }, who)), h('div', { class: 'body' }, 'Message deleted'));
  }
  if (event.undecryptable) {
    return h(
      'li',
      { class: 'event undecryptable', 'data-event-id': event.event_id },
      h('div', { class: 'meta' }, h('span', { class: 'sender', title: event.sender }, who), h('time', { class: 'time' }, formatTime(event.origin_server_ts))),
      h('div', { class: 'body' }, `Unable to decrypt this message: ${describeDecryptionProblem(event.undecryptable)}`),
    );
  }
  if (event.decrypting) {
    return h('li', { class: 'event decrypting', 'data-event-id': event.event_id }, h('div', { class: 'meta' }, h('span', { class: 'sender', title: event.sender }, who)), h('div', { class: 'body' }, 'Decrypting\u2026'));
  }
  // An emoji verification asked in the room: its steps (m.key.verification.*) show in a dialog, not here.
  if (event.type === 'm.room.message' && event.content.msgtype === 'm.key.verification.request') {
    return h('li', { class: 'notice', 'data-event-id': event.event_id }, `${who} asked ${client.displayName(room, String(event.content.to ?? ''))} to verify`);
  }
  if (event.type === 'm.room.message') {
    // Stored here but not yet with every server of the room ("pending" is the class of unsent echoes).
    const waitingFor = event.event_id ? client.waitingFor(event.event_id) : undefined;
    return h(
      'li',
      { class: `${event.sender === client.userId ? 'event mine' : 'event'}${waitingFor ? ' undelivered' : ''}`, 'data-event-id': event.event_id, 'data-waiting-for': waitingFor?.length },
      h('div', { class: 'meta' }, h('span', { class: 'sender', title: event.sender }, who), h('time', { class: 'time' }, formatTime(event.origin_server_ts)), event.edited ? h('span', { class: 'edited' }, '(edited)') : null),
      event.replyTo ? replyQuote(client, room, event.replyTo) : null,
      isAttachment(event) ? attachmentBody(client, event) : messageBody(event, who),
      reactionsRow(event, actions),
      messageActions(client, event, actions, inThread),
      !inThread && event.thread ? threadSummary(client, room, event, actions) : null,
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
  else if (event.type === 'm.room.encryption') notice = `${who} turned on end-to-end encryption`;
  else if (event.type === 'm.room.topic') notice = `${who} set the topic: ${String(event.content.topic ?? '')}`;
  else if (event.type === 'm.room.member') {
    const target = event.state_key === event.sender ? who : client.displayName(room, event.state_key ?? '');
    const verb: Record<string, string> = { join: 'joined', leave: 'left', invite: 'was invited', ban: 'was banned', knock: 'knocked' };
    notice = `${target} ${verb[String(event.content.membership)] ?? 'changed membership'}`;
  }
  return notice ? h('li', { class: 'notice', 'data-event-id': event.event_id }, notice) : undefined;
}

function echoItem(client: ChatClient, room: ChatRoom, echo: LocalEcho, actions: TimelineActions): HTMLLIElement {
  return h(
    'li',
    { class: echo.failed ? 'event pending failed' : 'event pending', 'data-txn-id': echo.txnId },
    h('div', { class: 'meta' }, h('span', { class: 'sender' }, client.displayName(room, client.userId)), h('span', { class: 'time' }, echo.failed ? 'not sent' : 'sending\u2026')),
    h('div', { class: 'body' }, echo.body),
    echo.failed ? failure(describeSendError(echo.error), () => actions.retry(echo), () => actions.discard(echo)) : null,
  );
}

/** Why something of this page's was not sent, with Retry and Delete. */
function failure(why: string, retry: () => void, discard: () => void): HTMLElement {
  return h(
    'div',
    { class: 'send-failure' },
    h('span', { class: 'send-error', role: 'alert' }, why),
    h('button', { type: 'button', class: 'small', onclick: retry }, 'Retry'),
    h('button', { type: 'button', class: 'small link', onclick: discard }, 'Delete'),
  );
}

/** A file on its way: its name, how much is sent; failed, why, with Retry and Delete. */
function uploadItem(client: ChatClient, room: ChatRoom, upload: Upload, actions: TimelineActions): HTMLLIElement {
  const percent = upload.size > 0 ? Math.min(100, Math.round((upload.loaded / upload.size) * 100)) : 0;
  return h(
    'li',
    { class: upload.failed ? 'event pending upload failed' : 'event pending upload', 'data-upload-id': upload.id },
    h('div', { class: 'meta' }, h('span', { class: 'sender' }, client.displayName(room, client.userId)), h('span', { class: 'time' }, upload.failed ? 'not uploaded' : 'uploading…')),
    h('div', { class: 'body' }, `${upload.name} (${formatBytes(upload.size)})`, upload.caption?.trim() ? h('div', { class: 'upload-caption' }, upload.caption.trim()) : null),
    upload.failed
      ? failure(describeUploadError(upload.error), () => actions.retryUpload(upload), () => actions.discardUpload(upload))
      : // Indeterminate until bytes are reported sent: by the host's core as it takes them, or by the browser's XHR (none in Chromium for a request a service worker answers).
        h('progress', { class: 'upload-progress', max: 100, value: upload.loaded > 0 ? percent : undefined, 'aria-label': `Uploading ${upload.name}` }, upload.loaded > 0 ? `${percent}%` : 'uploading'),
  );
}

/** Under a thread's root: how many replies, the latest, and a button that opens it. */
export function threadSummary(client: ChatClient, room: ChatRoom, event: MatrixEvent, actions: TimelineActions): HTMLElement {
  const { count, latest } = event.thread!;
  return h(
    'button',
    { type: 'button', class: 'thread-summary', onclick: () => actions.openThread(event) },
    h('span', { class: 'thread-count' }, `${count} ${count === 1 ? 'reply' : 'replies'}`),
    latest ? h('span', { class: 'thread-latest' }, `${client.displayName(room, latest.sender)}: ${latest.body.slice(0, 80)}`) : null,
  );
}

/** Why a message cannot be read, in words (after the SDK's decryption failure codes). */
export function describeDecryptionProblem(problem: DecryptionProblem): string {
  const words: Record<DecryptionProblem, string> = {
    'no-keys': "the sender's device has not shared its key with this device (yet). It may arrive shortly.",
    withheld: 'the sender chose not to share its key with this device.',
    'withheld-unverified': 'the sender shares keys only with verified devices: verify this device with your recovery key.',
    'later-index': 'this device received the key only for later messages.',
    'before-join': 'it was sent before you joined the room.',
    'backup-missing': 'it was sent before this device was signed in, and its key is not in your key backup.',
    'backup-unset': 'it was sent before this device was signed in: verify this device with your recovery key to read it from your key backup.',
    'backup-working': 'its key is being read from your key backup.',
    'identity-changed': "the sender's verified identity has changed.",
    'unsigned-device': 'the sender did not verify the device it was sent from.',
    'unknown-device': 'it was sent from a device this one does not know.',
    other: 'the message is damaged or its key does not match.',
  };
  return words[problem];
}

function replyQuote(client: ChatClient, room: ChatRoom, replyTo: NonNullable<MatrixEvent['replyTo']>): HTMLElement {
  const who = replyTo.sender ? client.displayName(room, replyTo.sender) : 'a message';
  return h('blockquote', { class: 'reply-quote', 'data-reply-to': replyTo.eventId }, h('span', { class: 'sender' }, `In reply to ${who}`), replyTo.body === undefined ? null : h('span', { class: 'quoted' }, replyTo.body));
}

/** The reactions given, each a button that adds or takes back this user's. */
function reactionsRow(event: MatrixEvent, actions: TimelineActions): HTMLElement | null {
  if (!event.reactions?.length) return null;
  return h(
    'div',
    { class: 'reactions', 'aria-label': 'Reactions' },
    ...event.reactions.map((r) =>
      h('button', { type: 'button', class: r.mine ? 'reaction mine' : 'reaction', 'aria-pressed': String(r.mine), title: r.mine ? 'Take your reaction back' : 'React the same', onclick: () => actions.react(event, r.key) }, `${r.key} ${r.count}`),
    ),
  );
}

/** Reply and react on every message; edit and delete on one's own. */
function messageActions(client: ChatClient, event: MatrixEvent, actions: TimelineActions, inThread: boolean): HTMLElement | null {
  if (!event.event_id) return null;
  const mine = event.sender === client.userId;
  return h(
    'div',
    { class: 'message-actions' },
    h('button', { type: 'button', class: 'small link', onclick: () => actions.reply(event) }, 'Reply'),
    inThread ? null : h('button', { type: 'button', class: 'small link', onclick: () => actions.openThread(event) }, 'Reply in thread'),
    h(
      'details',
      { class: 'react-picker' },
      h('summary', { 'aria-label': 'React' }, 'React'),
      ...QUICK_REACTIONS.map((key) => h('button', { type: 'button', class: 'small link', 'aria-label': `React ${key}`, onclick: () => actions.react(event, key) }, key)),
    ),
    mine ? h('button', { type: 'button', class: 'small link', onclick: () => actions.edit(event) }, 'Edit') : null,
    mine ? h('button', { type: 'button', class: 'small link', onclick: () => actions.redact(event) }, 'Delete') : null,
  );
}
