import type { ChatClient, ChatRoom } from './chat.ts';
import { h } from './dom.ts';

/** Typing notices are refreshed this often while typing, and cleared after this much quiet. */
const TYPING_REFRESH_MS = 20_000;
const TYPING_IDLE_MS = 4_000;

/** The message field under the timeline: sends to the open room, and tells it while someone types. */
export class Composer {
  readonly input = h('input', { id: 'composer', name: 'message', autocomplete: 'off', placeholder: 'Write a message\u2026', 'aria-label': 'Message' });
  readonly element: HTMLFormElement;
  private typingSentAt = 0;
  private typingIdleTimer: ReturnType<typeof setTimeout> | undefined;

  /** `open`: the client and the room messages go to, if a joined room is open. */
  constructor(private readonly open: () => { client: ChatClient; room: ChatRoom } | undefined) {
    this.element = h('form', { class: 'composer', onsubmit: (e: Event) => this.onSend(e) }, this.input, h('button', { type: 'submit', class: 'primary' }, 'Send'));
    this.input.oninput = () => this.onTyping();
  }

  private onSend(event: Event): void {
    event.preventDefault();
    const open = this.open();
    const body = this.input.value.trim();
    if (!open || !body) return;
    this.input.value = '';
    this.stopTyping(open.client, open.room.id);
    open.client.send(open.room.id, body);
  }

  private onTyping(): void {
    const open = this.open();
    if (!open) return;
    const { client, room } = open;
    clearTimeout(this.typingIdleTimer);
    if (this.input.value === '') return this.stopTyping(client, room.id);
    if (Date.now() - this.typingSentAt > TYPING_REFRESH_MS) {
      this.typingSentAt = Date.now();
      client.setTyping(room.id, true);
    }
    this.typingIdleTimer = setTimeout(() => this.stopTyping(client, room.id), TYPING_IDLE_MS);
  }

  private stopTyping(client: ChatClient, roomId: string): void {
    clearTimeout(this.typingIdleTimer);
    if (this.typingSentAt === 0) return;
    this.typingSentAt = 0;
    client.setTyping(roomId, false);
  }
}
