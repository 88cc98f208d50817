import type { ChatClient, ChatRoom, RoomSettings } from './chat.ts';
import type { Composer } from './composer.ts';
import { copyText, h } from './dom.ts';
import { updateKeyedChildren } from './keyed-children.ts';
import { firstUnread, timelineItems, type FirstUnread, type TimelineActions } from './timeline.ts';

/** How near the end (in px) still counts as reading the newest. */
const AT_END = 40;

/**
 * The open room: its name and ID, the timeline, who is typing, the composer (and files dropped on it). The timeline follows the
 * conversation (issue 38): while the person is at its end it stays there, through new messages, a resize
 * (a phone's keyboard, a rotated screen) and images that load; one's own new message always scrolls into
 * view; another's, while the person reads further up, shows a "New messages" button instead.
 * Read markers (issue 38), as Element shows them: a room opened with messages newer than the person's fully-read
 * marker shows a "New" line before the first of them, kept there while the room stays open, and "Jump to first
 * unread" while that line is above what shows (loading the history back to it when it is older than what is loaded).
 */
export class RoomView {
  readonly element = h('section', { class: 'room' });
  private readonly timeline = h('ol', { class: 'timeline', 'aria-label': 'Timeline', 'aria-live': 'polite' });
  private readonly newMessages = h('button', { type: 'button', class: 'new-messages small', hidden: true, onclick: () => this.scrollToEnd() }, 'New messages \u2193');
  private readonly jumpToUnread: HTMLButtonElement = h('button', { type: 'button', class: 'jump-unread small', hidden: true, onclick: () => this.jump() }, 'Jump to first unread \u2191');
  /**
   * The fully-read marker as it was when the room was opened (or the tab shown again): the line stays where the
   * person left off while the room is open, though the marker itself moves on as they read.
   */
  private readMarker: { roomId: string; eventId: string | undefined } | undefined;
  private retakeReadMarker = false;
  private unread: FirstUnread;
  private loadUntil: ((eventId: string) => Promise<boolean>) | undefined;
  /** The person is at the timeline's end (read at each scroll, not at each render: a render may have grown it). */
  private atEnd = true;
  /** The open room, and its newest item's key when it was last drawn. */
  private shown: { roomId: string; last: string | undefined } | undefined;
  private readonly typingLine = h('div', { class: 'typing', role: 'status', 'aria-label': 'Who is typing' });
  private readonly roomTitle = h('h2', { class: 'room-title' });
  /** The room's ID is 64 characters and more: not shown in the header, but copied whole (issue 38 item 7). */
  private readonly roomIdLine: HTMLButtonElement = h('button', { type: 'button', class: 'small link room-id' }, 'Copy room ID');
  private readonly encryptionLine = h('span', { class: 'room-encryption' });
  private readonly leaveButton = h('button', { type: 'button', class: 'small link room-leave' }, 'Leave room');
  private readonly threadsButton = h('button', { type: 'button', class: 'small link room-threads' }, 'Threads');
  private readonly topicLine = h('p', { class: 'room-topic hint' });
  private readonly avatar = h('img', { class: 'avatar', alt: '', hidden: true });
  /** Until the first sync answers, no room is open because none is known yet: said so rather than "create a room". */
  loading = false;
  /** Where files dropped on the room go: the composer's preview (set by `build`). */
  private dropFiles: ((files: File[]) => void) | undefined;

  /** `onSeenNewest`: the person scrolled down to the newest message. */
  constructor(private readonly onSeenNewest: () => void = () => undefined) {
    this.timeline.addEventListener('scroll', () => {
      const wasAtEnd = this.atEnd;
      this.readAtEnd();
      if (this.atEnd) this.newMessages.hidden = true;
      this.updateJump();
      if (this.atEnd && !wasAtEnd) this.onSeenNewest();
    });
    // Resized (the window, a phone's keyboard, the panes around it) or grown by an image: still at the end if it was.
    new ResizeObserver(() => {
      if (this.atEnd) this.pinToEnd();
      this.updateJump();
    }).observe(this.timeline);
    this.timeline.addEventListener('load', () => this.atEnd && this.pinToEnd(), true);
    this.takeDroppedFiles();
  }

  /**
   * Files dragged onto the room (its timeline or its composer) are taken, the room outlined while they are
   * over it, and dropped go to the composer's preview. Their dragover is cancelled, which is what lets a
   * browser drop them here rather than open them in place of the page.
   */
  private takeDroppedFiles(): void {
    const carriesFiles = (event: DragEvent): boolean => event.dataTransfer?.types.includes('Files') ?? false;
    const over = (event: DragEvent): void => {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      event.dataTransfer!.dropEffect = 'copy';
      this.element.classList.add('drop-target');
    };
    this.element.addEventListener('dragenter', over);
    this.element.addEventListener('dragover', over);
    this.element.addEventListener('dragleave', (event) => {
      if (!this.element.contains(event.relatedTarget as Node | null)) this.element.classList.remove('drop-target');
    });
    this.element.addEventListener('drop', (event) => {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      this.element.classList.remove('drop-target');
      this.dropFiles?.([...event.dataTransfer!.files]);
    });
  }

  private pinToEnd(): void {
    this.timeline.scrollTop = this.timeline.scrollHeight;
  }

  /**
   * Whether the timeline shows its end, read from where it is scrolled. At each scroll event, and at once when the page
   * itself scrolls it up ("Jump to first unread"): the scroll event comes a frame later, and a render (a sync) or a
   * resize before it took the person to be still at the end and pinned the timeline back there (seen in WebKit).
   */
  private readAtEnd(): void {
    this.atEnd = this.timeline.scrollHeight - this.timeline.scrollTop - this.timeline.clientHeight < AT_END;
  }

  /** The open room's newest message is in view: at the timeline's end, on screen (not a phone's other tab). */
  get seesNewest(): boolean {
    return !!this.shown && this.atEnd && this.timeline.getClientRects().length > 0;
  }

  /** The person would see a new message as it comes: the open room at its end, and the tab shown. */
  private get watching(): boolean {
    return this.seesNewest && document.visibilityState === 'visible';
  }

  /** The tab is shown again: the line goes where the marker is now (what came while hidden is new). */
  rememberReadMarker(): void {
    this.retakeReadMarker = true;
  }

  /** "Jump to first unread" shows while the "New" line is above what shows, or older than the history loaded. */
  private updateJump(): void {
    const line = this.timeline.querySelector('.read-marker');
    this.jumpToUnread.hidden = line ? line.getBoundingClientRect().bottom > this.timeline.getBoundingClientRect().top : this.unread !== 'above';
  }

  private jump(): void {
    const line = this.timeline.querySelector('.read-marker');
    if (line) return this.scrollToLine(line);
    const marker = this.readMarker;
    if (this.unread !== 'above' || !marker?.eventId || !this.loadUntil) return;
    this.jumpToUnread.disabled = true;
    void this.loadUntil(marker.eventId).then(() => {
      this.jumpToUnread.disabled = false;
      const loaded = this.shown?.roomId === marker.roomId && this.timeline.querySelector('.read-marker');
      if (loaded) this.scrollToLine(loaded);
      this.updateJump();
    });
  }

  /** Where the "New" line is, from the top of the timeline's box (negative: above what shows); undefined without one. */
  private lineTop(): number | undefined {
    const line = this.timeline.querySelector('.read-marker');
    return line ? line.getBoundingClientRect().top - this.timeline.getBoundingClientRect().top : undefined;
  }

  /** The same, when the line shows. */
  private lineInView(): number | undefined {
    const top = this.lineTop();
    const height = this.timeline.clientHeight;
    return top === undefined || top < 0 || top > height ? undefined : top;
  }

  /** The "New" line at the top of what shows, the first unread message under it. */
  private scrollToLine(line: Element): void {
    const gap = parseFloat(getComputedStyle(this.timeline).paddingTop) || 0;
    this.timeline.scrollTop += line.getBoundingClientRect().top - this.timeline.getBoundingClientRect().top - gap;
    this.readAtEnd();
  }

  private scrollToEnd(): void {
    this.atEnd = true;
    this.newMessages.hidden = true;
    this.pinToEnd();
  }

  /** Builds the pane around the composer (again at each sign-in), under the encryption panel; the settings and search folds under the header. */
  build(composer: Composer, encryptionPanel: HTMLElement, folds: HTMLElement[] = []): void {
    this.dropFiles = (files) => composer.attachFiles(files);
    this.element.replaceChildren(
      encryptionPanel,
      h('header', { class: 'room-header' }, this.avatar, this.roomTitle, this.encryptionLine, this.roomIdLine, this.threadsButton, this.leaveButton, this.topicLine),
      h('div', { class: 'room-folds' }, ...folds),
      this.jumpToUnread,
      this.timeline,
      this.newMessages,
      this.typingLine,
      composer.element,
    );
  }

  /** `settings`: the client's `roomSettings(room.id)`. */
  render(
    client: ChatClient,
    room: ChatRoom | undefined,
    settings: RoomSettings | undefined,
    actions: TimelineActions & { leave(): void; threads(): void; loadUntil(eventId: string): Promise<boolean> },
  ): void {
    this.element.classList.toggle('empty', !room);
    this.leaveButton.hidden = this.threadsButton.hidden = !room;
    this.leaveButton.onclick = () => actions.leave();
    this.threadsButton.onclick = () => actions.threads();
    if (!room) {
      this.roomTitle.textContent = this.loading ? 'Loading your rooms…' : 'No room selected';
      this.roomIdLine.hidden = true;
      delete this.roomIdLine.dataset.roomId;
      this.topicLine.hidden = true;
      this.avatar.hidden = true;
      this.encryptionLine.textContent = '';
      this.timeline.replaceChildren(this.loading ? h('li', { class: 'notice loading', role: 'status' }, 'Loading…') : h('li', { class: 'notice' }, 'Create a room, or join one by its ID, to start talking.'));
      this.typingLine.textContent = '';
      this.shown = undefined;
      this.newMessages.hidden = true;
      this.readMarker = this.unread = undefined;
      this.jumpToUnread.hidden = true;
      return;
    }
    this.roomTitle.textContent = client.roomName(room);
    this.topicLine.textContent = settings?.topic ?? '';
    this.topicLine.hidden = !settings?.topic;
    this.avatar.hidden = !settings?.avatarUrl;
    if (settings?.avatarUrl && this.avatar.src !== settings.avatarUrl) this.avatar.src = settings.avatarUrl;
    if (this.roomIdLine.dataset.roomId !== room.id) this.roomIdLine.textContent = 'Copy room ID';
    this.roomIdLine.hidden = false;
    this.roomIdLine.dataset.roomId = room.id;
    this.roomIdLine.title = `Room ID ${room.id}: share it so others can join`;
    this.roomIdLine.onclick = () => void copyText(room.id, this.roomTitle, this.roomIdLine);
    this.encryptionLine.textContent = room.encrypted ? 'Encrypted' : room.isPublic ? 'Public room: not encrypted' : 'Not encrypted';
    this.encryptionLine.title = room.encrypted
      ? 'End-to-end encrypted: only the members\u2019 devices can read its messages, not the servers that carry them.'
      : 'Messages are stored readable on every server in the room.';
    this.encryptionLine.dataset.encrypted = String(room.encrypted);

    const opened = this.shown?.roomId !== room.id;
    if (opened || this.retakeReadMarker) this.readMarker = { roomId: room.id, eventId: room.fullyRead };
    // Nothing was new and the person watches the end: what arrives now is seen as it comes, not "new since you last read".
    else if (this.readMarker && this.unread === undefined && this.watching) this.readMarker.eventId = room.timeline.at(-1)?.event_id ?? this.readMarker.eventId;
    this.retakeReadMarker = false;
    this.unread = firstUnread(client, room, this.readMarker?.eventId);
    this.loadUntil = (eventId) => actions.loadUntil(eventId);
    const items = timelineItems(client, room, actions, typeof this.unread === 'object' ? this.unread.eventId : undefined);
    const newest = items.at(-1);
    const last = newest?.dataset.eventId ?? newest?.dataset.txnId ?? newest?.dataset.uploadId;
    const arrived = !opened && last !== undefined && last !== this.shown?.last;
    // One's own: a local echo, an upload, or a message of this user's.
    const mine = !!newest && (newest.classList.contains('mine') || newest.classList.contains('pending'));
    this.shown = { roomId: room.id, last };
    // Read further up with the "New" line in view: it stays where it shows while what is above it changes (older
    // messages loaded, or decrypted and grown), which browsers without scroll anchoring (Safari) would not keep.
    const lineAt = opened || this.atEnd ? undefined : this.lineInView();
    updateKeyedChildren(this.timeline, items);
    if (opened || (arrived && mine)) this.scrollToEnd();
    else if (this.atEnd) this.pinToEnd();
    else {
      if (arrived) this.newMessages.hidden = false;
      const lineNow = lineAt === undefined ? undefined : this.lineTop();
      if (lineAt !== undefined && lineNow !== undefined) this.timeline.scrollTop += lineNow - lineAt;
    }
    this.updateJump();

    const typing = room.typing.filter((userId) => userId !== client.userId).map((userId) => client.displayName(room, userId));
    this.typingLine.textContent = typing.length === 0 ? '' : `${typing.join(', ')} ${typing.length === 1 ? 'is' : 'are'} typing\u2026`;
  }
}
