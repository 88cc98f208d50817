import type { ChatClient, ChatRoom, RoomSettings } from './chat.ts';
import type { Composer } from './composer.ts';
import { h } from './dom.ts';
import { updateKeyedChildren } from './keyed-children.ts';
import { timelineItems, type TimelineActions } from './timeline.ts';

/** The open room: its name and ID, the timeline (kept scrolled to the end when it was there), who is typing, the composer. */
export class RoomView {
  readonly element = h('section', { class: 'room' });
  private readonly timeline = h('ol', { class: 'timeline', 'aria-label': 'Timeline', 'aria-live': 'polite' });
  private readonly typingLine = h('div', { class: 'typing', 'aria-live': 'polite' });
  private readonly roomTitle = h('h2', { class: 'room-title' });
  private readonly roomIdLine = h('code', { class: 'room-id' });
  private readonly encryptionLine = h('span', { class: 'room-encryption' });
  private readonly leaveButton = h('button', { type: 'button', class: 'small link room-leave' }, 'Leave room');
  private readonly threadsButton = h('button', { type: 'button', class: 'small link room-threads' }, 'Threads');
  private readonly topicLine = h('p', { class: 'room-topic hint' });
  private readonly avatar = h('img', { class: 'avatar', alt: '', hidden: true });
  /** Until the first sync answers, no room is open because none is known yet: said so rather than "create a room". */
  loading = false;

  /** Builds the pane around the composer (again at each sign-in), under the encryption panel; the settings and search folds under the header. */
  build(composer: Composer, encryptionPanel: HTMLElement, folds: HTMLElement[] = []): void {
    this.element.replaceChildren(
      encryptionPanel,
      h('header', { class: 'room-header' }, this.avatar, this.roomTitle, this.encryptionLine, this.roomIdLine, this.threadsButton, this.leaveButton, this.topicLine),
      h('div', { class: 'room-folds' }, ...folds),
      this.timeline,
      this.typingLine,
      composer.element,
    );
  }

  /** `settings`: the client's `roomSettings(room.id)`. */
  render(client: ChatClient, room: ChatRoom | undefined, settings: RoomSettings | undefined, actions: TimelineActions & { leave(): void; threads(): void }): void {
    this.element.classList.toggle('empty', !room);
    this.leaveButton.hidden = this.threadsButton.hidden = !room;
    this.leaveButton.onclick = () => actions.leave();
    this.threadsButton.onclick = () => actions.threads();
    if (!room) {
      this.roomTitle.textContent = this.loading ? 'Loading your rooms…' : 'No room selected';
      this.roomIdLine.textContent = '';
      this.topicLine.hidden = true;
      this.avatar.hidden = true;
      this.encryptionLine.textContent = '';
      this.timeline.replaceChildren(this.loading ? h('li', { class: 'notice loading', role: 'status' }, 'Loading…') : h('li', { class: 'notice' }, 'Create a room, or join one by its ID, to start talking.'));
      this.typingLine.textContent = '';
      return;
    }
    this.roomTitle.textContent = client.roomName(room);
    this.topicLine.textContent = settings?.topic ?? '';
    this.topicLine.hidden = !settings?.topic;
    this.avatar.hidden = !settings?.avatarUrl;
    if (settings?.avatarUrl && this.avatar.src !== settings.avatarUrl) this.avatar.src = settings.avatarUrl;
    this.roomIdLine.textContent = room.id;
    this.roomIdLine.title = 'Room ID: share it so others can join';
    this.encryptionLine.textContent = room.encrypted ? 'Encrypted' : room.isPublic ? 'Public room: not encrypted' : 'Not encrypted';
    this.encryptionLine.title = room.encrypted
      ? 'End-to-end encrypted: only the members\u2019 devices can read its messages, not the servers that carry them.'
      : 'Messages are stored readable on every server in the room.';
    this.encryptionLine.dataset.encrypted = String(room.encrypted);

    const atBottom = this.timeline.scrollHeight - this.timeline.scrollTop - this.timeline.clientHeight < 40;
    updateKeyedChildren(this.timeline, timelineItems(client, room, actions));
    if (atBottom) this.timeline.scrollTop = this.timeline.scrollHeight;

    const typing = room.typing.filter((userId) => userId !== client.userId).map((userId) => client.displayName(room, userId));
    this.typingLine.textContent = typing.length === 0 ? '' : `${typing.join(', ')} ${typing.length === 1 ? 'is' : 'are'} typing\u2026`;
  }
}
