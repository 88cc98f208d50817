import type { ChatClient, ChatRoom, ChatThread, MatrixEvent } from './chat.ts';
import { Composer, type ComposerTarget } from './composer.ts';
import { h } from './dom.ts';
import { threadItems, threadSummary, type TimelineActions } from './timeline.ts';

/**
 * A thread's pane, beside the room on a wide screen and in the room's place on a phone (with Back):
 * its root, its replies, and a composer whose messages go into the thread (`m.thread`); or the room's
 * threads, each root with its summary, one tap from its thread.
 */
export class ThreadView {
  readonly element = h('section', { class: 'thread', 'aria-label': 'Thread' });
  readonly composer: Composer;
  private readonly title = h('h2', { class: 'thread-title' }, 'Thread');
  private readonly list = h('ol', { class: 'timeline thread-timeline', 'aria-label': 'Thread replies', 'aria-live': 'polite' });
  private readonly threadList = h('ol', { class: 'timeline thread-list', 'aria-label': 'Threads' });
  private readonly backButton = h('button', { type: 'button', class: 'small thread-back' }, 'Back');

  constructor(target: () => ComposerTarget | undefined, close: () => void) {
    this.composer = new Composer(target, { id: 'thread-composer', label: 'Thread reply', placeholder: 'Reply in the thread\u2026', attach: false });
    this.backButton.onclick = close;
    this.element.append(h('header', { class: 'thread-header' }, this.backButton, this.title), this.threadList, this.list, this.composer.element);
  }

  render(client: ChatClient, room: ChatRoom, thread: ChatThread, actions: TimelineActions): void {
    this.show('thread');
    const atBottom = this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight < 40;
    this.list.replaceChildren(...threadItems(client, room, thread, actions));
    if (atBottom) this.list.scrollTop = this.list.scrollHeight;
  }

  /** The room's threads (`client.threads`): each root's sender and text, and its summary, which opens it. */
  renderList(client: ChatClient, room: ChatRoom, roots: readonly MatrixEvent[], actions: TimelineActions): void {
    this.show('list');
    this.threadList.replaceChildren(
      ...(roots.length === 0
        ? [h('li', { class: 'notice' }, 'No threads in this room yet: "Reply in thread" under a message starts one.')]
        : roots.map((root) =>
            h(
              'li',
              { class: 'event thread-list-item', 'data-event-id': root.event_id },
              h('div', { class: 'meta' }, h('span', { class: 'sender', title: root.sender }, client.displayName(room, root.sender))),
              h('div', { class: 'body' }, root.undecryptable ? 'Unable to decrypt this message' : String(root.content['body'] ?? '')),
              threadSummary(client, room, root, actions),
            ),
          )),
    );
  }

  private show(mode: 'thread' | 'list'): void {
    this.title.textContent = mode === 'list' ? 'Threads' : 'Thread';
    this.threadList.hidden = mode !== 'list';
    this.list.hidden = this.composer.element.hidden = mode === 'list';
  }
}
