import type { ChatClient, ChatRoom, ChatThread } from './chat.ts';
import { Composer, type ComposerTarget } from './composer.ts';
import { h } from './dom.ts';
import { threadItems, type TimelineActions } from './timeline.ts';

/**
 * A thread's pane, beside the room on a wide screen and in the room's place on a phone (with Back):
 * its root, its replies, and a composer whose messages go into the thread (`m.thread`).
 */
export class ThreadView {
  readonly element = h('section', { class: 'thread', 'aria-label': 'Thread' });
  readonly composer: Composer;
  private readonly list = h('ol', { class: 'timeline thread-timeline', 'aria-label': 'Thread replies', 'aria-live': 'polite' });
  private readonly backButton = h('button', { type: 'button', class: 'small thread-back' }, 'Back');

  constructor(target: () => ComposerTarget | undefined, close: () => void) {
    this.composer = new Composer(target, { id: 'thread-composer', label: 'Thread reply', placeholder: 'Reply in the thread\u2026', attach: false });
    this.backButton.onclick = close;
    this.element.append(h('header', { class: 'thread-header' }, this.backButton, h('h2', { class: 'thread-title' }, 'Thread')), this.list, this.composer.element);
  }

  render(client: ChatClient, room: ChatRoom, thread: ChatThread, actions: TimelineActions): void {
    const atBottom = this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight < 40;
    this.list.replaceChildren(...threadItems(client, room, thread, actions));
    if (atBottom) this.list.scrollTop = this.list.scrollHeight;
  }
}
