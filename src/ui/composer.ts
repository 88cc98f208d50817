import type { ChatClient, ChatRoom, MatrixEvent } from './chat.ts';
import { h } from './dom.ts';
import { previewFiles } from './attachment-preview.ts';
import { describeError } from './errors.ts';

/** Typing notices are refreshed this often while typing, and cleared after this much quiet. */
const TYPING_REFRESH_MS = 20_000;
const TYPING_IDLE_MS = 4_000;

/** Where a composer sends: the open room, and in a thread's pane that thread. */
export interface ComposerTarget {
  client: ChatClient;
  room: ChatRoom;
  threadId?: string;
}

export interface ComposerOptions {
  id: string;
  label: string;
  placeholder: string;
  /** Offers "Attach a file" (and takes pasted or dropped files), each previewed with a caption before it goes. */
  attach: boolean;
}

const ROOM_COMPOSER: ComposerOptions = { id: 'composer', label: 'Message', placeholder: 'Write a message\u2026', attach: true };

/** The message field under the timeline: sends to the open room, and tells it while someone types; files go as attachments, once previewed. */
export class Composer {
  readonly input: HTMLInputElement;
  readonly element: HTMLFormElement;
  private readonly fileInput = h('input', { type: 'file', multiple: true, hidden: true, 'aria-label': 'File to attach' });
  /** "Replying to …" or "Editing", with Cancel; empty otherwise. */
  private readonly context = h('div', { class: 'composer-context', role: 'status' });
  private readonly error = h('p', { class: 'error', role: 'alert' });
  private replyTo: { roomId: string; eventId: string } | undefined;
  private editing: { roomId: string; eventId: string } | undefined;
  private typingSentAt = 0;
  private typingIdleTimer: ReturnType<typeof setTimeout> | undefined;

  /** `open`: the client and the room messages go to, if a joined room is open. */
  constructor(
    private readonly open: () => ComposerTarget | undefined,
    options: ComposerOptions = ROOM_COMPOSER,
  ) {
    this.input = h('input', { id: options.id, name: 'message', autocomplete: 'off', placeholder: options.placeholder, 'aria-label': options.label });
    const attach = options.attach
      ? h('button', { type: 'button', class: 'attach', 'aria-label': 'Attach a file', title: 'Attach an image or a file', onclick: () => this.fileInput.click() }, '\u{1F4CE}')
      : null;
    this.element = h(
      'form',
      { class: 'composer', onsubmit: (e: Event) => this.onSend(e) },
      this.context,
      this.error,
      options.attach ? this.fileInput : null,
      attach,
      this.input,
      h('button', { type: 'submit', class: 'primary' }, 'Send'),
    );
    this.input.oninput = () => this.onTyping();
    if (!options.attach) return;
    this.fileInput.onchange = () => {
      // Copied first: clearing the field empties its list.
      const files = [...(this.fileInput.files ?? [])];
      this.fileInput.value = '';
      this.attachFiles(files);
    };
    // A pasted image goes the same way (a dropped file comes through the room view, `attachFiles`).
    this.input.addEventListener('paste', (e) => {
      if (e.clipboardData?.files.length) {
        e.preventDefault();
        this.attachFiles([...e.clipboardData.files]);
      }
    });
  }

  /**
   * Files picked, pasted or dropped: previewed with a caption field each (`previewFiles`), and sent to the room
   * (or thread) open now only when the person says Send.
   */
  attachFiles(files: readonly File[]): void {
    const open = this.open();
    if (!open || files.length === 0) return;
    const { client, threadId } = open;
    const roomId = open.room.id;
    previewFiles(files, (chosen) => {
      for (const { file, caption } of chosen) client.sendFile(roomId, file, { threadId, caption });
      this.input.focus();
    });
  }

  /** Answers `event`: the next message sent is its reply. */
  replyToEvent(roomId: string, event: MatrixEvent, who: string): void {
    this.editing = undefined;
    this.replyTo = { roomId, eventId: event.event_id! };
    this.showContext(`Replying to ${who}: ${String(event.content.body ?? '').slice(0, 80)}`);
    this.input.focus();
  }

  /** Puts an own message's text in the field: sending replaces it. */
  editEvent(roomId: string, event: MatrixEvent): void {
    this.replyTo = undefined;
    this.editing = { roomId, eventId: event.event_id! };
    this.input.value = String(event.content.body ?? '');
    this.showContext('Editing your message');
    this.input.focus();
  }

  private showContext(text: string): void {
    this.context.replaceChildren(h('span', {}, text), h('button', { type: 'button', class: 'small link', onclick: () => this.clearContext() }, 'Cancel'));
  }

  private clearContext(): void {
    if (this.editing) this.input.value = '';
    this.replyTo = this.editing = undefined;
    this.context.replaceChildren();
  }

  private onSend(event: Event): void {
    event.preventDefault();
    const open = this.open();
    let body = this.input.value.trim();
    if (!open || !body) return;
    const roomId = open.room.id;
    this.error.textContent = '';
    this.input.value = '';
    this.stopTyping(open.client, roomId);
    const editing = this.editing?.roomId === roomId ? this.editing : undefined;
    const replyTo = this.replyTo?.roomId === roomId ? this.replyTo.eventId : undefined;
    this.replyTo = this.editing = undefined;
    this.context.replaceChildren();
    if (editing) {
      open.client.edit(roomId, editing.eventId, body).catch((error) => (this.error.textContent = `Not edited. ${describeError(error)}`));
      return;
    }
    // "/me waves" is an action: sent as an emote ("* ana waves").
    const emote = /^\/me\s/.test(body);
    if (emote) body = body.replace(/^\/me\s+/, '');
    open.client.send(roomId, body, { replyTo, emote, threadId: open.threadId });
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
